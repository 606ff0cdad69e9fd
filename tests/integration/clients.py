"""Helpers for the real-client integration tests: sample messages, bounded waits, a raw socket client.

Every wait here is bounded. The raw client speaks the Kafka wire protocol with kio's message
classes (through strom.protocol), so malformed-input tests can send exactly the bytes they mean.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from strom.protocol import api
from strom.protocol.codec import decode_response, encode_request, skip_tagged_fields
from strom.protocol.entities import build
from tests.broker_process import BrokerProcess

WAIT_S = 15  # upper bound for anything a healthy broker does in well under a second
TS_BASE = 1_700_000_000_000  # explicit CreateTime timestamps: far from "now", so a broker-set time shows
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


# -- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Msg:
    """What a user sends and expects back, byte for byte."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None
    offset: int | None = field(default=None, compare=False)


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def sample_messages(n: int = 12, *, ts_base: int = TS_BASE, binary: bool = True) -> list[Msg]:
    """Keys (some null), values (binary, empty, large, one null), headers (duplicate names, empty values)."""
    out = []
    for i in range(n):
        key = None if i % 4 == 3 else f"key-{i % 3}".encode()
        if binary:
            value = bytes([i % 256, 0, 255, 10, 9, 13]) + f"value-{i}".encode() + bytes(range(256)) * (i % 3)
        else:
            value = f"value-{i}-".encode() + b"x" * (i * 7)
        if i == 5:
            value = b""
        if i == 7 and binary:
            value = os.urandom(64) + b"A" * 20_000  # compressible and bigger than a typical record
        if i == 9 and key is not None and binary:
            value = None  # a tombstone
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 2 == 0:
            headers = (("trace", f"id-{i}".encode()), ("bin", bytes([0, 1, 2, 255])))
        if i % 5 == 1:
            headers = (("dup", b"first"), ("dup", b"second"), ("empty", b""))
        out.append(Msg(key, value, headers, ts_base + i * 1000 + 7))
    return out


def assert_same(consumed: list[Msg], sent: list[Msg], *, first_offset: int = 0, check_timestamps: bool = True) -> None:
    """Values, keys, headers byte-identical and in order; offsets consecutive; timestamps as set."""
    assert len(consumed) == len(sent), f"consumed {len(consumed)} messages, sent {len(sent)}"
    for i, (got, want) in enumerate(zip(consumed, sent)):
        assert got.offset == first_offset + i, f"message {i}: offset {got.offset}, expected {first_offset + i}"
        assert got.key == want.key, f"message {i}: key {got.key!r} != {want.key!r}"
        assert got.value == want.value, f"message {i}: value differs ({_short(got.value)} != {_short(want.value)})"
        assert tuple(got.headers) == tuple(want.headers), f"message {i}: headers {got.headers} != {want.headers}"
        if check_timestamps:
            assert got.timestamp == want.timestamp, f"message {i}: timestamp {got.timestamp} != {want.timestamp}"


def _short(value: bytes | None) -> str:
    if value is None:
        return "None"
    return repr(value[:40]) + (f"...({len(value)} bytes)" if len(value) > 40 else "")


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT_S, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


# -- confluent-kafka ----------------------------------------------------------------------------


def confluent_produce(bootstrap: str, topic: str, messages: list[Msg], partition: int = 0, **config: Any) -> list[int]:
    """Produce and flush; returns the acknowledged offsets (asserts every delivery succeeded)."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": WAIT_S * 1000}
    conf.update(config)
    producer = Producer(conf)
    reports: list[tuple[Any, int]] = []

    def on_delivery(err, msg):
        reports.append((err, msg.offset() if err is None else -1))

    for m in messages:
        kwargs = {"headers": list(m.headers)} if m.headers else {}
        if m.timestamp is not None:
            kwargs["timestamp"] = m.timestamp
        producer.produce(topic, value=m.value, key=m.key, partition=partition, on_delivery=on_delivery, **kwargs)
        producer.poll(0)
    left = producer.flush(WAIT_S)
    assert left == 0, f"{left} messages not delivered within {WAIT_S}s"
    errors = [err for err, _ in reports if err is not None]
    assert not errors, f"delivery errors: {errors[:3]}"
    return [offset for _, offset in reports]


def confluent_consume(
    bootstrap: str,
    topic: str,
    count: int,
    partition: int = 0,
    offset: int | None = None,
    timeout: float = WAIT_S,
    **config: Any,
) -> list[Msg]:
    """Manual assignment (no group protocol): read `count` messages from `offset` (default: beginning)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "strom-tests-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
    }
    conf.update(config)
    consumer = Consumer(conf)
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING if offset is None else offset)])
        return confluent_poll(consumer, count, timeout)
    finally:
        consumer.close()


