"""Per-topic log settings: Kafka's topic-level config keys, their defaults and their validation.

A topic's effective config is the broker's defaults (``log.*`` keys in server.properties, see
``strom.server.config``) overlaid with the topic's own overrides (``retention.ms=...``). The
topic keys and their defaults are Kafka's, so ``kafka-configs``-style tools and users' muscle
memory carry over unchanged.

Every topic config Kafka 3.9 accepts is accepted here, with Kafka's validation: the table
``TOPIC_KEYS`` says for each what strom does, and the README's topic table is generated from it.
Keys that mean nothing to strom (deprecated message-format keys, tiered storage, replication
quotas) are stored and shown like any other and logged once as ignored, because older tools and
client test suites set them and a refusal would break them for no gain.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from strom.storage.iceberg_mode import MODES, parse_mode
from strom.storage.iceberg_spec import DEFAULT_PARTITION_SPEC, SpecError, parse_partition_spec


class ConfigError(ValueError):
    """A config value is invalid; the message always names the key."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


COMPRESSION_TYPES = ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("delete", "compact")


def parse_int(key: str, raw: str, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigError(key, f"expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(key, f"value {value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"value {value} is above the maximum {maximum}")
    return value


def parse_float(key: str, raw: str, minimum: float, maximum: float) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ConfigError(key, f"expected a number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ConfigError(key, f"value {value} is outside [{minimum}, {maximum}]")
    return value


def parse_bool(key: str, raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigError(key, f"expected true or false, got {raw!r}")


def parse_choice(key: str, raw: str, choices: tuple[str, ...]) -> str:
    text = str(raw).strip()
    if text not in choices:
        raise ConfigError(key, f"{raw!r} is not one of {', '.join(choices)}")
    return text


def parse_cleanup_policy(key: str, raw: str) -> tuple[str, ...]:
    parts = tuple(sorted({p.strip() for p in str(raw).split(",") if p.strip()}))
    if not parts or any(p not in CLEANUP_POLICIES for p in parts):
        raise ConfigError(key, f"{raw!r} must be delete, compact or compact,delete")
    return parts


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

log = logging.getLogger("strom.config")

# Kafka's MetadataVersion strings (3.9), the values message.format.version and
# inter.broker.protocol.version accept: release -> its IV sub-versions ("" for none).
_METADATA_VERSIONS = {
    "0.8.0": ("",),
    "0.8.1": ("",),
    "0.8.2": ("",),
    "0.9.0": ("",),
    "0.10.0": ("IV0", "IV1"),
    "0.10.1": ("IV0", "IV1", "IV2"),
    "0.10.2": ("IV0",),
    "0.11.0": ("IV0", "IV1", "IV2"),
    "1.0": ("IV0",),
    "1.1": ("IV0",),
    "2.0": ("IV0", "IV1"),
    "2.1": ("IV0", "IV1", "IV2"),
    "2.2": ("IV0", "IV1"),
    "2.3": ("IV0", "IV1"),
    "2.4": ("IV0", "IV1"),
    "2.5": ("IV0",),
    "2.6": ("IV0",),
    "2.7": ("IV0", "IV1", "IV2"),
    "2.8": ("IV0", "IV1"),
    "3.0": ("IV0", "IV1"),
    "3.1": ("IV0",),
    "3.2": ("IV0",),
    "3.3": ("IV0", "IV1", "IV2", "IV3"),
    "3.4": ("IV0",),
    "3.5": ("IV0", "IV1", "IV2"),
    "3.6": ("IV0", "IV1", "IV2"),
    "3.7": ("IV0", "IV1", "IV2", "IV3", "IV4"),
    "3.8": ("IV0",),
    "3.9": ("IV0",),
    "4.0": ("IV0", "IV1"),
}
_PRODUCTION_RELEASES = set(_METADATA_VERSIONS) - {"4.0"}  # a bare "4.0" is not valid in Kafka 3.9
METADATA_VERSION_KEYS = frozenset(
    [f"{release}-{iv}" if iv else release for release, ivs in _METADATA_VERSIONS.items() for iv in ivs]
    + list(_PRODUCTION_RELEASES)
)


def parse_metadata_version(key: str, raw: str) -> str:
    """Kafka's MetadataVersion.fromVersionString: "2.8", "2.8.1", "3.0-IV1", "0.10.2.1" ... (kept as given)."""
    text = str(raw).strip()
    segments = text.split(".")
    wanted = 3 if text.startswith("0.") else 2
    lookup = text if wanted >= len(segments) else ".".join(segments[:wanted])
    if lookup not in METADATA_VERSION_KEYS:
        raise ConfigError(key, f"Version {text} is not a valid version")
    return text


def parse_compression_level(codec: str) -> Callable[[str, str], int]:
    """Kafka's level validators (KIP-390): gzip 1..9 or -1, lz4 1..17, zstd -131072..22."""

    def parse(key: str, raw: str) -> int:
        if codec == "gzip":
            value = parse_int(key, raw)
            if value != -1 and not 1 <= value <= 9:
                raise ConfigError(key, f"Value must be between 1 and 9 or equal to -1, got {value}")
            return value
        if codec == "lz4":
            return parse_int(key, raw, 1, 17)
        return parse_int(key, raw, -131072, 22)

    return parse


_REPLICA = re.compile(r"^([0-9]+:[0-9]+)?$")


def parse_throttled_replicas(key: str, raw: str) -> tuple[str, ...]:
    """Kafka's ThrottledReplicaListValidator: "*" or partition:broker pairs."""
    text = str(raw).strip()
    items = tuple(part.strip() for part in text.split(",")) if text else ()
    if not (all(_REPLICA.match(item) for item in items) or "".join(items) == "*"):
        raise ConfigError(
            key,
            f"{key} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )
    return items


def parse_remote_storage_enable(key: str, raw: str) -> bool:
    if parse_bool(key, raw):  # Kafka's answer when remote.log.storage.system.enable is false
        raise ConfigError(
            key,
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )
    return False


class TopicKey(NamedTuple):
    """One of Kafka 3.9's topic configs: how strom parses, stores and documents it."""

    field: str
    parse: Callable[[str, str], Any]
    kind: str  # Kafka's ConfigDef type: int, long, double, boolean, string, list
    server_keys: tuple[str, ...]  # broker keys giving the default, first wins (Kafka's ServerTopicConfigSynonyms)
    effect: str  # what strom does with it (the README's topic config table)
    ignored: str | None = None  # accepted and shown, no effect: why (logged once when set)
    refused: tuple[str, ...] = ()  # values Kafka 3.9 accepts that strom refuses (INVALID_CONFIG)


def _int(minimum: int | None = None, maximum: int | None = INT_MAX) -> Callable[[str, str], int]:
    return lambda key, raw: parse_int(key, raw, minimum, maximum)


def _long(minimum: int | None = None) -> Callable[[str, str], int]:
    return lambda key, raw: parse_int(key, raw, minimum, LONG_MAX)


_NO_DOWNCONVERSION = "strom stores and serves record batches (magic 2) only, so there is nothing to down-convert"
_NO_TIERED_STORAGE = "strom has no tiered storage: every segment stays local, under retention.ms and retention.bytes"

# Kafka 3.9's topic configs (LogConfig), in Kafka's order.
TOPIC_KEYS: dict[str, TopicKey] = {
    "segment.bytes": TopicKey("segment_bytes", _int(14), "int", ("log.segment.bytes",), "Implemented."),
    "segment.ms": TopicKey("segment_ms", _long(1), "long", ("log.roll.ms", "log.roll.hours"), "Implemented."),
    "segment.jitter.ms": TopicKey(
        "segment_jitter_ms",
        _long(0),
        "long",
        ("log.roll.jitter.ms", "log.roll.jitter.hours"),
        "Implemented, as a fixed head start: a segment rolls at segment.ms minus the "
        "jitter (Kafka draws a random part of it per segment).",
    ),
    "segment.index.bytes": TopicKey(
        "segment_index_bytes", _int(4), "int", ("log.index.size.max.bytes",), "Implemented."
    ),
    "flush.messages": TopicKey("flush_messages", _long(1), "long", ("log.flush.interval.messages",), "Implemented."),
    "flush.ms": TopicKey(
        "flush_ms", _long(0), "long", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), "Implemented."
    ),
    "retention.bytes": TopicKey("retention_bytes", _long(), "long", ("log.retention.bytes",), "Implemented."),
    "retention.ms": TopicKey(
        "retention_ms",
        _long(-1),
        "long",
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        "Implemented.",
    ),
    "max.message.bytes": TopicKey(
        "max_message_bytes",
        _int(0),
        "int",
        ("message.max.bytes",),
        "Implemented: a larger batch gets MESSAGE_TOO_LARGE.",
    ),
    "index.interval.bytes": TopicKey(
        "index_interval_bytes", _int(0), "int", ("log.index.interval.bytes",), "Implemented."
    ),
    "delete.retention.ms": TopicKey(
        "delete_retention_ms",
        _long(0),
        "long",
        ("log.cleaner.delete.retention.ms",),
        "Implemented (measured from the tombstone's timestamp).",
    ),
    "min.compaction.lag.ms": TopicKey(
        "min_compaction_lag_ms", _long(0), "long", ("log.cleaner.min.compaction.lag.ms",), "Implemented."
    ),
    "max.compaction.lag.ms": TopicKey(
        "max_compaction_lag_ms",
        _long(1),
        "long",
        ("log.cleaner.max.compaction.lag.ms",),
        "Implemented (KIP-354): a log whose oldest dirty segment's first batch is older than this is "
        "compacted whatever its dirty ratio, and a compacted topic's active segment rolls by "
        "min(segment.ms, max.compaction.lag.ms).",
    ),
    "file.delete.delay.ms": TopicKey(
        "file_delete_delay_ms", _long(0), "long", ("log.segment.delete.delay.ms",), "Implemented."
    ),
    "min.cleanable.dirty.ratio": TopicKey(
        "min_cleanable_dirty_ratio",
        lambda k, v: parse_float(k, v, 0.0, 1.0),
        "double",
        ("log.cleaner.min.cleanable.ratio",),
        "Implemented: a log is cleaned when its dirty ratio is strictly above it, as in Kafka (or past max.compaction.lag.ms).",
    ),
    "cleanup.policy": TopicKey(
        "cleanup_policy",
        lambda k, v: parse_cleanup_policy(k, v),
        "list",
        ("log.cleanup.policy",),
        "Implemented; on a compacted topic a record without a key fails its batch with INVALID_RECORD.",
    ),
    "unclean.leader.election.enable": TopicKey(
        "unclean_leader_election_enable",
        lambda k, v: parse_bool(k, v),
        "boolean",
        ("unclean.leader.election.enable",),
        "Implemented.",
    ),
    "min.insync.replicas": TopicKey("min_insync_replicas", _int(1), "int", ("min.insync.replicas",), "Implemented."),
    "compression.type": TopicKey(
        "compression_type",
        lambda k, v: parse_choice(k, v, COMPRESSION_TYPES),
        "string",
        ("compression.type",),
        "Implemented: batches in another codec are recompressed.",
    ),
    "compression.gzip.level": TopicKey(
        "compression_gzip_level",
        parse_compression_level("gzip"),
        "int",
        ("compression.gzip.level",),
        "Implemented: the level of batches strom recompresses to gzip.",
    ),
    "compression.lz4.level": TopicKey(
        "compression_lz4_level",
        parse_compression_level("lz4"),
        "int",
        ("compression.lz4.level",),
        "Implemented: the level of batches strom recompresses to lz4.",
    ),
    "compression.zstd.level": TopicKey(
        "compression_zstd_level",
        parse_compression_level("zstd"),
        "int",
        ("compression.zstd.level",),
        "Implemented: the level of batches strom recompresses to zstd.",
    ),
    "preallocate": TopicKey(
        "preallocate",
        lambda k, v: parse_bool(k, v),
        "boolean",
        ("log.preallocate",),
        "Accepted, shown, ignored and logged once",
        ignored="segment files grow as they are written (their indexes are preallocated)",
    ),
    "message.format.version": TopicKey(
        "message_format_version",
        parse_metadata_version,
        "string",
        ("log.message.format.version",),
        "Deprecated in Kafka 3; accepted (any Kafka version string), shown, ignored and logged once.",
        ignored=(
            "strom writes only record batches (magic 2), as Kafka 3 does with inter.broker.protocol.version >= 3.0"
        ),
    ),
    "message.timestamp.type": TopicKey(
        "message_timestamp_type",
        lambda k, v: parse_choice(k, v, TIMESTAMP_TYPES),
        "string",
        ("log.message.timestamp.type",),
        "Implemented.",
    ),
    "message.timestamp.difference.max.ms": TopicKey(
        "message_timestamp_difference_max_ms",
        _long(0),
        "long",
        ("log.message.timestamp.difference.max.ms",),
        "Deprecated in Kafka 3.6; implemented as Kafka 3.9 does: the bound on both sides where "
        "message.timestamp.before.max.ms / after.max.ms are left at their default.",
    ),
    "message.timestamp.before.max.ms": TopicKey(
        "message_timestamp_before_max_ms",
        _long(0),
        "long",
        ("log.message.timestamp.before.max.ms",),
        "Implemented (CreateTime topics): an older record fails its batch with INVALID_TIMESTAMP.",
    ),
    "message.timestamp.after.max.ms": TopicKey(
        "message_timestamp_after_max_ms",
        _long(0),
        "long",
        ("log.message.timestamp.after.max.ms",),
        "Implemented (CreateTime topics): a record from further in the future fails its batch with INVALID_TIMESTAMP.",
    ),
    "leader.replication.throttled.replicas": TopicKey(
        "leader_replication_throttled_replicas",
        parse_throttled_replicas,
        "list",
        (),
        "Implemented: a listed leader sends an out-of-sync follower at most `leader.replication.throttled.rate` "
        "bytes/s (a dynamic broker config).",
    ),
    "follower.replication.throttled.replicas": TopicKey(
        "follower_replication_throttled_replicas",
        parse_throttled_replicas,
        "list",
        (),
        "Implemented: a listed out-of-sync follower fetches at most `follower.replication.throttled.rate` "
        "bytes/s (a dynamic broker config).",
    ),
    "message.downconversion.enable": TopicKey(
        "message_downconversion_enable",
        lambda k, v: parse_bool(k, v),
        "boolean",
        ("log.message.downconversion.enable",),
        "Deprecated in Kafka 3; accepted, shown, ignored and logged once.",
        ignored=_NO_DOWNCONVERSION,
    ),
    "remote.storage.enable": TopicKey(
        "remote_storage_enable",
        parse_remote_storage_enable,
        "boolean",
        (),
        "Refused when `true` with INVALID_CONFIG, as Kafka refuses it with tiered storage disabled "
        "(strom has none); `false` is accepted.",
        refused=("true",),
    ),
    "local.retention.ms": TopicKey(
        "local_retention_ms",
        _long(-2),
        "long",
        ("log.local.retention.ms",),
        "Accepted, shown, ignored and logged once.",
        ignored=_NO_TIERED_STORAGE,
    ),
    "local.retention.bytes": TopicKey(
        "local_retention_bytes",
        _long(-2),
        "long",
        ("log.local.retention.bytes",),
        "Accepted, shown, ignored and logged once.",
        ignored=_NO_TIERED_STORAGE,
    ),
    "remote.log.copy.disable": TopicKey(
        "remote_log_copy_disable",
        lambda k, v: parse_bool(k, v),
        "boolean",
        (),
        "Accepted, shown, ignored and logged once.",
        ignored=_NO_TIERED_STORAGE,
    ),
    "remote.log.delete.on.disable": TopicKey(
        "remote_log_delete_on_disable",
        lambda k, v: parse_bool(k, v),
        "boolean",
        (),
        "Accepted, shown, ignored and logged once.",
        ignored=_NO_TIERED_STORAGE,
    ),
}

SUBJECT_NAME_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."


def parse_subject_name_strategy(key: str, raw: str) -> str:
    """Confluent's class name (io.confluent.kafka.serializers.subject.RecordNameStrategy) or its short name."""
    text = str(raw).strip()
    short = text.removeprefix(_STRATEGY_PACKAGE)
    if short not in SUBJECT_NAME_STRATEGIES:
        raise ConfigError(key, f"{raw!r} is not one of {', '.join(SUBJECT_NAME_STRATEGIES)}")
    return text


def _schema_validation(side: str, alias_of: str | None = None) -> TopicKey:
    effect = (
        f"Same as `{alias_of}` (Redpanda's name for it)."
        if alias_of
        else f"Implemented (Confluent Server's key): a batch with a record whose {side} lacks the schema id prefix "
        f"(magic byte 0 and a 4-byte id), names an id the Schema Registry does not know, or an id not registered "
        f"under the {side}'s subject (`confluent.{side}.subject.name.strategy`) fails whole with INVALID_RECORD, "
        f"each such record named (a null {side} passes)."
    )
    return TopicKey(f"{side}_schema_validation", lambda k, v: parse_bool(k, v), "boolean", (), effect)


def _subject_name_strategy(side: str) -> TopicKey:
    return TopicKey(
        f"{side}_subject_name_strategy",
        parse_subject_name_strategy,
        "string",
        (),
        f"Implemented: the subject a {side}'s schema id must be registered under: TopicNameStrategy "
        f"(`<topic>-{side}`), RecordNameStrategy (the Avro record's full name) or TopicRecordNameStrategy "
        f"(`<topic>-<record name>`); Confluent's class names are accepted too.",
    )


# strom's own topic configs beyond Kafka's (validation of schema ids on produce, issue 30)
SCHEMA_TOPIC_KEYS: dict[str, TopicKey] = {
    "confluent.value.schema.validation": _schema_validation("value"),
    "confluent.key.schema.validation": _schema_validation("key"),
    "confluent.value.subject.name.strategy": _subject_name_strategy("value"),
    "confluent.key.subject.name.strategy": _subject_name_strategy("key"),
    "redpanda.value.schema.id.validation": _schema_validation("value", "confluent.value.schema.validation"),
    "redpanda.key.schema.id.validation": _schema_validation("key", "confluent.key.schema.validation"),
}
TOPIC_KEYS.update(SCHEMA_TOPIC_KEYS)


def aliases_of(key: str) -> list[str]:
    """The other names of the setting ``key`` names (confluent.value.schema.validation and
    redpanda.value.schema.id.validation, ...): setting or deleting one replaces them all."""
    spec = TOPIC_KEYS.get(key)
    if spec is None:
        return []
    return [other for other, found in TOPIC_KEYS.items() if found.field == spec.field and other != key]


_warned: set[tuple[str, str]] = set()


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`` (did you mean num.partitions?)`` for a near miss of a known key, else "": a typo should show its fix.

    The cutoff is high so that a real Kafka key strom lacks is not "corrected" into an unrelated one.
    """
    close = difflib.get_close_matches(key.strip().lower(), known, n=1, cutoff=0.85)
    return f" (did you mean {close[0]}?)" if close else ""


def warn_ignored(key: str, value: str, reason: str) -> None:
    """Say once per process and value that a Kafka config is accepted but has no effect."""
    if (key, value) in _warned:
        return
    _warned.add((key, value))
    log.warning("%s=%s is accepted for compatibility with Kafka and ignored: %s", key, value, reason)


ICEBERG_MODES = MODES


def parse_iceberg_mode(key: str, raw: str) -> str:
    """The mode, with value_schema_latest's options as strom writes them (strom.storage.iceberg_mode)."""
    try:
        return str(parse_mode(raw))
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


def parse_iceberg_partition_spec(key: str, raw: str) -> str:
    """The spec as given (stripped), once its grammar and known columns are checked."""
    try:
        parse_partition_spec(str(raw))
    except SpecError as exc:
        raise ConfigError(key, f"{str(raw)!r}: {exc}") from None
    return str(raw).strip()


_ICEBERG_MODE_EFFECT = (
    "Implemented (strom's own, as Redpanda's Iceberg topics): with `iceberg.enabled` on the broker, each "
    "partition's leader writes the committed records to the Iceberg table `strom.<topic>`, exactly once. "
    "`key_value`: a `kafka` struct of partition, offset, timestamp, timestamp type and headers, `key` and "
    "`value` as binary. `value_schema_id_prefix`: `kafka`, `key` and the columns of the Avro schema each "
    "value's 5-byte prefix names (the table evolves with new schema versions). `value_schema_latest`: the "
    "columns of the latest schema of `<topic>-value`, each value read with its own schema resolved to it; "
    "Redpanda's options `value_schema_latest:subject=<subject>,protobuf_name=<package.Message>` name "
    "another subject and the Protobuf message every record is read as (a bad option: INVALID_CONFIG). "
    "In the schema modes a record that cannot be translated goes to the table `strom.<topic>~dlq` with the reason."
)

# strom's own topic configs beyond Kafka's: Iceberg topics (strom.iceberg, issue 31)
ICEBERG_TOPIC_KEYS: dict[str, TopicKey] = {
    "iceberg.mode": TopicKey("iceberg_mode", parse_iceberg_mode, "string", (), _ICEBERG_MODE_EFFECT),
    "redpanda.iceberg.mode": TopicKey(
        "iceberg_mode", parse_iceberg_mode, "string", (), "Same as `iceberg.mode` (Redpanda's name for it)."
    ),
    "iceberg.delete": TopicKey(
        "iceberg_delete",
        lambda k, v: parse_bool(k, v),
        "boolean",
        (),
        "Implemented (Redpanda's key): when the topic is deleted, the brokers that led its partitions drop its "
        "Iceberg tables from the catalog and purge their files from the warehouse (data, manifests, metadata, "
        "as Iceberg's DROP TABLE ... PURGE); false keeps the tables and their files.",
    ),
    "iceberg.partition.spec": TopicKey(
        "iceberg_partition_spec",
        parse_iceberg_partition_spec,
        "string",
        (),
        "Implemented (Redpanda's syntax): the Iceberg table's partition fields, e.g. `(hour(kafka.timestamp))` "
        "(the default), `(day(kafka.timestamp), bucket(16, key))`, `(kafka.partition)`, `()` for none; "
        "`redpanda.` is read as `kafka.`. New tables get it; altering it evolves the table's spec (files "
        "written before keep the spec they were written with).",
    ),
    "redpanda.iceberg.partition.spec": TopicKey(
        "iceberg_partition_spec",
        parse_iceberg_partition_spec,
        "string",
        (),
        "Same as `iceberg.partition.spec` (Redpanda's name for it).",
    ),
    "iceberg.maintenance.interval.ms": TopicKey(
        "iceberg_maintenance_interval_ms",
        _long(1),
        "long",
        (),
        "strom's own: how often the broker leading the topic's partition 0 compacts the table's small files "
        "and expires its old snapshots (in its translation worker).",
    ),
    "iceberg.compaction.enabled": TopicKey(
        "iceberg_compaction_enabled",
        lambda k, v: parse_bool(k, v),
        "boolean",
        (),
        "strom's own: rewrite a table partition's small data files (below `iceberg.target.file.size.bytes`) "
        "into fewer, the same rows, keeping the snapshot's offsets.",
    ),
    "iceberg.compaction.min-input-files": TopicKey(
        "iceberg_compaction_min_input_files",
        _int(2),
        "int",
        (),
        "Named like Iceberg's rewrite_data_files option min-input-files: a table partition is compacted once "
        "it has at least this many small files.",
    ),
    "history.expire.max-snapshot-age-ms": TopicKey(
        "history_expire_max_snapshot_age_ms",
        _long(0),
        "long",
        (),
        "Iceberg's table property: snapshots older than this are expired by the maintenance, and the files "
        "only they referenced deleted from the warehouse, keeping at least history.expire.min-snapshots-to-keep.",
    ),
    "history.expire.min-snapshots-to-keep": TopicKey(
        "history_expire_min_snapshots_to_keep",
        _int(1),
        "int",
        (),
        "Iceberg's table property: the newest snapshots that are never expired, however old.",
    ),
    "write.metadata.delete-after-commit.enabled": TopicKey(
        "write_metadata_delete_after_commit_enabled",
        lambda k, v: parse_bool(k, v),
        "boolean",
        (),
        "Iceberg's table property (and its default, false), set on the topic's tables by the maintenance: "
        "each commit then deletes the metadata.json files beyond write.metadata.previous-versions-max.",
    ),
    "write.metadata.previous-versions-max": TopicKey(
        "write_metadata_previous_versions_max",
        _int(1),
        "int",
        (),
        "Iceberg's table property (and its default, 100): the previous metadata.json files a table keeps "
        "in its metadata log.",
    ),
    "iceberg.orphan.files.older.than.ms": TopicKey(
        "iceberg_orphan_files_older_than_ms",
        _long(-1),
        "long",
        (),
        "strom's own, named after the older_than of Iceberg's removeOrphanFiles (and its default, 3 days): "
        "the maintenance deletes files in the table's location that no snapshot or metadata file references "
        "once they are older than this, so that a writer's file not committed yet is never touched; -1: never.",
    ),
}
TOPIC_KEYS.update(ICEBERG_TOPIC_KEYS)


@dataclass(frozen=True)
class LogConfig:
    """The effective settings of one partition log. Defaults are Kafka 3.9's."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    iceberg_mode: str = "disabled"  # strom.iceberg translates key_value topics
    iceberg_delete: bool = True
    iceberg_partition_spec: str = DEFAULT_PARTITION_SPEC
    iceberg_maintenance_interval_ms: int = 3600 * 1000
    iceberg_compaction_enabled: bool = True
    iceberg_compaction_min_input_files: int = 5  # Iceberg's min-input-files default
    history_expire_max_snapshot_age_ms: int = 5 * 24 * 3600 * 1000  # Iceberg's default: 5 days
    history_expire_min_snapshots_to_keep: int = 1
    write_metadata_delete_after_commit_enabled: bool = False  # Iceberg's default
    write_metadata_previous_versions_max: int = 100  # Iceberg's default
    iceberg_orphan_files_older_than_ms: int = 3 * 24 * 3600 * 1000  # Iceberg's removeOrphanFiles default
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_format_version: str = "3.0-IV1"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    message_downconversion_enable: bool = True
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    value_schema_validation: bool = False
    key_schema_validation: bool = False
    value_subject_name_strategy: str = _STRATEGY_PACKAGE + "TopicNameStrategy"
    key_subject_name_strategy: str = _STRATEGY_PACKAGE + "TopicNameStrategy"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: the active segment is never compacted, so a compacted log
        must roll in time for max.compaction.lag.ms to be kept."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def timestamp_before_max_ms(self) -> int:
        """Kafka 3.9: the deprecated difference bound applies while before.max.ms is left at its default."""
        before = self.message_timestamp_before_max_ms
        return before if before != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        after = self.message_timestamp_after_max_ms
        return after if after != LONG_MAX else self.message_timestamp_difference_max_ms

    @cached_property
    def record_checks(self) -> bool:
        """Whether every record of every batch must be read: compaction needs keys, bounds need timestamps."""
        return self.compact or (
            self.message_timestamp_type == "CreateTime"
            and (self.timestamp_before_max_ms < LONG_MAX or self.timestamp_after_max_ms < LONG_MAX)
        )

    @cached_property
    def schema_validation(self) -> bool:
        """Whether produced records must carry schema ids the Schema Registry knows (the produce
        path reads records only for such topics)."""
        return self.value_schema_validation or self.key_schema_validation

    @property
    def compression_level(self) -> int | None:
        """The level of the topic's codec when strom recompresses (None: the codec has none)."""
        return {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }.get(self.compression_type)

    @staticmethod
    def topic_keys() -> tuple[str, ...]:
        return tuple(TOPIC_KEYS)

    @staticmethod
    def field_for_key(key: str) -> str:
        return TOPIC_KEYS[key].field

    def with_overrides(self, overrides: Mapping[str, str]) -> LogConfig:
        """Overlay topic-level overrides (Kafka key -> string value); unknown keys are errors, and
        so are two names of one setting (an alias: Redpanda's names) given different values."""
        changes: dict[str, Any] = {}
        named: dict[str, str] = {}  # field -> the key that set it
        for key, raw in overrides.items():
            spec = TOPIC_KEYS.get(key)
            if spec is None:
                raise ConfigError(key, "unknown topic config" + did_you_mean(key, TOPIC_KEYS))
            value = spec.parse(key, raw)
            if spec.field in named and changes[spec.field] != value:
                raise ConfigError(key, f"{key} and {named[spec.field]} name one setting; give one of them")
            named[spec.field] = key
            changes[spec.field] = value
            if spec.ignored:
                warn_ignored(key, str(raw).strip(), spec.ignored)
        config = dataclasses.replace(self, **changes) if changes else self
        if changes:
            config.check()
        return config

    def check(self) -> None:
        """Kafka's cross-key rule (LogConfig.validateValues)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                "min.compaction.lag.ms",
                f"conflict topic config setting min.compaction.lag.ms "
                f"({self.min_compaction_lag_ms}) > max.compaction.lag.ms ({self.max_compaction_lag_ms})",
            )

    def to_topic_configs(self) -> dict[str, str]:
        """The effective value of every topic key, as strings in Kafka's notation."""
        out: dict[str, str] = {}
        for key, spec in TOPIC_KEYS.items():
            value = getattr(self, spec.field)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out


def topic_config_reference_markdown() -> str:
    """The README's table of Kafka 3.9's topic configs and what strom does with each."""
    defaults = LogConfig().to_topic_configs()
    rows = ["| Topic key | Default | Broker key | What strom does |", "| --- | --- | --- | --- |"]
    for key, spec in TOPIC_KEYS.items():
        default = defaults[key]
        shown = f"`{default}`" if default else "(empty)"
        broker = ", ".join(f"`{k}`" for k in spec.server_keys) or "none"
        effect = f"{spec.effect.rstrip('.')}: {spec.ignored}." if spec.ignored else spec.effect
        rows.append(f"| `{key}` | {shown} | {broker} | {effect.replace('|', chr(92) + '|')} |")
    return "\n".join(rows) + "\n"
