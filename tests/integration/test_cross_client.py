"""What one client writes, every other client reads back identically (keys, values, headers, offsets, timestamps)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.clients import (
    TS_BASE,
    Msg,
    aiokafka_consume,
    aiokafka_produce,
    assert_same,
    confluent_consume,
    confluent_produce,
    kafka_python_consume,
    kafka_python_produce,
    kcat,
    kcat_consume,
    module_broker,  # noqa: F401 - fixture
    unique_topic,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's importlib.resources use

CLIENTS = ["confluent", "kafka-python", "aiokafka", "kcat"]
KCAT_HEADERS = (("origin", b"kcat"), ("n", b"1"))


def messages_for(producer: str) -> list[Msg]:
    if producer == "kcat":  # line-oriented input, fixed headers, librdkafka's own timestamps
        return [Msg(f"k{i}".encode(), f"kcat value {i} ".encode() + b"#" * i, KCAT_HEADERS) for i in range(20)]
    out = []
    for i in range(20):
        key = None if i % 5 == 4 else f"key-{i}".encode()
        value = bytes([i, 0, 10, 9, 255]) + f"{producer} value {i}".encode() * (1 + i % 4)
        headers = (("idx", str(i).encode()), ("from", producer.encode())) if i % 3 else ()
        out.append(Msg(key, value, headers, TS_BASE + 86_400_000 + i * 10))
    return out


def produce(client: str, bootstrap: str, topic: str, msgs: list[Msg]) -> tuple[int, int]:
    before = int(time.time() * 1000)
    if client == "confluent":
        confluent_produce(bootstrap, topic, msgs, **{"compression.type": "lz4", "enable.idempotence": True})
    elif client == "kafka-python":
        kafka_python_produce(bootstrap, topic, msgs, compression_type="gzip", enable_idempotence=True)
    elif client == "aiokafka":
        asyncio.run(aiokafka_produce(bootstrap, topic, msgs, compression_type="zstd", enable_idempotence=True))
    else:
        args = [
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-K",
            "\t",
            "-m",
            "10",
            "-X",
            "compression.codec=snappy",
            "-X",
            "enable.idempotence=true",
        ]
        for name, value in KCAT_HEADERS:
            args += ["-H", f"{name}={value.decode()}"]
        kcat(args, stdin=b"".join(m.key + b"\t" + m.value + b"\n" for m in msgs))
    return before, int(time.time() * 1000)


def consume(client: str, bootstrap: str, topic: str, count: int) -> list[Msg]:
    if client == "confluent":
        return confluent_consume(bootstrap, topic, count)
    if client == "kafka-python":
        return kafka_python_consume(bootstrap, topic, count)
    if client == "aiokafka":
        return asyncio.run(aiokafka_consume(bootstrap, topic, count))
    return kcat_consume(bootstrap, topic)


@pytest.mark.parametrize(
    ("producer", "consumer"), [(p, c) for p in CLIENTS for c in CLIENTS if p != c], ids=lambda name: name
)  # same-client round trips are in each client's own module
def test_cross_client(module_broker, producer, consumer):
    topic = unique_topic("x")
    sent = messages_for(producer)
    before, after = produce(producer, module_broker.bootstrap, topic, sent)
    got = consume(consumer, module_broker.bootstrap, topic, len(sent))
    assert_same(got, sent, check_timestamps=producer != "kcat")
    if producer == "kcat":
        assert all(before - 1000 <= m.timestamp <= after + 1000 for m in got), [m.timestamp for m in got]
