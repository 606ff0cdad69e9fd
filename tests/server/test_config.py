import dataclasses
import logging

import pytest

from strom.server.config import BrokerConfig, config_reference_markdown
from strom.server.config_listeners import Listener
from strom.server.config_properties import parse_properties
from strom.storage.log_config import LONG_MAX, ConfigError, LogConfig

KAFKA_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092",  # strom: loopback (Kafka: every interface)
    "broker.id": "0",  # strom: 0 (Kafka: -1, generated)
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "socket.request.max.bytes": "104857600",
    "message.max.bytes": "1048588",
    "log.segment.bytes": "1073741824",
    "log.roll.hours": "168",
    "log.roll.ms": str(168 * 3600 * 1000),
    "log.retention.hours": "168",
    "log.retention.ms": str(168 * 3600 * 1000),
    "log.retention.minutes": None,
    "log.retention.bytes": "-1",
    "log.retention.check.interval.ms": "300000",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.flush.interval.messages": str(LONG_MAX),
    "log.flush.interval.ms": str(LONG_MAX),
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.cleanup.policy": "delete",
    "log.cleaner.enable": "true",
    "log.cleaner.delete.retention.ms": "86400000",
    "log.cleaner.min.cleanable.ratio": "0.5",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.backoff.ms": "15000",
    "log.message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "log.segment.delete.delay.ms": "60000",
    "zookeeper.connect": None,
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "18000",
    "broker.rack": None,
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.commit.timeout.ms": "5000",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.socket.timeout.ms": "30000",
    "num.replica.fetchers": "1",
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "300",
    "controlled.shutdown.enable": "true",
    "transaction.max.timeout.ms": "900000",
    "transactional.id.expiration.ms": "604800000",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "producer.id.expiration.ms": "86400000",
    "max.incremental.fetch.session.cache.slots": "1000",
    "advertised.listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "./strom-data",
}


def test_defaults_are_kafkas():
    items = BrokerConfig().items()
    for key, expected in KAFKA_DEFAULTS.items():
        assert items[key] == expected, key
    assert BrokerConfig.from_properties(None) == BrokerConfig()


def test_every_field_is_named_after_its_key_and_documented():
    for field in dataclasses.fields(BrokerConfig):
        assert field.name == field.metadata["key"].replace(".", "_")
        assert field.metadata["doc"].endswith(".")


def test_reference_markdown_lists_every_key_once():
    table = config_reference_markdown()
    rows = table.strip().splitlines()
    assert rows[0] == "| Key | Default | Meaning |"
    assert len(rows) == 2 + len(dataclasses.fields(BrokerConfig))
    assert "| `log.retention.hours` | `168` |" in table
    assert "| `log.retention.ms` | `null` |" in table


# --- .properties parsing ----------------------------------------------------------------------


def test_parse_properties_java_rules():
    text = (
        "# comment\n"
        "! also a comment \\\n"
        "   \n"
        "a=1\n"
        "b : two  \n"
        "  c   spaced value\n"
        "d=first \\\n"
        "    second\\\n"
        "\tthird \\\n"
        "  fourth\n"
        "e=ends with even backslashes \\\\\n"
        "f=\\u0041\\t\\=x\n"
        "key\\ with\\:escapes = v\n"
        "g=\r\n"
        "h\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "two",
        "c": "spaced value",
        "d": "first secondthird fourth",  # leading blanks of a continuation go
        "e": "ends with even backslashes \\",
        "f": "A\t=x",
        "key with:escapes": "v",
        "g": "",
        "h": "",
    }


