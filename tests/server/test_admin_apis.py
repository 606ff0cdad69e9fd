"""Admin APIs against a real broker process, through confluent-kafka, kafka-python and raw requests.

DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
DeleteRecords, DescribeCluster, DescribeLogDirs and OffsetForLeaderEpoch: each test asserts what a
user sees (topic lists, the data dir, consumed offsets, config values and their sources).
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from strom.protocol import api
from strom.protocol.api import ApiKey
from strom.protocol.codec import decode_response, encode_request
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess

WAIT_S = 5


# -- helpers -----------------------------------------------------------------------------------------
_ADMINS: dict[str, AdminClient] = {}


def admin(broker) -> AdminClient:
    """One AdminClient per broker, kept referenced: a collected client fails its pending futures."""
    client = _ADMINS.get(broker.bootstrap)
    if client is None:
        client = _ADMINS[broker.bootstrap] = AdminClient({"bootstrap.servers": broker.bootstrap})
    return client


@pytest.fixture
def broker(broker):
    """conftest's broker, with this module's AdminClient dropped before the broker stops."""
    yield broker
    _ADMINS.pop(broker.bootstrap, None)


def create_topic(broker, name: str, partitions: int = 1, config: dict | None = None) -> None:
    futures = admin(broker).create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(WAIT_S)


def produce(broker, topic: str, count: int, partition: int = 0, **extra) -> list[int]:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **extra})
    offsets, errors = [], []

    def delivered(err, msg):
        (errors.append(err) if err else offsets.append(msg.offset()))

    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=partition, on_delivery=delivered)
    assert producer.flush(WAIT_S) == 0, "produce did not finish"
    if errors:
        raise KafkaException(errors[0])
    return offsets


def consume_offsets(broker, topic: str, count: int, partition: int = 0, start: int = 0) -> list[int]:
    """Offsets of the first ``count`` records a consumer reads from ``start`` (auto.offset.reset=earliest).

    kafka-python without a group: nothing here depends on the group coordinator.
    """
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KPTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=WAIT_S * 1000,
    )
    try:
        tp = KPTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        offsets, deadline = [], time.monotonic() + WAIT_S
        while len(offsets) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                offsets += [r.offset for r in records]
        return offsets
    finally:
        consumer.close()


def topic_configs(broker, topic: str) -> dict:
    [future] = admin(broker).describe_configs([ConfigResource("topic", topic)], request_timeout=WAIT_S).values()
    return future.result(WAIT_S)


def error_code(exc: BaseException) -> int:
    return exc.args[0].code()


def raw(broker, key: ApiKey, version: int, body: dict):
    """Send one request built with kio, return the decoded response (a small blocking client)."""
    payload = encode_request(build(api.request_class(key, version), body))
    header = struct.pack(">hhi", key, version, 7) + struct.pack(">h", 4) + b"test"
    if api.request_header_version(key, version) >= 2:
        header += b"\x00"
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(payload)) + header + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "connection closed before the response"
            data += chunk
    assert struct.unpack(">i", data[4:8])[0] == 7
    offset = 8 + (1 if api.response_header_version(key, version) >= 1 else 0)
    return decode_response(key, version, data, offset)


def partition_dirs(broker, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(broker.data_dir) if n.rpartition("-")[0] == topic)


# -- ApiVersions -------------------------------------------------------------------------------------
def test_admin_apis_are_advertised(broker):
    response = raw(broker, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.DELETE_TOPICS] == (0, 6)
    assert ranges[ApiKey.CREATE_PARTITIONS] == (0, 3)
    assert ranges[ApiKey.DESCRIBE_CONFIGS] == (0, 4)
    assert ranges[ApiKey.ALTER_CONFIGS] == (0, 2)
    assert ranges[ApiKey.INCREMENTAL_ALTER_CONFIGS] == (0, 1)
    assert ranges[ApiKey.DELETE_RECORDS] == (0, 2)
    assert ranges[ApiKey.DESCRIBE_CLUSTER] == (0, 2)
    assert ranges[ApiKey.DESCRIBE_LOG_DIRS] == (0, 5)
    assert ranges[ApiKey.ALTER_REPLICA_LOG_DIRS] == (0, 2)
    assert ranges[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (0, 4)


# -- DeleteTopics ------------------------------------------------------------------------------------
def test_delete_topics_removes_topic_and_its_directories(broker):
    create_topic(broker, "doomed", partitions=2)
    produce(broker, "doomed", 3)
    assert partition_dirs(broker, "doomed") == ["doomed-0", "doomed-1"]
    futures = admin(broker).delete_topics(["doomed", "never-existed"], operation_timeout=WAIT_S)
    futures["doomed"].result(WAIT_S)
    with pytest.raises(KafkaException) as missing:
        futures["never-existed"].result(WAIT_S)
    assert error_code(missing.value) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "doomed" not in admin(broker).list_topics(timeout=WAIT_S).topics
    assert partition_dirs(broker, "doomed") == []
    # the name is free again, and the new topic starts empty
    create_topic(broker, "doomed")
    assert produce(broker, "doomed", 1) == [0]


def test_delete_topics_by_id_v6(broker):
    create_topic(broker, "by-id")
    [meta] = raw(broker, ApiKey.METADATA, 12, {"topics": [{"name": "by-id"}]}).topics
    unknown = uuid.uuid4()
    response = raw(
        broker,
        ApiKey.DELETE_TOPICS,
        6,
        {
            "timeout": 5000,
            "topics": [
                {"name": None, "topic_id": meta.topic_id},
                {"name": None, "topic_id": unknown},
                {"name": "by-id", "topic_id": meta.topic_id},
                {"name": "twice", "topic_id": None},
                {"name": "twice", "topic_id": None},
            ],
        },
    )
    results = [(r.name, r.topic_id, r.error_code) for r in response.responses]
    assert ("by-id", meta.topic_id, ErrorCode.NONE) in results
    assert (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID) in results
    assert ("by-id", meta.topic_id, ErrorCode.INVALID_REQUEST) in results  # name and id together
    assert results.count(("twice", None, ErrorCode.INVALID_REQUEST)) == 1  # one answer per duplicate
    assert partition_dirs(broker, "by-id") == []


def test_delete_topic_disabled_and_static_broker_config(tmp_path, request):
    overrides = {"delete.topic.enable": "false", "log.retention.hours": "5", "log.segment.bytes": "1048576"}
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        request.addfinalizer(lambda: _ADMINS.pop(broker.bootstrap, None))
        create_topic(broker, "kept")
        v2 = raw(broker, ApiKey.DELETE_TOPICS, 2, {"timeout": 1000, "topic_names": ["kept"]})
        assert v2.responses[0].error_code == ErrorCode.INVALID_REQUEST
        v5 = raw(broker, ApiKey.DELETE_TOPICS, 5, {"timeout": 1000, "topic_names": ["kept"]})
        assert v5.responses[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED
        assert "kept" in admin(broker).list_topics(timeout=WAIT_S).topics
        # defaults set in server.properties show as STATIC_BROKER_CONFIG, with their own key as synonym
        configs = topic_configs(broker, "kept")  # librdkafka always asks for synonyms
        retention = configs["retention.ms"]
        assert retention.value == str(5 * 3600 * 1000)
        assert retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
        response = raw(
            broker,
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {
                "include_synonyms": True,
                "resources": [{"resource_type": 2, "resource_name": "kept", "configuration_keys": ["retention.ms"]}],
            },
        )
        [entry] = response.results[0].configs
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
            ("log.retention.hours", "5", ConfigSource.STATIC_BROKER_CONFIG.value),
            ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
        ]
        assert configs["segment.bytes"].value == "1048576"
        assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value


# -- CreatePartitions --------------------------------------------------------------------------------
def test_create_partitions_grows_topic_and_new_partition_takes_records(broker):
    create_topic(broker, "grow")
    client = admin(broker)
    client.create_partitions([NewPartitions("grow", 3)], validate_only=True)["grow"].result(WAIT_S)
    assert len(client.list_topics("grow", timeout=WAIT_S).topics["grow"].partitions) == 1
    client.create_partitions([NewPartitions("grow", 3)])["grow"].result(WAIT_S)
    assert len(client.list_topics("grow", timeout=WAIT_S).topics["grow"].partitions) == 3
    assert partition_dirs(broker, "grow") == ["grow-0", "grow-1", "grow-2"]
    assert produce(broker, "grow", 2, partition=2) == [0, 1]
    assert consume_offsets(broker, "grow", 2, partition=2) == [0, 1]
    with pytest.raises(KafkaException) as shrink:
        client.create_partitions([NewPartitions("grow", 2)])["grow"].result(WAIT_S)
    assert error_code(shrink.value) == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as unknown:
        client.create_partitions([NewPartitions("no-such-topic", 2)])["no-such-topic"].result(WAIT_S)
    assert error_code(unknown.value) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- DescribeConfigs ---------------------------------------------------------------------------------
def test_describe_topic_configs_defaults_and_overrides(broker):
    create_topic(broker, "described", config={"retention.ms": "3600000", "cleanup.policy": "compact"})
    configs = topic_configs(broker, "described")
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["retention.ms"].is_read_only and not configs["retention.ms"].is_sensitive
    # synonyms (raw: confluent-kafka keys them by name, which folds a chain that names a key twice)
    response = raw(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        1,
        {
            "include_synonyms": True,
            "resources": [{"resource_type": 2, "resource_name": "described", "configuration_keys": ["retention.ms"]}],
        },
    )
    [entry] = response.results[0].configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
    ]
    with pytest.raises(KafkaException) as unknown:
        topic_configs(broker, "no-such-topic")
    assert error_code(unknown.value) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_key_filter_and_documentation_raw(broker):
    create_topic(broker, "filtered")
    response = raw(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        4,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "filtered",
                    "configuration_keys": ["retention.ms", "cleanup.policy", "not.a.key"],
                }
            ],
            "include_synonyms": False,
            "include_documentation": True,
        },
    )
    [result] = response.results
    assert result.error_code == ErrorCode.NONE
    by_name = {c.name: c for c in result.configs}
    assert sorted(by_name) == ["cleanup.policy", "retention.ms"]
    assert by_name["retention.ms"].config_type == 5  # LONG
    assert by_name["cleanup.policy"].config_type == 7  # LIST
    assert "retention" in by_name["retention.ms"].documentation
    assert by_name["retention.ms"].synonyms == ()


def test_describe_broker_configs(broker):
    [future] = admin(broker).describe_configs([ConfigResource("broker", "0")]).values()
    configs = future.result(WAIT_S)
    assert configs["log.retention.hours"].value == "168"
    assert configs["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["log.retention.hours"].is_read_only
    # the test harness sets this one on the command line
    assert configs["group.initial.rebalance.delay.ms"].value == "0"
    assert configs["group.initial.rebalance.delay.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.dirs"].value == str(broker.data_dir)
    # another broker's id is refused; "" (the cluster-wide dynamic default) is empty in strom
    response = raw(
        broker,
        ApiKey.DESCRIBE_CONFIGS,
        1,
        {
            "resources": [
                {"resource_type": 4, "resource_name": "7", "configuration_keys": None},
                {"resource_type": 4, "resource_name": "", "configuration_keys": None},
                {"resource_type": 8, "resource_name": "0", "configuration_keys": None},
            ]
        },
    )
    other, default, loggers = response.results
    assert other.error_code == ErrorCode.INVALID_REQUEST and "7" in other.error_message
    assert default.error_code == ErrorCode.NONE and default.configs == ()
    assert loggers.error_code == ErrorCode.NONE and "root" in [c.name for c in loggers.configs]


def test_describe_configs_with_kafka_python(broker):
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    create_topic(broker, "kp-described", config={"max.message.bytes": "2000"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        found = client.describe_configs(
            [KPConfigResource(ConfigResourceType.TOPIC, "kp-described")], config_filter="all"
        )
        configs = found["topic"]["kp-described"]
        assert configs["max.message.bytes"]["value"] == "2000"
        assert configs["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["flush.ms"]["config_source"] == "DEFAULT_CONFIG"
        modified = client.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, "kp-described")])
        assert list(modified["topic"]["kp-described"]) == ["max.message.bytes"]
    finally:
        client.close()


# -- IncrementalAlterConfigs / AlterConfigs ----------------------------------------------------------
def incremental(broker, topic: str, *entries: ConfigEntry, validate_only: bool = False) -> None:
    resource = ConfigResource("topic", topic, incremental_configs=list(entries))
    [future] = admin(broker).incremental_alter_configs([resource], validate_only=validate_only).values()
    future.result(WAIT_S)


def test_incremental_alter_configs_operations(broker):
    create_topic(broker, "altered")
    SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    incremental(broker, "altered", ConfigEntry("retention.ms", "1234", incremental_operation=SET))
    configs = topic_configs(broker, "altered")
    assert configs["retention.ms"].value == "1234"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    incremental(
        broker, "altered", ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
    )
    assert topic_configs(broker, "altered")["cleanup.policy"].value == "compact,delete"
    incremental(
        broker, "altered", ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)
    )
    assert topic_configs(broker, "altered")["cleanup.policy"].value == "compact"
    assert topic_configs(broker, "altered")["retention.ms"].value == "1234"  # untouched by the others

    incremental(broker, "altered", ConfigEntry("retention.ms", None, incremental_operation=DELETE))
    configs = topic_configs(broker, "altered")
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    incremental(broker, "altered", ConfigEntry("segment.ms", "5000", incremental_operation=SET), validate_only=True)
    assert topic_configs(broker, "altered")["segment.ms"].value == "604800000"

    with pytest.raises(KafkaException) as bad_value:
        incremental(broker, "altered", ConfigEntry("retention.ms", "soon", incremental_operation=SET))
    assert error_code(bad_value.value) == ErrorCode.INVALID_CONFIG
    assert "retention.ms" in str(bad_value.value)
    with pytest.raises(KafkaException) as bad_key:
        incremental(broker, "altered", ConfigEntry("retention.mss", "1", incremental_operation=SET))
    assert error_code(bad_key.value) == ErrorCode.INVALID_CONFIG and "retention.mss" in str(bad_key.value)
    with pytest.raises(KafkaException) as not_a_list:
        incremental(broker, "altered", ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND))
    assert error_code(not_a_list.value) == ErrorCode.INVALID_CONFIG
    assert topic_configs(broker, "altered")["cleanup.policy"].value == "compact"  # nothing changed


def test_altered_config_takes_effect_on_the_log(broker):
    create_topic(broker, "limited")
    produce(broker, "limited", 1)
    incremental(broker, "limited", ConfigEntry("max.message.bytes", "200", incremental_operation=AlterConfigOpType.SET))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.max.bytes": 100_000})
    errors = []
    producer.produce("limited", value=b"x" * 5000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(WAIT_S) == 0
    assert errors and errors[0] is not None and errors[0].code() == ErrorCode.MESSAGE_TOO_LARGE


def test_broker_configs_cannot_be_altered(broker):
    resource = ConfigResource(
        "broker",
        "0",
        incremental_configs=[ConfigEntry("log.retention.hours", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    [future] = admin(broker).incremental_alter_configs([resource]).values()
    with pytest.raises(KafkaException) as refused:
        future.result(WAIT_S)
    assert error_code(refused.value) == ErrorCode.INVALID_REQUEST
    assert "dynamically" in str(refused.value) and "log.retention.hours" in str(refused.value)


def test_legacy_alter_configs_replaces_all_overrides(broker):
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    create_topic(broker, "legacy", config={"retention.ms": "1000", "segment.ms": "2000"})
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        result = client.alter_configs(
            [KPConfigResource(ConfigResourceType.TOPIC, "legacy", {"segment.ms": "3000"})],
            incremental=False,
            raise_on_unknown=False,
        )
        assert result["topic"]["legacy"] == "OK"
    finally:
        client.close()
    configs = topic_configs(broker, "legacy")
    # kafka-python fills in the other modified keys itself, so send a bare request too
    assert configs["segment.ms"].value == "3000"
    response = raw(
        broker,
        ApiKey.ALTER_CONFIGS,
        0,
        {
            "validate_only": False,
            "resources": [
                {"resource_type": 2, "resource_name": "legacy", "configs": [{"name": "flush.messages", "value": "10"}]},
                {"resource_type": 2, "resource_name": "legacy-missing", "configs": []},
                {"resource_type": 2, "resource_name": "legacy2", "configs": [{"name": "segment.bytes", "value": "1"}]},
            ],
        },
    )
    assert [r.error_code for r in response.responses] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    configs = topic_configs(broker, "legacy")
    assert configs["flush.messages"].value == "10"
    assert configs["segment.ms"].source == configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    create_topic(broker, "legacy2")
    response = raw(
        broker,
        ApiKey.ALTER_CONFIGS,
        2,
        {
            "validate_only": False,
            "resources": [
                {"resource_type": 2, "resource_name": "legacy2", "configs": [{"name": "segment.bytes", "value": "1"}]}
            ],
        },
    )
    [bad] = response.responses
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "segment.bytes" in bad.error_message


# -- DeleteRecords -----------------------------------------------------------------------------------
def test_delete_records_moves_low_watermark(broker):
    create_topic(broker, "trimmed")
    assert produce(broker, "trimmed", 10) == list(range(10))
    client = admin(broker)
    [future] = client.delete_records([TopicPartition("trimmed", 0, 4)], operation_timeout=WAIT_S).values()
    assert future.result(WAIT_S).low_watermark == 4
    [earliest] = client.list_offsets({TopicPartition("trimmed", 0): OffsetSpec.earliest()}).values()
    assert earliest.result(WAIT_S).offset == 4
    assert consume_offsets(broker, "trimmed", 6, start=0) == list(range(4, 10))  # 0 is gone: reset to 4
    # -1: up to the high watermark
    [future] = client.delete_records([TopicPartition("trimmed", 0, -1)]).values()
    assert future.result(WAIT_S).low_watermark == 10
    [beyond] = client.delete_records([TopicPartition("trimmed", 0, 11)]).values()
    with pytest.raises(KafkaException) as out_of_range:
        beyond.result(WAIT_S)
    assert error_code(out_of_range.value) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_delete_records_errors_raw(broker):
    create_topic(broker, "compacted", config={"cleanup.policy": "compact"})
    response = raw(
        broker,
        ApiKey.DELETE_RECORDS,
        2,
        {
            "timeout": 1000,
            "topics": [
                {"name": "compacted", "partitions": [{"partition_index": 0, "offset": 0}]},
                {"name": "compacted", "partitions": [{"partition_index": 5, "offset": 0}]},
                {"name": "__consumer_offsets", "partitions": [{"partition_index": 0, "offset": 0}]},
            ],
        },
    )
    codes = [(t.partitions[0].error_code, t.partitions[0].low_watermark) for t in response.topics]
    assert codes == [
        (ErrorCode.POLICY_VIOLATION, -1),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
    ]


# -- DescribeCluster ---------------------------------------------------------------------------------
def test_describe_cluster(broker):
    # librdkafka describes a cluster with Metadata; DescribeCluster itself is asked raw below
    description = admin(broker).describe_cluster(request_timeout=WAIT_S).result(WAIT_S)
    assert description.controller.id == 0
    assert [(n.id, n.host, n.port) for n in description.nodes] == [(0, "127.0.0.1", broker.port)]
    for version in (0, 1, 2):
        body = {"include_cluster_authorized_operations": True, "endpoint_type": 1, "include_fenced_brokers": True}
        response = raw(broker, ApiKey.DESCRIBE_CLUSTER, version, body)
        assert response.error_code == ErrorCode.NONE
        assert response.cluster_id == description.cluster_id and response.controller_id == 0
        assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", broker.port)]
        assert response.cluster_authorized_operations & (1 << 8)  # DESCRIBE: no authorizer, all allowed
    controllers = raw(
        broker, ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2}
    )
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and controllers.brokers == ()


# -- DescribeLogDirs ---------------------------------------------------------------------------------
def test_describe_log_dirs(broker):
    from kafka.admin import KafkaAdminClient

    create_topic(broker, "sized", partitions=2)
    produce(broker, "sized", 5)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        [answer] = client.describe_log_dirs()
    finally:
        client.close()
    [log_dir] = answer["log_dirs"]
    assert log_dir["log_dir"] == str(broker.data_dir) and log_dir["error_code"] == 0
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[("sized", 0)] > 0 and sizes[("sized", 1)] == 0
    response = raw(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [{"topic": "sized", "partitions": [1]}]})
    [result] = response.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [("sized", [1])]
    assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------------
def test_offset_for_leader_epoch(broker):
    create_topic(broker, "epochs")
    produce(broker, "epochs", 3)

    def ask(version: int, partition: int = 0, epoch: int = 0, current: int = -1, replica_id: int = -1):
        body = {
            "replica_id": replica_id,
            "topics": [
                {
                    "topic": "epochs",
                    "partitions": [{"partition": partition, "current_leader_epoch": current, "leader_epoch": epoch}],
                }
            ],
        }
        [topic] = raw(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body).topics
        [answer] = topic.partitions
        return answer.error_code, answer.leader_epoch, answer.end_offset

    assert ask(4) == (ErrorCode.NONE, 0, 3)  # the latest epoch ends at the log end
    assert ask(3, replica_id=1) == (ErrorCode.NONE, 0, 3)
    assert ask(2, current=0) == (ErrorCode.NONE, 0, 3)
    assert ask(4, epoch=5) == (ErrorCode.NONE, -1, -1)  # an epoch this log never had
    assert ask(4, current=3)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert ask(4, partition=9)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
