"""Topic configs: every key Kafka 3.9 accepts parses with Kafka's rules; unknown keys name themselves."""

import logging

import pytest

from strom.storage.log_config import TOPIC_KEYS, ConfigError, LogConfig, aliases_of, parse_metadata_version

# Kafka 3.9's LogConfig, key for key (storage/.../LogConfig.java on the 3.9 branch).
KAFKA_39_TOPIC_KEYS = [
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "flush.messages",
    "flush.ms",
    "retention.bytes",
    "retention.ms",
    "max.message.bytes",
    "index.interval.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "file.delete.delay.ms",
    "min.cleanable.dirty.ratio",
    "cleanup.policy",
    "unclean.leader.election.enable",
    "min.insync.replicas",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "preallocate",
    "message.format.version",
    "message.timestamp.type",
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "message.downconversion.enable",
    "remote.storage.enable",
    "local.retention.ms",
    "local.retention.bytes",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
]


# strom's own beyond Kafka's: schema id validation on produce (Confluent Server's keys, Redpanda's aliases)
SCHEMA_TOPIC_KEYS = [
    "confluent.value.schema.validation",
    "confluent.key.schema.validation",
    "confluent.value.subject.name.strategy",
    "confluent.key.subject.name.strategy",
    "redpanda.value.schema.id.validation",
    "redpanda.key.schema.id.validation",
]


def test_the_key_table_is_kafka_39s_then_stroms_own():
    for keys in (list(TOPIC_KEYS), list(LogConfig().to_topic_configs())):
        assert keys[: len(KAFKA_39_TOPIC_KEYS)] == KAFKA_39_TOPIC_KEYS
        assert [key for key in keys if key in SCHEMA_TOPIC_KEYS] == SCHEMA_TOPIC_KEYS


def test_schema_validation_keys_and_their_aliases():
    config = LogConfig()
    assert not config.schema_validation
    assert LogConfig().with_overrides({"redpanda.value.schema.id.validation": "true"}).value_schema_validation
    assert LogConfig().with_overrides({"confluent.key.schema.validation": "true"}).schema_validation
    strategy = LogConfig().with_overrides({"confluent.value.subject.name.strategy": "RecordNameStrategy"})
    assert strategy.value_subject_name_strategy == "RecordNameStrategy"
    shown = LogConfig().with_overrides({"confluent.value.schema.validation": "true"}).to_topic_configs()
    assert shown["confluent.value.schema.validation"] == shown["redpanda.value.schema.id.validation"] == "true"
    assert shown["confluent.value.subject.name.strategy"].endswith(".TopicNameStrategy")
    with pytest.raises(ConfigError, match="confluent.value.subject.name.strategy"):
        LogConfig().with_overrides({"confluent.value.subject.name.strategy": "SubjectStrategy"})
    with pytest.raises(ConfigError, match="expected true or false"):
        LogConfig().with_overrides({"confluent.value.schema.validation": "yes"})
    # two names of one setting: the same value is fine, two values are refused
    both = {"confluent.value.schema.validation": "true", "redpanda.value.schema.id.validation": "true"}
    assert LogConfig().with_overrides(both).value_schema_validation
    with pytest.raises(ConfigError, match="name one setting; give one of them"):
        LogConfig().with_overrides({**both, "redpanda.value.schema.id.validation": "false"})
    assert aliases_of("redpanda.key.schema.id.validation") == ["confluent.key.schema.validation"]


@pytest.mark.parametrize(
    "raw, ok",
    [
        ("3.0-IV1", True),
        ("2.8", True),
        ("2.8.1", True),
        ("0.10.2", True),
        ("0.10.2.1", True),
        ("0.10.0-IV1", True),
        ("0.8.0", True),
        ("3.9", True),
        ("3.9-IV0", True),
        ("4.0-IV1", True),
        ("4.0", False),
        ("3", False),
        ("3.10", False),
        ("0.10", False),
        ("latest", False),
        ("", False),
    ],
)
def test_message_format_version_takes_kafkas_version_strings(raw, ok):
    if ok:
        assert parse_metadata_version("message.format.version", raw) == raw
    else:
        with pytest.raises(ConfigError, match="message.format.version: Version .* is not a valid version"):
            parse_metadata_version("message.format.version", raw)


