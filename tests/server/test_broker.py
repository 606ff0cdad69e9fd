"""The broker process as a user meets it: startup config errors, topics, restarts, long polls."""

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from strom.protocol.api import request_class
from strom.protocol.codec import decode_response, encode
from strom.protocol.entities import build
from tests.broker_process import BrokerProcess, start_expecting_failure


@pytest.mark.parametrize(
    "override, key",
    [
        ("num.partitions=abc", "num.partitions"),
        ("log.segment.bytes=10", "log.segment.bytes"),
        ("listeners=nonsense", "listeners"),
        ("group.min.session.timeout.ms=999999999", "group.min.session.timeout.ms"),
    ],
)
def test_bad_config_stops_startup_naming_the_key(tmp_path, override, key):
    result = start_expecting_failure(tmp_path / "data", override)
    assert result.returncode == 2
    assert result.stderr.startswith(f"strom server-start: invalid configuration: {key}: ")
    assert result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "data").exists()  # refused before anything is made


def test_unknown_key_is_a_warning_not_an_error(tmp_path):
    with BrokerProcess(tmp_path / "data", {"no.such.key": "1"}) as broker:
        assert broker.port > 0
    assert "no.such.key" in broker.read_log()


def test_json_logs_are_one_object_per_line(tmp_path):
    """--log-format json: every line a log collector reads parses, with time, level, logger and message."""
    with BrokerProcess(tmp_path / "data", {"no.such.key": "1"}, args=["--log-format", "json"]) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", -5))  # a negative frame length: closed with a warning
            assert sock.recv(16) == b""

    lines = [json.loads(line) for line in broker.read_log().splitlines() if line.startswith("{")]
    assert all(set(entry) >= {"time", "level", "logger", "message"} for entry in lines)
    assert any(e["level"] == "WARNING" and "no.such.key" in e["message"] for e in lines)
    assert any(e["logger"] == "strom.server" and "malformed frame" in e["message"] for e in lines)
    other = [line for line in broker.read_log().splitlines() if line and not line.startswith("{")]
    assert all(not line[:4].isdigit() for line in other), other  # no text-format log lines left


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker, topic, partitions=1, config=None):
    client = admin(broker)  # must outlive the future, or librdkafka destroys the request
    futures = client.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    return futures[topic].result(timeout=20)


def test_topic_names_with_dots_and_underscores_and_their_collision(broker):
    create(broker, "orders.eu")
    with pytest.raises(KafkaException) as excinfo:
        create(broker, "orders_eu")
    assert excinfo.value.args[0].code() == 17  # INVALID_TOPIC_EXCEPTION
    assert "collides" in excinfo.value.args[0].str()
    with pytest.raises(KafkaException) as excinfo:
        create(broker, "bad/name")
    assert excinfo.value.args[0].code() == 17
    assert "orders.eu" in admin(broker).list_topics(timeout=10).topics


def test_invalid_topic_config_names_the_key(broker):
    with pytest.raises(KafkaException) as excinfo:
        create(broker, "cfg", config={"retention.ms": "soon"})
    assert excinfo.value.args[0].code() == 40  # INVALID_CONFIG
    assert "retention.ms" in excinfo.value.args[0].str()
    with pytest.raises(KafkaException) as excinfo:
        create(broker, "cfg", config={"no.such.topic.key": "1"})
    assert "no.such.topic.key" in excinfo.value.args[0].str()


def produce(broker, topic, values, keyed=False, **config):
    producer = Producer({"bootstrap.servers": broker.bootstrap, **config})
    for value in values:
        producer.produce(topic, value, key=value if keyed else None)
    assert producer.flush(20) == 0


def consume_all(broker, topic, partitions=1, expected=None, timeout=20):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (expected is None or len(out) < expected):
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            out.append(message)
    consumer.close()
    return out


def test_topics_configs_and_data_survive_a_restart(broker):
    create(broker, "durable", partitions=2, config={"retention.ms": "123456789", "cleanup.policy": "compact"})
    produce(broker, "durable", [b"x%d" % i for i in range(50)], keyed=True)  # compacted: keys required
    broker.restart()
    metadata = admin(broker).list_topics(timeout=10)
    assert len(metadata.topics["durable"].partitions) == 2
    resource = ConfigResource(ConfigResource.Type.TOPIC, "durable")
    client = admin(broker)
    configs = client.describe_configs([resource])[resource].result(timeout=10)
    assert configs["retention.ms"].value == "123456789"
    assert configs["cleanup.policy"].value == "compact"
    assert sorted(m.value() for m in consume_all(broker, "durable", 2, expected=50)) == sorted(
        b"x%d" % i for i in range(50)
    )


def test_clean_shutdown_leaves_the_marker_and_checkpoints(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    produce(broker, "t", [b"a", b"b"])
    assert broker.stop() == 0
    names = set(os.listdir(tmp_path / "data"))
    assert {".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "meta.properties"} <= names
    assert "t 0 2" in (tmp_path / "data" / "recovery-point-offset-checkpoint").read_text()


def test_auto_create_topics_follows_the_broker_defaults(tmp_path):
    with BrokerProcess(tmp_path / "data", {"num.partitions": "3"}) as broker:
        produce(broker, "auto", [b"v"])
        assert len(admin(broker).list_topics(timeout=10).topics["auto"].partitions) == 3
    with BrokerProcess(tmp_path / "off", {"auto.create.topics.enable": "false"}) as broker:
        metadata = admin(broker).list_topics(topic="nope", timeout=10)
        assert metadata.topics["nope"].error.code() == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_topic_compression_type_recompresses_what_clients_send(broker):
    create(broker, "zipped", config={"compression.type": "gzip"})
    produce(broker, "zipped", [b"hello %d" % i for i in range(20)], **{"compression.type": "lz4"})
    data_dir = broker.data_dir / "zipped-0"
    result = subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "dump-log", str(data_dir / "00000000000000000000.log")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    codecs = {part.split()[0] for part in result.stdout.split("compresscodec: ")[1:]}
    assert codecs == {"gzip"}
    assert [m.value() for m in consume_all(broker, "zipped", expected=20)] == [b"hello %d" % i for i in range(20)]


def raw_request(port, api_key, version, values, correlation=1):
    body = encode(build(request_class(api_key, version), values))
    header = struct.pack(">hhi", api_key, version, correlation) + struct.pack(">h", 4) + b"test"
    if version >= 12 and api_key == 1:
        header += b"\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        data = b""
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            assert chunk
            data += chunk
    offset = 5 if (api_key == 1 and version >= 12) else 4
    return decode_response(api_key, version, data, offset)


def test_long_poll_fetch_is_answered_by_the_next_append(broker):
    create(broker, "poll")
    result = {}

    def fetch():
        started = time.monotonic()
        result["response"] = raw_request(
            broker.port,
            1,
            11,
            {
                "replica_id": -1,
                "max_wait": 15000,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "rack_id": "",
                "forgotten_topics_data": [],
                "topics": [
                    {
                        "topic": "poll",
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
            },
        )
        result["took"] = time.monotonic() - started

    waiter = threading.Thread(target=fetch)
    waiter.start()
    time.sleep(1.0)
    assert "response" not in result  # nothing to return yet: the fetch is waiting
    produce(broker, "poll", [b"wake up"])
    waiter.join(20)
    partition = result["response"].responses[0].partitions[0]
    assert partition.high_watermark == 1 and b"wake up" in bytes(partition.records)
    assert result["took"] < 10  # the append answered it, not the 15 s max_wait
