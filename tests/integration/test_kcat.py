"""Debian's kcat (librdkafka 2.0.2) against a real strom broker: produce, consume, metadata, offset queries."""

from __future__ import annotations

import time

import pytest

from tests.integration.clients import (
    CODECS,
    Msg,
    assert_same,
    confluent_consume,
    kcat,
    kcat_consume,
    module_broker,  # noqa: F401 - fixture
    unique_topic,
)

HEADERS = (("trace", b"abc-123"), ("source", b"kcat"))


def kcat_produce(bootstrap: str, topic: str, lines: list[tuple[bytes, bytes]], *settings: str) -> tuple[int, int]:
    """Produce `key<TAB>value` lines with the same headers on each; returns the wall-clock window (ms)."""
    args = ["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", "\t", "-m", "10", "-X", "acks=all"]
    for name, value in HEADERS:
        args += ["-H", f"{name}={value.decode()}"]
    for setting in settings:
        args += ["-X", setting]
    before = int(time.time() * 1000)
    kcat(args, stdin=b"".join(k + b"\t" + v + b"\n" for k, v in lines))
    return before, int(time.time() * 1000)


def expected(lines: list[tuple[bytes, bytes]]) -> list[Msg]:
    return [Msg(k, v, HEADERS) for k, v in lines]


def assert_timestamps_within(msgs: list[Msg], window: tuple[int, int]) -> None:
    before, after = window
    for m in msgs:  # kcat cannot set timestamps: librdkafka stamps CreateTime with the wall clock
        assert before - 1000 <= m.timestamp <= after + 1000, (m.offset, m.timestamp, window)


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(module_broker, codec, idempotent):
    topic = unique_topic(f"kcat-{codec}")
    lines = [(f"key-{i % 4}".encode(), f"value {i} ".encode() + b"z" * (i * 13)) for i in range(40)]
    window = kcat_produce(
        module_broker.bootstrap,
        topic,
        lines,
        f"compression.codec={codec}",
        f"enable.idempotence={'true' if idempotent else 'false'}",
        "linger.ms=20",
    )
    got = kcat_consume(module_broker.bootstrap, topic)
    assert_same(got, expected(lines), check_timestamps=False)
    assert_timestamps_within(got, window)


def test_binary_file_message_and_nulls(module_broker, tmp_path):
    """A file becomes one message, byte for byte (every byte value, no delimiter games)."""
    topic = unique_topic("kcat-bin")
    payload = bytes(range(256)) * 300 + b"\n\t\x00"
    path = tmp_path / "blob.bin"
    path.write_bytes(payload)
    kcat(
        [
            "-P",
            "-b",
            module_broker.bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-k",
            "bin-key",
            "-X",
            "compression.codec=zstd",
            str(path),
        ]
    )
    # -Z: an empty key or value is sent as null
    kcat(["-P", "-b", module_broker.bootstrap, "-t", topic, "-p", "0", "-Z", "-K", ":"], stdin=b":no key\ntombstone:\n")
    got = kcat_consume(module_broker.bootstrap, topic)
    assert [(m.offset, m.key, m.value) for m in got] == [
        (0, b"bin-key", payload),
        (1, None, b"no key"),
        (2, b"tombstone", None),
    ]
    # And a different client reads the same bytes.
    other = confluent_consume(module_broker.bootstrap, topic, 3)
    assert [(m.key, m.value) for m in other] == [(b"bin-key", payload), (None, b"no key"), (b"tombstone", None)]


def test_metadata_list(module_broker):
    topic = unique_topic("kcat-meta")
    kcat_produce(module_broker.bootstrap, topic, [(b"k", b"v")])
    out = kcat(["-L", "-b", module_broker.bootstrap, "-t", topic, "-m", "10"]).decode()
    assert "1 brokers:" in out and f"broker 0 at {module_broker.bootstrap}" in out, out
    assert f'topic "{topic}" with 1 partitions:' in out, out
    assert "partition 0, leader 0, replicas: 0, isrs: 0" in out, out


def test_query_offsets_by_time_and_consume_range(module_broker):
    topic = unique_topic("kcat-query")
    lines = [(b"k", f"v{i}".encode()) for i in range(5)]
    kcat_produce(module_broker.bootstrap, topic, lines, "linger.ms=0")
    got = kcat_consume(module_broker.bootstrap, topic)
    assert len(got) == 5
    third = got[2].timestamp
    out = kcat(["-Q", "-b", module_broker.bootstrap, "-t", f"{topic}:0:{third}", "-m", "10"]).decode()
    # "<topic> [0] offset N": the first offset whose timestamp is >= the query (several records can share a ms)
    first_same_ms = min(m.offset for m in got if m.timestamp == third)
    assert f"{topic} [0] offset {first_same_ms}" in out, out
    # From an absolute offset, and relative to the end.
    assert [(m.offset, m.value) for m in kcat_consume(module_broker.bootstrap, topic, 0, "3")] == [
        (3, b"v3"),
        (4, b"v4"),
    ]
    assert [m.offset for m in kcat_consume(module_broker.bootstrap, topic, 0, "-1")] == [4]
