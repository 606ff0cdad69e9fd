"""Helpers for the consumer-group tests: topics, producing, consumers that record their
assignments, bounded polling loops, and one raw request over a socket.

Every wait here is bounded; a consumer is always closed by the test that made it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from strom.protocol import api
from strom.protocol.codec import decode_response, encode, skip_tagged_fields
from strom.protocol.entities import build

WAIT_S = 15

# Small timeouts so that rebalances and session expiry happen within a test's time budget.
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
# librdkafka's consumer close has no timeout of its own; a rehearsal once saw a cooperative-sticky
# member's close not return for 38 minutes (the broker had taken its LeaveGroup at once)
CLOSE_TIMEOUT_S = 30


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = WAIT_S,
    interval: float = 0.05,
    what: str = "condition",
    tick: Callable[[], None] | None = None,
) -> Any:
    """Poll ``predicate`` (calling ``tick`` between tries, e.g. to poll consumers) until truthy."""
    deadline = time.monotonic() + timeout
    while True:
        if tick is not None:
            tick()
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        if tick is None:
            time.sleep(interval)


# -- topics and producing ----------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=WAIT_S).values():
        future.result(WAIT_S)
    return name


def produce(
    bootstrap: str, topic: str, values: Iterable[bytes], partitions: int | None = None, timestamp: int | None = None
) -> None:
    """Produce and flush; with ``partitions`` the values go round-robin over them (value i → i % n)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": WAIT_S * 1000})
    errors: list[Any] = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i, value in enumerate(values):
        kwargs: dict[str, Any] = {}
        if partitions is not None:
            kwargs["partition"] = i % partitions
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, value, on_delivery=on_delivery, **kwargs)
        producer.poll(0)
    left = producer.flush(WAIT_S)
    assert left == 0 and not errors, f"{left} undelivered, errors {errors[:3]}"


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as confluent-kafka's Consumer.committed() sees them (-1001: none)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=WAIT_S)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


# -- consumers that remember what they were given -------------------------------------------------


class Member:
    """A confluent-kafka consumer that records its assignment through the rebalance callbacks.

    ``events`` lists ("assign"|"revoke"|"lost", [partitions]) in order; ``owned`` is the current
    assignment (incremental under the cooperative protocol, whole under the eager one).
    """

    def __init__(self, bootstrap: str, group: str, topic: str | list[str], name: str = "", **config: Any):
        from confluent_kafka import Consumer

        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "client.id": name or "member",
            **FAST_GROUP,
        }
        conf.update(config)
        self.name = name
        self.group = group
        self.cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self.consumer = Consumer(conf)
        self.events: list[tuple[str, list[int]]] = []
        self.owned: set[int] = set()
        self.messages: list[Any] = []
        self.closed = False
        topics = [topic] if isinstance(topic, str) else topic
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _on_assign(self, _consumer, partitions) -> None:
        got = [p.partition for p in partitions]
        self.events.append(("assign", sorted(got)))
        self.owned = (self.owned | set(got)) if self.cooperative else set(got)

    def _on_revoke(self, _consumer, partitions) -> None:
        gone = [p.partition for p in partitions]
        self.events.append(("revoke", sorted(gone)))
        self.owned -= set(gone)

    def _on_lost(self, _consumer, partitions) -> None:
        gone = [p.partition for p in partitions]
        self.events.append(("lost", sorted(gone)))
        self.owned -= set(gone)

    def poll(self, timeout: float = 0.05):
        msg = self.consumer.poll(timeout)
        if msg is not None and msg.error() is None:
            self.messages.append(msg)
            return msg
        return None

    def close(self) -> None:
        """Close the consumer (leaving the group), or fail the test if librdkafka does not return."""
        if self.closed:
            return
        self.closed = True
        closing = threading.Thread(target=self.consumer.close, name=f"close-{self.name}", daemon=True)
        closing.start()
        closing.join(CLOSE_TIMEOUT_S)
        if closing.is_alive():
            raise AssertionError(f"{self.name}: the consumer's close() did not return within {CLOSE_TIMEOUT_S} s")


def poll_all(members: Iterable[Member], timeout: float = 0.02) -> Callable[[], None]:
    members = list(members)

    def tick() -> None:
        for member in members:
            if not member.closed:
                member.poll(timeout)

    return tick


def close_all(members: Iterable[Member]) -> None:
    for member in members:
        try:
            member.close()
        except Exception:  # a failed close must not hide the assertion that brought us here
            pass


def wait_for_assignment(
    members: list[Member], total: int, timeout: float = WAIT_S, sizes: list[int] | None = None
) -> list[set[int]]:
    """Poll every member until their assignments are disjoint and cover ``total`` partitions."""

    def settled() -> bool:
        owned = [m.owned for m in members]
        union = set().union(*owned)
        if len(union) != total or sum(len(o) for o in owned) != total:
            return False
        return sizes is None or sorted(len(o) for o in owned) == sorted(sizes)

    wait_until(settled, timeout, what=f"{total} partitions spread over {len(members)} members", tick=poll_all(members))
    return [set(m.owned) for m in members]


# -- one raw request -----------------------------------------------------------------------------


def raw_request(bootstrap: str, api_key: int, api_version: int, fields: dict[str, Any], timeout: float = 10) -> Any:
    """Send one request built from ``fields`` with kio's classes; return the decoded response."""
    body = encode(build(api.request_class(api_key, api_version), fields))
    header = struct.pack(">hhi", api_key, api_version, 1)
    if api.request_header_version(api_key, api_version) >= 1:
        header += struct.pack(">h", 8) + b"raw-test"
    if api.request_header_version(api_key, api_version) >= 2:
        header += b"\x00"
    frame = header + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        data = _recv(sock, size)
    assert struct.unpack_from(">i", data, 0)[0] == 1
    offset = 4
    if api.response_header_version(api_key, api_version) >= 1:
        offset = skip_tagged_fields(data, offset)
    return decode_response(api_key, api_version, data, offset)


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    return bytes(buf)