@pytest.mark.parametrize(
    "key, good, bad",
    [
        ("compression.gzip.level", ["-1", "1", "9"], ["0", "10", "-2"]),
        ("compression.lz4.level", ["1", "17"], ["0", "18"]),
        ("compression.zstd.level", ["-131072", "0", "22"], ["-131073", "23"]),
        ("leader.replication.throttled.replicas", ["*", "", "0:1,1:2", " 0:1 , 3:0 "], ["0:x", "*,0:1", "1"]),
        ("follower.replication.throttled.replicas", ["*"], ["all"]),
        ("local.retention.ms", ["-2", "-1", "1000"], ["-3"]),
        ("local.retention.bytes", ["-2", "5"], ["-3", "x"]),
        ("message.timestamp.before.max.ms", ["0", "9223372036854775807"], ["-1"]),
        ("message.timestamp.difference.max.ms", ["0"], ["-1"]),
        ("remote.storage.enable", ["false", "FALSE"], ["true", "yes"]),
        ("remote.log.copy.disable", ["true", "false"], ["1"]),
    ],
)
def test_values_are_validated_as_kafka_does(key, good, bad):
    for raw in good:
        LogConfig().with_overrides({key: raw})
    for raw in bad:
        with pytest.raises(ConfigError) as refused:
            LogConfig().with_overrides({key: raw})
        assert refused.value.key == key and key in str(refused.value)


def test_tiered_storage_is_refused_with_kafkas_message():
    with pytest.raises(ConfigError, match="Tiered Storage functionality is disabled in the broker"):
        LogConfig().with_overrides({"remote.storage.enable": "true"})