def confluent_poll(consumer, count: int, timeout: float = WAIT_S) -> list[Msg]:
    out: list[Msg] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, f"consumer error: {msg.error()}"
        out.append(from_confluent(msg))
    return out


def confluent_group_consume(config: dict[str, Any], topic: str, count: int, group: str) -> list[Msg]:
    """Subscribe in ``group`` from the earliest offset, read ``count`` messages of ``topic`` (one
    partition) and commit them; the committed offset is checked too, so the whole round of a group
    member (join, sync, fetch, commit, offset fetch) went through the client's connection."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        out = confluent_poll(consumer, count, WAIT_S * 2)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=WAIT_S)
        assert committed[0].offset == count
    finally:
        consumer.close()
    return out


def from_confluent(msg) -> Msg:
    ts_type, ts = msg.timestamp()
    return Msg(msg.key(), msg.value(), tuple(msg.headers() or ()), ts, msg.offset())


# -- kcat ---------------------------------------------------------------------------------------

KCAT = "/usr/bin/kcat"
# Binary-safe: lengths first, then exactly that many key and value bytes; headers (ASCII) last.
KCAT_FORMAT = "%K %S %o %T|%k%s|%h\n"


def kcat(args: list[str], stdin: bytes | None = None, timeout: float = 30) -> bytes:
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"kcat {' '.join(args)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')}"
    )
    return proc.stdout


def kcat_consume(bootstrap: str, topic: str, partition: int = 0, offset: str = "beginning", *extra: str) -> list[Msg]:
    """Everything from `offset` to the end of the partition (-e), parsed binary-safely."""
    out = kcat(
        [
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(partition),
            "-o",
            offset,
            "-e",
            "-q",
            "-m",
            "10",
            *extra,
            "-f",
            KCAT_FORMAT,
        ]
    )
    return parse_kcat(out)


def parse_kcat(out: bytes) -> list[Msg]:
    msgs, pos = [], 0
    while pos < len(out):
        bar = out.index(b"|", pos)
        klen, vlen, offset, ts = (int(x) for x in out[pos:bar].split(b" "))
        pos = bar + 1
        key = None if klen < 0 else out[pos : pos + klen]
        pos += max(klen, 0)
        value = None if vlen < 0 else out[pos : pos + vlen]
        pos += max(vlen, 0)
        assert out[pos : pos + 1] == b"|", f"kcat output out of step at byte {pos}: {out[pos : pos + 20]!r}"
        end = out.index(b"\n", pos)
        headers_text = out[pos + 1 : end].decode()
        pos = end + 1
        headers = []
        if headers_text:
            for item in headers_text.split(","):
                name, _, hvalue = item.partition("=")
                headers.append((name, hvalue.encode()))
        msgs.append(Msg(key, value, tuple(headers), ts, offset))
    return msgs


# -- raw wire protocol ---------------------------------------------------------------------------


class ConnectionClosed(Exception):
    pass


class RawClient:
    """A plain socket speaking Kafka frames; every read has a timeout."""

    def __init__(self, bootstrap: str, timeout: float = 10, client_id: str | None = "strom-raw-test"):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.timeout = timeout
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # writing
    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def header(self, api_key: int, api_version: int, correlation_id: int, header_version: int | None = None) -> bytes:
        if header_version is None:
            header_version = api.request_header_version(api_key, api_version)
        out = struct.pack(">hhi", api_key, api_version, correlation_id)
        if header_version >= 1:
            if self.client_id is None:
                out += struct.pack(">h", -1)
            else:
                cid = self.client_id.encode()
                out += struct.pack(">h", len(cid)) + cid
        if header_version >= 2:
            out += b"\x00"
        return out

    def send_request(self, api_key: int, api_version: int, body: Any, header_version: int | None = None) -> int:
        """body: a kio request object, a dict of its fields, or raw body bytes. Returns the correlation id."""
        self.correlation_id += 1
        if isinstance(body, dict):
            body = build(api.request_class(api_key, api_version), body)
        payload = body if isinstance(body, (bytes, bytearray)) else encode_request(body)
        frame = self.header(api_key, api_version, self.correlation_id, header_version) + payload
        self.send_bytes(struct.pack(">i", len(frame)) + frame)
        return self.correlation_id

    # reading
    def _recv_exact(self, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no complete frame within {self.timeout}s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except ConnectionResetError as exc:
                raise ConnectionClosed(str(exc)) from None
            except TimeoutError:
                raise TimeoutError(f"no complete frame within {self.timeout}s") from None
            if not chunk:
                raise ConnectionClosed("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def read_frame(self, timeout: float | None = None) -> bytes:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        (size,) = struct.unpack(">i", self._recv_exact(4, deadline))
        assert 0 <= size < 1 << 30, f"response frame size {size}"
        return self._recv_exact(size, deadline)

    def read_response(self, api_key: int, api_version: int, correlation_id: int) -> Any:
        frame = self.read_frame()
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation_id, f"correlation id {got}, expected {correlation_id}"
        offset = 4
        if api.response_header_version(api_key, api_version) >= 1:
            offset = skip_tagged_fields(frame, offset)
        return decode_response(api_key, api_version, frame, offset)

    def request(self, api_key: int, api_version: int, body: Any) -> Any:
        return self.read_response(api_key, api_version, self.send_request(api_key, api_version, body))

    def closed_by_peer(self, timeout: float = 5) -> bool:
        """True once the broker closes (EOF or reset) within `timeout`; False if it stays open and silent."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
            if not chunk:
                return True
        return False


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    """One broker for a whole test module (tests use unique topic names), so the module stays fast."""
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data") as process:
        yield process


