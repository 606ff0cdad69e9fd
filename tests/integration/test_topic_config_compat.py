"""Every topic config Kafka 3.9 accepts, set through confluent-kafka's AdminClient on a real broker.

The expectation for each key is read from what the documentation's topic config reference says strom
does with it, so the reference and the broker cannot disagree: a key succeeds unless it says
"Refused when `<value>`". Accepted
keys are shown by DescribeConfigs as the topic's own (DYNAMIC_TOPIC_CONFIG); the deprecated ones
are logged once by the broker as ignored.
"""

from __future__ import annotations

import re
import warnings

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from strom.docs.reference import topic_config_docs
from strom.protocol.errors import ErrorCode
from strom.storage.log_config import TOPIC_KEYS
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, unique_topic
from tests.storage.test_log_config import KAFKA_39_TOPIC_KEYS, SCHEMA_TOPIC_KEYS

# A value Kafka 3.9 accepts for each key, unlike its default so the change shows.
VALID = {
    "segment.bytes": "1048576",
    "segment.ms": "3600000",
    "segment.jitter.ms": "1000",
    "segment.index.bytes": "1048576",
    "flush.messages": "100000",
    "flush.ms": "60000",
    "retention.bytes": "1073741824",
    "retention.ms": "86400000",
    "max.message.bytes": "2097152",
    "index.interval.bytes": "8192",
    "delete.retention.ms": "3600000",
    "min.compaction.lag.ms": "1000",
    "max.compaction.lag.ms": "86400000",
    "file.delete.delay.ms": "30000",
    "min.cleanable.dirty.ratio": "0.3",
    "cleanup.policy": "compact,delete",
    "unclean.leader.election.enable": "true",
    "min.insync.replicas": "1",
    "compression.type": "zstd",
    "compression.gzip.level": "5",
    "compression.lz4.level": "12",
    "compression.zstd.level": "10",
    "preallocate": "true",
    "message.format.version": "2.8-IV1",
    "message.timestamp.type": "LogAppendTime",
    "message.timestamp.difference.max.ms": "86400000",
    "message.timestamp.before.max.ms": "172800000",
    "message.timestamp.after.max.ms": "3600000",
    "leader.replication.throttled.replicas": "0:0",
    "follower.replication.throttled.replicas": "*",
    "message.downconversion.enable": "false",
    "remote.storage.enable": "true",
    "local.retention.ms": "3600000",
    "local.retention.bytes": "1048576",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
}


def readme_topic_table() -> dict[str, str]:
    """Topic key -> the "what strom does" of the site's topic config reference (generated from TOPIC_KEYS)."""
    return {key: effect for key, (_, effect) in topic_config_docs().items()}


def refused_per_readme(key: str, value: str) -> bool:
    match = re.match(r"Refused when `([^`]*)`", readme_topic_table()[key])
    return bool(match) and match.group(1) == value


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("configs") / "data") as process:
        yield process


@pytest.fixture(scope="module")
def admin(broker):
    yield AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin, config: dict[str, str] | None = None) -> str:
    topic = unique_topic("cfg")
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(WAIT_S)
    return topic


def describe(admin, topic: str) -> dict:
    [future] = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=WAIT_S).values()
    return future.result(WAIT_S)


def incremental_set(admin, topic: str, key: str, value: str) -> None:
    resource = ConfigResource(
        "topic", topic, incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)]
    )
    [future] = admin.incremental_alter_configs([resource]).values()
    future.result(WAIT_S)


