"""The keys of the coordinators: consumer groups (``group.*``, classic and KIP-848's consumer
protocol), committed offsets (``offsets.*``, the ``__consumer_offsets`` topic), transactions
(``transaction.*``, the ``__transaction_state`` topic) and idempotent producers' ids
(``producer.id.*``).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.server.config_keys import choice, config_key, csv_list, int_range, long_range
from strom.storage.log_config import INT_MAX, ConfigError


def parse_consumer_assignors(key: str, raw: str) -> tuple[str, ...]:
    from strom.group.assignors import assignor_name

    names = csv_list(key, raw)
    unknown = [n for n in names if assignor_name(n) is None]
    if unknown:
        raise ConfigError(key, f"unknown assignor {unknown[0]} (strom has uniform and range)")
    return names


@dataclass(frozen=True)
class CoordinatorKeys:
    """Consumer groups, committed offsets, transactions and producer ids."""

    # --- consumer groups and offsets
    group_initial_rebalance_delay_ms: int = config_key(
        "group.initial.rebalance.delay.ms",
        3000,
        int_range(0),
        "Wait for more members before the first rebalance of an empty group.",
    )
    group_min_session_timeout_ms: int = config_key(
        "group.min.session.timeout.ms", 6000, int_range(0), "Smallest session timeout a member may ask for."
    )
    group_max_session_timeout_ms: int = config_key(
        "group.max.session.timeout.ms", 1800000, int_range(0), "Largest session timeout a member may ask for."
    )
    group_max_size: int = config_key("group.max.size", INT_MAX, int_range(1), "Most members of one group.")
    group_consumer_session_timeout_ms: int = config_key(
        "group.consumer.session.timeout.ms",
        45000,
        int_range(1),
        "Consumer protocol (KIP-848): a member with no heartbeat for this long is removed.",
    )
    group_consumer_heartbeat_interval_ms: int = config_key(
        "group.consumer.heartbeat.interval.ms",
        5000,
        int_range(1),
        "Consumer protocol (KIP-848): how often members heartbeat.",
    )
    group_consumer_max_size: int = config_key(
        "group.consumer.max.size", INT_MAX, int_range(1), "Consumer protocol (KIP-848): most members of one group."
    )
    group_consumer_assignors: tuple[str, ...] = config_key(
        "group.consumer.assignors",
        ("uniform", "range"),
        parse_consumer_assignors,
        "Consumer protocol (KIP-848) server assignors (uniform, range; Kafka's class "
        "names accepted); the first is the default.",
    )
    group_consumer_min_session_timeout_ms: int = config_key(
        "group.consumer.min.session.timeout.ms",
        45000,
        int_range(1),
        "Consumer protocol (KIP-848): the smallest consumer.session.timeout.ms a group may set.",
    )
    group_consumer_max_session_timeout_ms: int = config_key(
        "group.consumer.max.session.timeout.ms",
        60000,
        int_range(1),
        "Consumer protocol (KIP-848): the largest consumer.session.timeout.ms a group may set.",
    )
    group_consumer_min_heartbeat_interval_ms: int = config_key(
        "group.consumer.min.heartbeat.interval.ms",
        5000,
        int_range(1),
        "Consumer protocol (KIP-848): the smallest consumer.heartbeat.interval.ms a group may set.",
    )
    group_consumer_max_heartbeat_interval_ms: int = config_key(
        "group.consumer.max.heartbeat.interval.ms",
        15000,
        int_range(1),
        "Consumer protocol (KIP-848): the largest consumer.heartbeat.interval.ms a group may set.",
    )
    group_consumer_migration_policy: str = config_key(
        "group.consumer.migration.policy",
        "bidirectional",
        choice("bidirectional", "upgrade", "downgrade", "disabled"),
        "Online migration of live groups between the classic and the consumer protocol (upgrade: a "
        "consumer-protocol member joins a classic group; downgrade: the last one leaves).",
    )
    offsets_topic_num_partitions: int = config_key(
        "offsets.topic.num.partitions", 50, int_range(1), "Partitions of __consumer_offsets (fixed once created)."
    )
    offsets_topic_replication_factor: int = config_key(
        "offsets.topic.replication.factor",
        3,
        int_range(1),
        "Replication factor of __consumer_offsets; strom clamps it to the live brokers.",
    )
    offsets_topic_segment_bytes: int = config_key(
        "offsets.topic.segment.bytes", 104857600, int_range(1), "Segment size of __consumer_offsets."
    )
    offsets_retention_minutes: int = config_key(
        "offsets.retention.minutes", 10080, int_range(1), "Committed offsets of an empty group expire after this long."
    )
    offsets_retention_check_interval_ms: int = config_key(
        "offsets.retention.check.interval.ms", 600000, long_range(1), "How often expired offsets are removed."
    )
    offsets_commit_timeout_ms: int = config_key(
        "offsets.commit.timeout.ms", 5000, int_range(1), "Longest an offset commit waits for replication."
    )
    # --- transactions and idempotence
    transaction_max_timeout_ms: int = config_key(
        "transaction.max.timeout.ms", 900000, int_range(1), "Largest transaction timeout a producer may ask for."
    )
    transactional_id_expiration_ms: int = config_key(
        "transactional.id.expiration.ms", 604800000, int_range(1), "An idle transactional id expires after this long."
    )
    transaction_state_log_num_partitions: int = config_key(
        "transaction.state.log.num.partitions",
        50,
        int_range(1),
        "Partitions of __transaction_state (fixed once created).",
    )
    transaction_state_log_replication_factor: int = config_key(
        "transaction.state.log.replication.factor",
        3,
        int_range(1),
        "Replication factor of __transaction_state; strom clamps it to the live brokers.",
    )
    transaction_state_log_min_isr: int = config_key(
        "transaction.state.log.min.isr",
        2,
        int_range(1),
        "min.insync.replicas of __transaction_state (clamped like its replication factor).",
    )
    transaction_state_log_segment_bytes: int = config_key(
        "transaction.state.log.segment.bytes", 104857600, int_range(1), "Segment size of __transaction_state."
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = config_key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10000,
        int_range(1),
        "How often timed-out transactions are aborted.",
    )
    transaction_remove_expired_transaction_cleanup_interval_ms: int = config_key(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3600000,
        int_range(1),
        "How often expired transactional ids are removed.",
    )
    producer_id_expiration_ms: int = config_key(
        "producer.id.expiration.ms",
        86400000,
        int_range(1),
        "Idempotence state of a silent producer id is dropped after this long.",
    )
    producer_id_expiration_check_interval_ms: int = config_key(
        "producer.id.expiration.check.interval.ms", 600000, int_range(1), "How often expired producer ids are removed."
    )