def test_unknown_keys_and_conflicting_lags_are_refused():
    with pytest.raises(
        ConfigError,
        match=r"^message.format.versions: unknown topic config "
        r"\(did you mean message.format.version\?\)$",
    ):
        LogConfig().with_overrides({"message.format.versions": "2.8"})
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        LogConfig().with_overrides({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_ignored_keys_are_kept_shown_and_logged_once(caplog, monkeypatch):
    from strom.storage import log_config

    monkeypatch.setattr(log_config, "_warned", set())  # "once" is per process; start this test afresh
    with caplog.at_level(logging.WARNING, logger="strom.config"):
        for _ in range(3):
            config = LogConfig().with_overrides(
                {"message.format.version": "2.7-IV2", "message.downconversion.enable": "false"}
            )
    assert config.to_topic_configs()["message.format.version"] == "2.7-IV2"
    assert config.to_topic_configs()["message.downconversion.enable"] == "false"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith("message.format.version=2.7-IV2 is accepted for compatibility with Kafka and ignored")


def test_timestamp_bounds_fall_back_to_the_deprecated_difference():
    config = LogConfig().with_overrides(
        {"message.timestamp.difference.max.ms": "1000", "message.timestamp.after.max.ms": "50"}
    )
    assert (config.timestamp_before_max_ms, config.timestamp_after_max_ms) == (1000, 50)
    assert config.record_checks
    assert not LogConfig().record_checks
    assert not LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=5).record_checks
    assert LogConfig(cleanup_policy=("compact", "delete")).record_checks


# strom's own beyond Kafka's: Iceberg topics (issue 31), with Redpanda's alias
ICEBERG_TOPIC_KEYS = [
    "iceberg.mode",
    "redpanda.iceberg.mode",
    "iceberg.delete",
    "iceberg.partition.spec",
    "redpanda.iceberg.partition.spec",
    "iceberg.maintenance.interval.ms",
    "iceberg.compaction.enabled",
    "iceberg.compaction.min-input-files",
    "history.expire.max-snapshot-age-ms",
    "history.expire.min-snapshots-to-keep",
    "write.metadata.delete-after-commit.enabled",
    "write.metadata.previous-versions-max",
    "iceberg.orphan.files.older.than.ms",
]


def test_iceberg_keys_their_alias_and_the_modes():
    assert [key for key in TOPIC_KEYS if key in ICEBERG_TOPIC_KEYS] == ICEBERG_TOPIC_KEYS
    shown = LogConfig().to_topic_configs()
    assert (shown["iceberg.mode"], shown["redpanda.iceberg.mode"], shown["iceberg.delete"]) == ("disabled",) * 2 + (
        "true",
    )
    assert LogConfig().with_overrides({"redpanda.iceberg.mode": "key_value"}).iceberg_mode == "key_value"
    assert LogConfig().with_overrides({"iceberg.mode": "key_value"}).to_topic_configs()["redpanda.iceberg.mode"] == (
        "key_value"
    )
    for mode in ("value_schema_id_prefix", "value_schema_latest"):
        assert LogConfig().with_overrides({"redpanda.iceberg.mode": mode}).iceberg_mode == mode
    with pytest.raises(ConfigError, match="iceberg.mode: 'columns' is not one of disabled, key_value"):
        LogConfig().with_overrides({"iceberg.mode": "columns"})
    assert shown["iceberg.orphan.files.older.than.ms"] == str(3 * 24 * 3600 * 1000)  # Iceberg's older_than default
    assert (
        LogConfig().with_overrides({"iceberg.orphan.files.older.than.ms": "-1"}).iceberg_orphan_files_older_than_ms
        == -1
    )
    with pytest.raises(ConfigError, match="iceberg.orphan.files.older.than.ms"):
        LogConfig().with_overrides({"iceberg.orphan.files.older.than.ms": "-2"})


def test_iceberg_partition_spec_its_alias_and_its_grammar():
    shown = LogConfig().to_topic_configs()
    assert shown["iceberg.partition.spec"] == shown["redpanda.iceberg.partition.spec"] == "(hour(kafka.timestamp))"
    for spec in ("(day(redpanda.timestamp), bucket(16, key))", "()", "(kafka.partition)", "(truncate(4, name), value)"):
        assert LogConfig().with_overrides({"redpanda.iceberg.partition.spec": spec}).iceberg_partition_spec == spec
    for spec, why in [
        ("(hour(key))", "key cannot be partitioned by hour (it takes identity, void, bucket, truncate)"),
        ("(minute(kafka.timestamp))", "unknown transform 'minute'"),
        ("(bucket(key))", "bucket takes a width first: bucket(N, key)"),
        ("(bucket(0, key))", "bucket's width must be at least 1, not 0"),
        ("(kafka.nope)", "no column 'kafka.nope'"),
        ("hour", "a spec is a parenthesised list"),
        ("(hour(kafka.timestamp)", "unbalanced parentheses"),
        ("(day(kafka.timestamp),)", "an empty field"),
        ("(key, key)", "identity(key) is in the spec twice"),
        ("(hour(kafka.timestamp), day(kafka.timestamp))", "hour(kafka.timestamp) and day(kafka.timestamp) partition"),
    ]:
        with pytest.raises(ConfigError) as refusal:
            LogConfig().with_overrides({"iceberg.partition.spec": spec})
        assert str(refusal.value).startswith(f"iceberg.partition.spec: {spec!r}: {why}")


def test_iceberg_maintenance_keys_and_their_bounds():
    config = LogConfig().with_overrides(
        {"history.expire.min-snapshots-to-keep": "3", "iceberg.compaction.enabled": "false"}
    )
    assert (config.history_expire_min_snapshots_to_keep, config.iceberg_compaction_enabled) == (3, False)
    assert LogConfig().history_expire_max_snapshot_age_ms == 5 * 24 * 3600 * 1000
    with pytest.raises(ConfigError, match="history.expire.min-snapshots-to-keep: value 0 is below the minimum 1"):
        LogConfig().with_overrides({"history.expire.min-snapshots-to-keep": "0"})
    with pytest.raises(ConfigError, match="iceberg.compaction.min-input-files: value 1 is below the minimum 2"):
        LogConfig().with_overrides({"iceberg.compaction.min-input-files": "1"})
    # Iceberg's table properties with Iceberg's defaults: old metadata files are kept unless asked
    shown = LogConfig().to_topic_configs()
    assert shown["write.metadata.delete-after-commit.enabled"] == "false"
    assert shown["write.metadata.previous-versions-max"] == "100"
    with pytest.raises(ConfigError, match="write.metadata.previous-versions-max: value 0 is below the minimum 1"):
        LogConfig().with_overrides({"write.metadata.previous-versions-max": "0"})