def test_from_properties_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "############################# Server Basics #############################\n"
        "broker.id=3\n"
        "listeners=PLAINTEXT://0.0.0.0:0,\\\n"
        "          INTERNAL://[::1]:9093\n"
        "advertised.listeners = PLAINTEXT://broker3.example:19092\n"
        "listener.security.protocol.map: PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
        "log.dirs=/data/a, /data/b\n"
        "log.retention.hours=24\n"
        "zookeeper.connect=zk1:2181,zk2:2181/strom\n"
    )
    config = BrokerConfig.from_properties(str(path))
    assert config.broker_id == 3
    assert config.listeners == (Listener("PLAINTEXT", "0.0.0.0", 0), Listener("INTERNAL", "::1", 9093))
    assert str(config.listeners[1]) == "INTERNAL://[::1]:9093"
    assert config.advertised_listeners == (Listener("PLAINTEXT", "broker3.example", 19092),)
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert config.log_dirs == ("/data/a", "/data/b")
    assert config.log_retention_ms == 24 * 3600 * 1000
    assert config.zookeeper_connect == "zk1:2181,zk2:2181/strom"
    assert config.items()["listeners"] == "PLAINTEXT://0.0.0.0:0,INTERNAL://[::1]:9093"


def test_kafkas_stock_server_properties_load_without_warnings(tmp_path, caplog):
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=0\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kafka-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "#log.flush.interval.messages=10000\n"
        "#log.flush.interval.ms=1000\n"
        "log.retention.hours=168\n"
        "#log.retention.bytes=1073741824\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
        "zookeeper.connect=localhost:2181\n"
        "zookeeper.connection.timeout.ms=18000\n"
        "group.initial.rebalance.delay.ms=0\n"
    )
    with caplog.at_level(logging.WARNING, logger="strom.config"):
        config = BrokerConfig.from_properties(str(path))
    assert caplog.records == []
    assert config.log_dirs == ("/tmp/kafka-logs",)
    assert config.group_initial_rebalance_delay_ms == 0