# -- kafka-python -------------------------------------------------------------------------------


def kafka_python_produce(
    bootstrap: str, topic: str, messages: list[Msg], partition: int = 0, **config: Any
) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        **{
            "bootstrap_servers": bootstrap,
            "linger_ms": 5,
            "request_timeout_ms": WAIT_S * 1000,
            "max_block_ms": WAIT_S * 1000,
            **config,
        }
    )
    try:
        futures = [
            producer.send(
                topic,
                value=m.value,
                key=m.key,
                headers=list(m.headers) or None,
                partition=partition,
                timestamp_ms=m.timestamp,
            )
            for m in messages
        ]
        producer.flush(timeout=WAIT_S)
        return [f.get(timeout=WAIT_S).offset for f in futures]
    finally:
        producer.close(timeout=5)


def kafka_python_consume(
    bootstrap: str, topic: str, count: int, partition: int = 0, offset: int | None = None, timeout: float = WAIT_S
) -> list[Msg]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=WAIT_S * 1000 + 1000,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset)
        return kafka_python_poll(consumer, count, timeout)
    finally:
        consumer.close()


def kafka_python_subscribed(topics: list[str], timeout: float = WAIT_S, **config: Any):
    """A kafka-python group consumer that first polls once its metadata holds every topic's partitions.

    kafka-python 3.0.12 can leave a member without partitions for good. A leader compares the
    partitions it assigned with its latest metadata of the subscribed topics, and rejoins when they
    differ. A first assignment made before that metadata arrived differs, so it rejoins. If a
    poll's timeout ends while that JoinGroup/SyncGroup is in flight, the new assignment it makes
    meanwhile clears the difference, ``need_rejoin()`` turns false, and no later poll collects the
    finished join: the member holds no partitions and never fetches, though the broker answered
    every request. Under load a CI run failed that way.

    Subscribed from the start, the consumer records the partitions as part of the metadata update
    that brings them, on its I/O thread, which handles no group response before it is done; so by
    the first poll the first assignment is the whole one, and nothing rejoins.
    """
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(*topics, **config)
    try:
        wait_until(
            lambda: all(consumer.partitions_for_topic(topic) for topic in topics),
            timeout,
            what="kafka-python's metadata",
        )
    except BaseException:
        consumer.close()
        raise
    return consumer


def kafka_python_poll(consumer, count: int, timeout: float = WAIT_S) -> list[Msg]:
    out: list[Msg] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out.extend(Msg(r.key, r.value, tuple(r.headers or ()), r.timestamp, r.offset) for r in records)
    return out


