"""The broker's topic and log keys: ``num.partitions``, ``default.replication.factor``, topic
creation and deletion, ``log.dir(s)``, and the ``log.*``, ``compression.*``, ``message.max.bytes``,
``min.insync.replicas`` keys that are the defaults of the topic-level keys (``log_config()`` turns
them into the LogConfig every topic's overrides are laid over, ``strom.storage.log_config``).

Keys Kafka derives from others here (``log.dirs`` from ``log.dir``, ``log.roll.ms`` from hours,
``log.retention.ms`` from minutes or hours, ``log.flush.interval.ms``) default to None and are
resolved by BrokerConfig (``strom.server.config``) once every key is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom import KAFKA_VERSION
from strom.server.config_keys import choice, config_key, csv_list, int_range, long_range, ratio, text
from strom.storage.log_config import (
    COMPRESSION_TYPES,
    LONG_MAX,
    TIMESTAMP_TYPES,
    LogConfig,
    parse_bool,
    parse_cleanup_policy,
    parse_compression_level,
    parse_float,
    parse_metadata_version,
)


@dataclass(frozen=True)
class LogKeys:
    """Topics and the log.* defaults of their configs."""

    # --- topics
    num_partitions: int = config_key(
        "num.partitions", 1, int_range(1), "Partitions of an auto-created topic or of a CreateTopics without a count."
    )
    default_replication_factor: int = config_key(
        "default.replication.factor",
        1,
        int_range(1),
        "Replication factor of auto-created topics and CreateTopics without one.",
    )
    auto_create_topics_enable: bool = config_key(
        "auto.create.topics.enable", True, parse_bool, "Create a topic when a client asks for its metadata."
    )
    delete_topic_enable: bool = config_key("delete.topic.enable", True, parse_bool, "Allow DeleteTopics.")
    max_request_partition_size_limit: int = config_key(
        "max.request.partition.size.limit",
        2000,
        int_range(1),
        "Most partitions one DescribeTopicPartitions response carries; the client pages for the rest.",
    )
    # --- log storage (log.* are the defaults of the topic-level keys, see log_config())
    log_dir: str = config_key("log.dir", "./strom-data", text, "Data directory, used when log.dirs is not set.")
    log_dirs: tuple[str, ...] = config_key("log.dirs", None, csv_list, "Comma list of data directories; null: log.dir.")
    num_recovery_threads_per_data_dir: int = config_key(
        "num.recovery.threads.per.data.dir",
        1,
        int_range(1),
        "Accepted for compatibility, ignored: strom is one asyncio process.",
    )
    message_max_bytes: int = config_key(
        "message.max.bytes", 1048588, int_range(0), "Largest record batch accepted (topic key max.message.bytes)."
    )
    log_segment_bytes: int = config_key(
        "log.segment.bytes", 1073741824, int_range(14), "Size at which a segment is rolled (segment.bytes)."
    )
    log_roll_ms: int = config_key(
        "log.roll.ms", None, long_range(1), "Age at which a segment is rolled (segment.ms); null: log.roll.hours."
    )
    log_roll_hours: int = config_key(
        "log.roll.hours", 168, int_range(1), "Age in hours at which a segment is rolled, if log.roll.ms is not set."
    )
    log_roll_jitter_ms: int = config_key(
        "log.roll.jitter.ms",
        None,
        long_range(0),
        "Random jitter subtracted from the roll age (segment.jitter.ms); null: log.roll.jitter.hours.",
    )
    log_roll_jitter_hours: int = config_key(
        "log.roll.jitter.hours", 0, int_range(0), "Roll jitter in hours, if log.roll.jitter.ms is not set."
    )
    log_retention_ms: int = config_key(
        "log.retention.ms",
        None,
        long_range(),
        "Age after which segments are deleted (retention.ms); -1: unlimited; null: minutes, else hours.",
    )
    log_retention_minutes: int | None = config_key(
        "log.retention.minutes", None, int_range(), "Retention in minutes, if log.retention.ms is not set."
    )
    log_retention_hours: int = config_key(
        "log.retention.hours", 168, int_range(), "Retention in hours, if neither log.retention.ms nor minutes is set."
    )
    log_retention_bytes: int = config_key(
        "log.retention.bytes",
        -1,
        long_range(),
        "Size per partition beyond which old segments are deleted (retention.bytes); -1: unlimited.",
    )
    log_retention_check_interval_ms: int = config_key(
        "log.retention.check.interval.ms", 300000, long_range(1), "How often retention is enforced."
    )
    log_index_interval_bytes: int = config_key(
        "log.index.interval.bytes",
        4096,
        int_range(0),
        "Bytes of log between two offset-index entries (index.interval.bytes).",
    )
    log_index_size_max_bytes: int = config_key(
        "log.index.size.max.bytes",
        10485760,
        int_range(4),
        "Maximum size of an index file; a full index rolls the segment (segment.index.bytes).",
    )
    log_preallocate: bool = config_key(
        "log.preallocate",
        False,
        parse_bool,
        "Accepted and ignored (preallocate): segment files grow as they are written.",
        ignored="segment files grow as they are written",
    )
    log_flush_interval_messages: int = config_key(
        "log.flush.interval.messages",
        LONG_MAX,
        long_range(1),
        "Records appended before an fsync (flush.messages); default: leave it to the OS and replication.",
    )
    log_flush_interval_ms: int = config_key(
        "log.flush.interval.ms",
        None,
        long_range(0),
        "Age of unflushed data before an fsync (flush.ms); null: log.flush.scheduler.interval.ms.",
    )
    log_flush_scheduler_interval_ms: int = config_key(
        "log.flush.scheduler.interval.ms", LONG_MAX, long_range(0), "How often logs are checked for flushing."
    )
    log_flush_offset_checkpoint_interval_ms: int = config_key(
        "log.flush.offset.checkpoint.interval.ms",
        60000,
        int_range(0),
        "How often the recovery-point checkpoint is written.",
    )
    log_segment_delete_delay_ms: int = config_key(
        "log.segment.delete.delay.ms",
        60000,
        long_range(0),
        "Delay before a deleted segment's files are removed (file.delete.delay.ms).",
    )
    log_cleanup_policy: tuple[str, ...] = config_key(
        "log.cleanup.policy", ("delete",), parse_cleanup_policy, "delete, compact or compact,delete (cleanup.policy)."
    )
    log_cleaner_enable: bool = config_key(
        "log.cleaner.enable",
        True,
        parse_bool,
        "Run the log cleaner (needed for compacted topics such as __consumer_offsets).",
    )
    log_cleaner_backoff_ms: int = config_key(
        "log.cleaner.backoff.ms", 15000, long_range(0), "Sleep of the cleaner when there is nothing to clean."
    )
    log_cleaner_dedupe_buffer_size: int = config_key(
        "log.cleaner.dedupe.buffer.size", 134217728, long_range(), "Memory for the cleaner's key-to-offset map."
    )
    log_cleaner_delete_retention_ms: int = config_key(
        "log.cleaner.delete.retention.ms",
        86400000,
        long_range(0),
        "How long tombstones are kept in compacted topics (delete.retention.ms).",
    )
    log_cleaner_min_cleanable_ratio: float = config_key(
        "log.cleaner.min.cleanable.ratio",
        0.5,
        ratio,
        "Dirty ratio above which a log is compacted (min.cleanable.dirty.ratio).",
    )
    log_cleaner_min_compaction_lag_ms: int = config_key(
        "log.cleaner.min.compaction.lag.ms",
        0,
        long_range(0),
        "Minimum age of a record before it can be compacted (min.compaction.lag.ms).",
    )
    log_cleaner_max_compaction_lag_ms: int = config_key(
        "log.cleaner.max.compaction.lag.ms",
        LONG_MAX,
        long_range(1),
        "Maximum time a record stays uncompacted, whatever the dirty ratio (max.compaction.lag.ms).",
    )
    log_cleaner_threads: int = config_key(
        "log.cleaner.threads",
        1,
        int_range(0),
        "Cleaner processes (Kafka's threads; a process shares no GIL with the event loop), 0: no compaction.",
    )
    log_cleaner_io_max_bytes_per_second: float = config_key(
        "log.cleaner.io.max.bytes.per.second",
        1.7976931348623157e308,
        lambda key, raw: parse_float(key, raw, 0.0, 1.7976931348623157e308),
        "Bytes per second the cleaner processes may read and write together (each gets an equal share).",
    )
    log_cleaner_io_buffer_size: int = config_key(
        "log.cleaner.io.buffer.size",
        524288,
        int_range(1),
        "Read buffer of a cleaner process (one chunk of a segment at a time).",
    )
    log_cleaner_io_buffer_load_factor: float = config_key(
        "log.cleaner.io.buffer.load.factor",
        0.9,
        lambda key, raw: parse_float(key, raw, 0.01, 1.0),
        "Share of the dedupe buffer's slots filled before a cleaning stops early.",
    )
    log_message_timestamp_type: str = config_key(
        "log.message.timestamp.type",
        "CreateTime",
        choice(*TIMESTAMP_TYPES),
        "CreateTime or LogAppendTime (message.timestamp.type).",
    )
    log_message_timestamp_before_max_ms: int = config_key(
        "log.message.timestamp.before.max.ms",
        LONG_MAX,
        long_range(0),
        "How far a CreateTime may lie in the past (message.timestamp.before.max.ms).",
    )
    log_message_timestamp_after_max_ms: int = config_key(
        "log.message.timestamp.after.max.ms",
        LONG_MAX,
        long_range(0),
        "How far a CreateTime may lie in the future (message.timestamp.after.max.ms).",
    )
    log_message_timestamp_difference_max_ms: int = config_key(
        "log.message.timestamp.difference.max.ms",
        LONG_MAX,
        long_range(0),
        "Deprecated: both bounds where the two above are unset (message.timestamp.difference.max.ms).",
    )
    log_message_format_version: str = config_key(
        "log.message.format.version",
        "3.0-IV1",
        parse_metadata_version,
        "Deprecated; accepted and ignored (message.format.version): strom writes only record batches (magic 2).",
        ignored="strom writes only record batches (magic 2)",
    )
    log_message_downconversion_enable: bool = config_key(
        "log.message.downconversion.enable",
        True,
        parse_bool,
        "Deprecated; accepted and ignored (message.downconversion.enable): strom never down-converts.",
        ignored="strom stores and serves record batches (magic 2) only",
    )
    inter_broker_protocol_version: str = config_key(
        "inter.broker.protocol.version",
        f"{KAFKA_VERSION}-IV0",
        parse_metadata_version,
        "Accepted and ignored: strom brokers speak one protocol.",
        ignored="strom brokers of one version speak one protocol",
    )
    log_local_retention_ms: int = config_key(
        "log.local.retention.ms",
        -2,
        long_range(-2),
        "Accepted and ignored (local.retention.ms): strom has no tiered storage.",
        ignored="strom has no tiered storage",
    )
    log_local_retention_bytes: int = config_key(
        "log.local.retention.bytes",
        -2,
        long_range(-2),
        "Accepted and ignored (local.retention.bytes): strom has no tiered storage.",
        ignored="strom has no tiered storage",
    )
    compression_type: str = config_key(
        "compression.type", "producer", choice(*COMPRESSION_TYPES), "Codec batches are stored with; producer: as sent."
    )
    compression_gzip_level: int = config_key(
        "compression.gzip.level",
        -1,
        parse_compression_level("gzip"),
        "gzip level when strom recompresses: 1-9, -1 for zlib's default.",
    )
    compression_lz4_level: int = config_key(
        "compression.lz4.level", 9, parse_compression_level("lz4"), "lz4 level when strom recompresses: 1-17."
    )
    compression_zstd_level: int = config_key(
        "compression.zstd.level", 3, parse_compression_level("zstd"), "zstd level when strom recompresses: -131072-22."
    )
    min_insync_replicas: int = config_key(
        "min.insync.replicas", 1, int_range(1), "In-sync replicas an acks=all produce needs (min.insync.replicas)."
    )
    unclean_leader_election_enable: bool = config_key(
        "unclean.leader.election.enable",
        False,
        parse_bool,
        "Allow an out-of-sync replica to become leader, losing data.",
    )

    def log_config(self) -> LogConfig:
        """The broker's log.* defaults as a topic LogConfig, before any topic's own overrides."""
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms,
            segment_jitter_ms=self.log_roll_jitter_ms,
            segment_index_bytes=self.log_index_size_max_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            cleanup_policy=self.log_cleanup_policy,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
            max_message_bytes=self.message_max_bytes,
            message_timestamp_type=self.log_message_timestamp_type,
            compression_type=self.compression_type,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms,
            file_delete_delay_ms=self.log_segment_delete_delay_ms,
            min_insync_replicas=self.min_insync_replicas,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
            preallocate=self.log_preallocate,
            compression_gzip_level=self.compression_gzip_level,
            compression_lz4_level=self.compression_lz4_level,
            compression_zstd_level=self.compression_zstd_level,
            message_format_version=self.log_message_format_version,
            message_timestamp_difference_max_ms=self.log_message_timestamp_difference_max_ms,
            message_timestamp_before_max_ms=self.log_message_timestamp_before_max_ms,
            message_timestamp_after_max_ms=self.log_message_timestamp_after_max_ms,
            message_downconversion_enable=self.log_message_downconversion_enable,
            local_retention_ms=self.log_local_retention_ms,
            local_retention_bytes=self.log_local_retention_bytes,
        )