def test_overrides_win_over_the_file(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nnum.partitions=4\n")
    config = BrokerConfig.from_properties(str(path), {"broker.id": "7"})
    assert (config.broker_id, config.num_partitions) == (7, 4)


def test_unknown_key_warns_and_is_ignored(caplog):
    with caplog.at_level(logging.WARNING, logger="strom.config"):
        config = BrokerConfig.from_mapping({"no.such.key": "1", "num.partitions": "2"})
    assert config.num_partitions == 2
    assert [r.name for r in caplog.records] == ["strom.config"]
    assert "no.such.key" in caplog.records[0].getMessage()


def test_a_misspelt_key_is_told_the_nearest_known_one(caplog):
    with caplog.at_level(logging.WARNING, logger="strom.config"):
        config = BrokerConfig.from_mapping({"num.partition": "3", "log.retention.hour": "5", "no.such.key": "1"})
    assert config.num_partitions == 1 and config.log_retention_hours == 168  # still ignored
    assert sorted(r.getMessage() for r in caplog.records) == [
        "log.retention.hour: unknown broker config, ignored (did you mean log.retention.hours?)",
        "no.such.key: unknown broker config, ignored",  # nothing close: no guess
        "num.partition: unknown broker config, ignored (did you mean num.partitions?)",
    ]


# --- derived keys -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, expected_ms",
    [
        ({}, 168 * 3600_000),
        ({"log.retention.hours": "1"}, 3600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.minutes": "5", "log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.ms": "-7"}, -1),
    ],
)
def test_retention_precedence_ms_over_minutes_over_hours(given, expected_ms):
    config = BrokerConfig.from_mapping(given)
    assert config.log_retention_ms == expected_ms
    assert config.log_config().retention_ms == expected_ms


def test_other_derived_keys():
    config = BrokerConfig.from_mapping(
        {
            "log.roll.hours": "2",
            "log.dir": "/one,/two",
            "log.flush.scheduler.interval.ms": "3000",
            "zookeeper.session.timeout.ms": "9000",
        }
    )
    assert config.log_roll_ms == 2 * 3600_000
    assert config.log_dirs == ("/one", "/two")
    assert config.log_flush_interval_ms == 3000
    assert config.zookeeper_connection_timeout_ms == 9000
    explicit = BrokerConfig.from_mapping({"log.roll.hours": "2", "log.roll.ms": "5", "log.dir": "/x", "log.dirs": "/y"})
    assert (explicit.log_roll_ms, explicit.log_dirs) == (5, ("/y",))


def test_inter_broker_listener_defaults():
    named = BrokerConfig.from_mapping(
        {"listeners": "CLIENT://127.0.0.1:0", "listener.security.protocol.map": "CLIENT:PLAINTEXT"}
    )
    assert named.inter_broker_listener_name == "CLIENT"
    assert named.advertised_listener("CLIENT") == Listener("CLIENT", "127.0.0.1", 0)
    assert named.advertised_listener("PLAINTEXT") is None


# --- bad values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, value",
    [
        ("broker.id", "-1"),
        ("broker.id", "abc"),
        ("num.partitions", "0"),
        ("socket.request.max.bytes", "99999999999"),  # above Integer.MAX
        ("log.segment.bytes", "13"),
        ("auto.create.topics.enable", "yes"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("log.cleaner.min.cleanable.ratio", "half"),
        ("log.message.timestamp.type", "WallClock"),
        ("compression.type", "brotli"),
        ("log.cleanup.policy", "archive"),
        ("log.dirs", " , "),
        ("log.dir", ""),
        ("listeners", "localhost:9092"),
        ("listeners", "PLAINTEXT://:99999"),
        ("listeners", "PLAINTEXT://:9092,PLAINTEXT://:9093"),
        ("listeners", ""),
        ("listener.security.protocol.map", "PLAINTEXT:TLS"),
        ("listener.security.protocol.map", "PLAINTEXT"),
    ],
)
def test_bad_value_raises_config_error_naming_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping({key: value})
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ")


@pytest.mark.parametrize(
    "mapping, key",
    [
        (
            {"group.min.session.timeout.ms": "10000", "group.max.session.timeout.ms": "9000"},
            "group.min.session.timeout.ms",
        ),
        ({"replica.fetch.wait.max.ms": "40000"}, "replica.socket.timeout.ms"),
        ({"replica.fetch.wait.max.ms": "20000", "replica.lag.time.max.ms": "10000"}, "replica.fetch.wait.max.ms"),
        (
            {
                "listeners": "PLAINTEXT://:9092,OTHER://:9092",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
            },
            "listeners",
        ),
        ({"listeners": "SSL://:9093"}, "ssl.keystore.location"),  # an SSL listener without a certificate
        ({"listeners": "INTERNAL://:9093"}, "listeners"),
        ({"advertised.listeners": "EXTERNAL://host:9092"}, "advertised.listeners"),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners"),
        ({"inter.broker.listener.name": "REPLICATION"}, "inter.broker.listener.name"),
    ],
)
def test_cross_key_rules(mapping, key):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping(mapping)
    assert info.value.key == key


def test_port_zero_listeners_may_repeat():
    config = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,B://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,B:PLAINTEXT",
        }
    )
    assert [listener.port for listener in config.listeners] == [0, 0]


# --- log_config() ---------------------------------------------------------------------------


def test_log_config_defaults_equal_topic_defaults():
    assert BrokerConfig().log_config() == LogConfig()