# -- aiokafka -----------------------------------------------------------------------------------


async def aiokafka_produce(
    bootstrap: str, topic: str, messages: list[Msg], partition: int = 0, **config: Any
) -> list[int]:
    import asyncio

    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        **{"bootstrap_servers": bootstrap, "linger_ms": 5, "request_timeout_ms": WAIT_S * 1000, **config}
    )
    await asyncio.wait_for(producer.start(), WAIT_S)
    try:
        futures = [
            await producer.send(
                topic,
                value=m.value,
                key=m.key,
                partition=partition,
                timestamp_ms=m.timestamp,
                headers=list(m.headers) or None,
            )
            for m in messages
        ]
        results = await asyncio.wait_for(asyncio.gather(*futures), WAIT_S)
        return [r.offset for r in results]
    finally:
        await asyncio.wait_for(producer.stop(), WAIT_S)


async def aiokafka_consume(
    bootstrap: str, topic: str, count: int, partition: int = 0, offset: int | None = None, timeout: float = WAIT_S
) -> list[Msg]:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await asyncio.wait_for(consumer.start(), WAIT_S)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if offset is None:
            await consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset)
        return await aiokafka_poll(consumer, count, timeout)
    finally:
        await asyncio.wait_for(consumer.stop(), WAIT_S)


async def aiokafka_poll(consumer, count: int, timeout: float = WAIT_S) -> list[Msg]:
    out: list[Msg] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for records in (await consumer.getmany(timeout_ms=200)).values():
            out.extend(Msg(r.key, r.value, tuple(r.headers or ()), r.timestamp, r.offset) for r in records)
    return out


# -- raw requests the durability and robustness tests need ----------------------------------------

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def raw_wait_for_topic(client: RawClient, topic: str, partitions: int = 1) -> None:
    """Metadata v4 with auto-creation, until every partition has a leader."""

    def ready():
        response = client.request(3, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        [entry] = response.topics
        return (
            int(entry.error_code) == 0
            and len(entry.partitions) == partitions
            and all(int(p.error_code) == 0 and p.leader_id >= 0 for p in entry.partitions)
        )

    wait_until(ready, what=f"topic {topic} to have a leader")


def raw_init_producer_id(client: RawClient) -> tuple[int, int]:
    response = client.request(22, 1, {"transactional_id": None, "transaction_timeout": 60_000})
    assert int(response.error_code) == 0, response
    return response.producer_id, response.producer_epoch


def raw_produce(
    client: RawClient, topic: str, records: bytes, *, partition: int = 0, version: int = 9, acks: int = -1
) -> tuple[int, int]:
    """One partition's records; returns (error_code, base_offset)."""
    response = client.request(
        0,
        version,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        },
    )
    [topic_response] = response.responses
    [part] = topic_response.partition_responses
    return int(part.error_code), part.base_offset


def raw_list_offsets(
    client: RawClient, topic: str, timestamp: int, *, partition: int = 0, version: int = 7
) -> tuple[int, int, int]:
    """Returns (error_code, offset, timestamp)."""
    response = client.request(
        2,
        version,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": timestamp, "current_leader_epoch": -1}],
                }
            ],
        },
    )
    [entry] = response.topics
    [part] = entry.partitions
    return int(part.error_code), part.offset, part.timestamp


def produce_with_reports(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]], **config: Any
) -> list:
    """Produce (key, value) pairs to partition 0 with confluent-kafka; each record's delivery error
    (None: delivered). With a long ``linger.ms`` the records leave in one batch when flush() sends.

    The partition's leader is learnt before the first record: records produced before librdkafka
    knows it wait in an unassigned queue and are moved one at a time when metadata arrives, and
    during flush() the first one moved can leave alone in a batch of its own (seen on a 3-broker
    cluster in CI)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": WAIT_S * 1000, **config})
    producer.list_topics(topic, timeout=WAIT_S)
    reports: dict[int, object] = {}
    for i, (key, value) in enumerate(records):
        producer.produce(
            topic, value=value, key=key, partition=0, on_delivery=lambda err, msg, i=i: reports.__setitem__(i, err)
        )
    assert producer.flush(WAIT_S) == 0
    return [reports[i] for i in range(len(records))]