def legacy_alter(admin, topic: str, configs: dict[str, str]) -> None:
    """AlterConfigs on purpose: older tools still send it, and confluent-kafka warns that it is
    deprecated on every call (39 warnings in each run's summary), which says nothing here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "alter_configs has been deprecated", DeprecationWarning)
        [future] = admin.alter_configs([ConfigResource("topic", topic, set_config=configs)]).values()
    future.result(WAIT_S)


def test_the_readme_lists_exactly_kafka_39s_topic_configs():
    table = list(readme_topic_table())
    assert table[: len(KAFKA_39_TOPIC_KEYS)] == KAFKA_39_TOPIC_KEYS  # then strom's own (schemas, Iceberg)
    assert [key for key in table if key in SCHEMA_TOPIC_KEYS] == SCHEMA_TOPIC_KEYS
    assert table == list(TOPIC_KEYS)
    assert set(VALID) == set(KAFKA_39_TOPIC_KEYS)


@pytest.mark.parametrize("key", KAFKA_39_TOPIC_KEYS)
def test_each_kafka_39_topic_config_does_what_the_readme_says(admin, key):
    value = VALID[key]
    refused = refused_per_readme(key, value)
    for apply in (
        lambda topic: incremental_set(admin, topic, key, value),
        lambda topic: legacy_alter(admin, topic, {key: value}),
    ):
        topic = create(admin)
        if refused:
            with pytest.raises(KafkaException) as failed:
                apply(topic)
            assert failed.value.args[0].code() == ErrorCode.INVALID_CONFIG and key in str(failed.value)
            assert describe(admin, topic)[key].source == ConfigSource.DEFAULT_CONFIG.value
        else:
            apply(topic)
            entry = describe(admin, topic)[key]
            assert (entry.value, entry.source) == (value, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    topic = unique_topic("cfg")
    [created] = admin.create_topics([NewTopic(topic, 1, 1, config={key: value})]).values()
    if refused:
        with pytest.raises(KafkaException) as failed:
            created.result(WAIT_S)
        assert failed.value.args[0].code() == ErrorCode.INVALID_CONFIG
    else:
        created.result(WAIT_S)
        assert describe(admin, topic)[key].value == value


def test_every_accepted_key_at_once(admin):
    """What an older tool or a client test suite sends: the full set in one AlterConfigs."""
    accepted = {key: value for key, value in VALID.items() if not refused_per_readme(key, value)}
    topic = create(admin)
    legacy_alter(admin, topic, accepted)
    described = describe(admin, topic)
    assert {key: described[key].value for key in accepted} == accepted
    assert create(admin, accepted)


def test_unknown_keys_are_invalid_config_naming_the_key(admin):
    topic = create(admin)
    for attempt in (
        lambda: incremental_set(admin, topic, "message.format.versions", "2.8"),
        lambda: legacy_alter(admin, topic, {"retention.ms": "1000", "log.retention.ms": "1000"}),
    ):
        with pytest.raises(KafkaException) as failed:
            attempt()
        assert failed.value.args[0].code() == ErrorCode.INVALID_CONFIG
    assert "message.format.versions" in str(
        _failure(lambda: incremental_set(admin, topic, "message.format.versions", "2.8"))
    )
    assert "log.retention.ms" in str(_failure(lambda: legacy_alter(admin, topic, {"log.retention.ms": "1"})))
    [created] = admin.create_topics([NewTopic(unique_topic("cfg"), 1, 1, config={"no.such.key": "1"})]).values()
    with pytest.raises(KafkaException) as failed:
        created.result(WAIT_S)
    assert failed.value.args[0].code() == ErrorCode.INVALID_CONFIG and "no.such.key" in str(failed.value)
    assert describe(admin, topic)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def _failure(attempt) -> KafkaException:
    with pytest.raises(KafkaException) as failed:
        attempt()
    return failed.value


def test_deprecated_topic_key_is_logged_once_by_the_broker(admin, broker):
    topic = create(admin, {"message.format.version": "0.10.2-IV0"})
    for _ in range(3):
        incremental_set(admin, topic, "message.format.version", "0.10.2-IV0")
        describe(admin, topic)
    lines = [line for line in broker.read_log().splitlines() if "message.format.version=0.10.2-IV0" in line]
    assert len(lines) == 1 and "ignored" in lines[0]


def test_server_properties_with_deprecated_broker_keys(tmp_path):
    deprecated = {
        "log.message.format.version": "2.8",
        "log.message.downconversion.enable": "false",
        "inter.broker.protocol.version": "3.9-IV0",
        "log.message.timestamp.difference.max.ms": "3600000",
    }
    properties = tmp_path / "server.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in deprecated.items()))
    with BrokerProcess(tmp_path / "data", properties=str(properties)) as process:
        client = AdminClient({"bootstrap.servers": process.bootstrap})
        [future] = client.describe_configs([ConfigResource("broker", "0")], request_timeout=WAIT_S).values()
        described = future.result(WAIT_S)
        assert {key: described[key].value for key in deprecated} == deprecated
        topic = create(client)
        topic_configs = describe(client, topic)
        assert topic_configs["message.format.version"].value == "2.8"
        assert topic_configs["message.format.version"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert topic_configs["message.timestamp.difference.max.ms"].value == "3600000"
        log = process.read_log()
    for key in ("log.message.format.version", "log.message.downconversion.enable", "inter.broker.protocol.version"):
        assert len([line for line in log.splitlines() if f"{key}=" in line and "ignored" in line]) == 1, key