def test_log_config_maps_broker_keys_to_topic_keys():
    config = BrokerConfig.from_mapping(
        {
            "log.segment.bytes": "1000",
            "log.roll.ms": "2000",
            "log.roll.jitter.ms": "20",
            "log.retention.minutes": "3",
            "log.retention.bytes": "4000",
            "log.index.interval.bytes": "50",
            "log.index.size.max.bytes": "6000",
            "log.cleanup.policy": "compact,delete",
            "log.cleaner.delete.retention.ms": "7000",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.cleaner.min.compaction.lag.ms": "8000",
            "log.cleaner.max.compaction.lag.ms": "9000",
            "message.max.bytes": "10000",
            "log.message.timestamp.type": "LogAppendTime",
            "compression.type": "zstd",
            "log.flush.interval.messages": "11",
            "log.flush.interval.ms": "12",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "true",
            "log.segment.delete.delay.ms": "13",
            "log.preallocate": "true",
            "compression.gzip.level": "4",
            "compression.lz4.level": "12",
            "compression.zstd.level": "-5",
            "log.message.format.version": "2.8",
            "log.message.timestamp.difference.max.ms": "14",
            "log.message.timestamp.before.max.ms": "15",
            "log.message.timestamp.after.max.ms": "16",
            "log.message.downconversion.enable": "false",
            "log.local.retention.ms": "17",
            "log.local.retention.bytes": "18",
        }
    )
    shown = config.log_config().to_topic_configs()
    # strom's own topic keys (schema validation, Iceberg and its table maintenance, named as Iceberg's
    # table properties) have no broker key: Kafka's are checked here
    own = ("confluent.", "redpanda.", "iceberg.", "history.expire.", "write.metadata.")
    kafkas = {key: value for key, value in shown.items() if not key.startswith(own)}
    assert kafkas == {
        "segment.bytes": "1000",
        "segment.ms": "2000",
        "segment.jitter.ms": "20",
        "segment.index.bytes": "6000",
        "index.interval.bytes": "50",
        "retention.ms": "180000",
        "retention.bytes": "4000",
        "cleanup.policy": "compact,delete",
        "delete.retention.ms": "7000",
        "min.compaction.lag.ms": "8000",
        "max.compaction.lag.ms": "9000",
        "min.cleanable.dirty.ratio": "0.25",
        "max.message.bytes": "10000",
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "zstd",
        "flush.messages": "11",
        "flush.ms": "12",
        "file.delete.delay.ms": "13",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "preallocate": "true",
        "compression.gzip.level": "4",
        "compression.lz4.level": "12",
        "compression.zstd.level": "-5",
        "message.format.version": "2.8",
        "message.timestamp.difference.max.ms": "14",
        "message.timestamp.before.max.ms": "15",
        "message.timestamp.after.max.ms": "16",
        "leader.replication.throttled.replicas": "",
        "follower.replication.throttled.replicas": "",
        "message.downconversion.enable": "false",
        "remote.storage.enable": "false",
        "local.retention.ms": "17",
        "local.retention.bytes": "18",
        "remote.log.copy.disable": "false",
        "remote.log.delete.on.disable": "false",
    }


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        BrokerConfig().broker_id = 2


# --- Kafka 3.9 keys strom accepts but ignores ---------------------------------------------------


def test_deprecated_kafka_keys_are_accepted_shown_and_logged_once_as_ignored(caplog, monkeypatch):
    from strom.storage import log_config

    monkeypatch.setattr(log_config, "_warned", set())  # "once" is per process; start this test afresh
    mapping = {
        "log.message.format.version": "2.6",
        "log.message.downconversion.enable": "false",
        "inter.broker.protocol.version": "3.9",
        "log.local.retention.ms": "1000",
    }
    with caplog.at_level(logging.WARNING, logger="strom.config"):
        config = BrokerConfig.from_mapping(mapping)
        BrokerConfig.from_mapping(mapping)
    items = config.items()
    assert {key: items[key] for key in mapping} == mapping
    warned = sorted(r.getMessage().split("=")[0] for r in caplog.records)
    assert warned == sorted(mapping)
    assert all("ignored" in r.getMessage() for r in caplog.records)


def test_deprecated_keys_still_need_valid_values():
    with pytest.raises(ConfigError, match="log.message.format.version: Version 9.9 is not a valid version"):
        BrokerConfig.from_mapping({"log.message.format.version": "9.9"})
    with pytest.raises(ConfigError, match="log.cleaner.min.compaction.lag.ms"):
        BrokerConfig.from_mapping({"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"})


def test_every_secret_key_is_reported_as_sensitive():
    """A key declared sensitive (its value null in DescribeConfigs) is also marked is_sensitive, as
    Kafka's PASSWORD keys are: the two come from different tables, which must agree."""
    from strom.server.dynamic_config_keys import is_password

    secrets = [f.metadata["key"] for f in dataclasses.fields(BrokerConfig) if f.metadata.get("sensitive")]
    assert "iceberg.rest.catalog.credential" in secrets and "iceberg.rest.catalog.token" in secrets
    assert [key for key in secrets if not is_password(key)] == []
