"""Reading the topics out of a consumer's subscription metadata (ConsumerProtocolSubscription).

A classic group treats protocol metadata as opaque; it needs the topics only to answer
OffsetDelete (GROUP_SUBSCRIBED_TO_TOPIC) and to show them in tools, as Kafka does. Classic members
inside a consumer group (online migration, KIP-848) are different: the broker assigns their
partitions, so it reads their whole subscription and writes their assignment.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


def subscription_topics(metadata: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: the topics array comes first)."""
    try:
        position = 2  # int16 version
        (count,) = struct.unpack_from(">i", metadata, position)
        position += 4
        topics = set()
        for _ in range(max(0, min(count, len(metadata)))):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            topics.add(metadata[position : position + length].decode("utf-8", "replace"))
            position += length
        return topics
    except struct.error:
        return set()


class _Reader:
    """Non-flexible fields of the embedded consumer protocol; struct.error on anything short."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        n = self.unpack(">h")
        if n < 0:
            return None
        if self.pos + n > len(self.data):
            raise struct.error("string runs past the end")
        self.pos += n
        return self.data[self.pos - n : self.pos].decode("utf-8", "replace")

    def count(self) -> int:
        n = self.unpack(">i")
        if n > len(self.data) - self.pos:
            raise struct.error("impossible array length")
        return max(n, 0)


@dataclass
class Subscription:
    """ConsumerProtocolSubscription v0-3: what a classic member tells the group in its JoinGroup."""

    version: int
    topics: list[str]
    owned: dict[str, set[int]] = field(default_factory=dict)  # v1+
    rack_id: str | None = None  # v3+


def decode_subscription(metadata: bytes) -> Subscription:
    """Raises ValueError on malformed metadata (Kafka answers such a member with an error)."""
    try:
        r = _Reader(metadata)
        version = r.unpack(">h")
        if version < 0:
            raise ValueError(f"unknown subscription version {version}")
        topics = [r.string() or "" for _ in range(r.count())]
        user_data = r.unpack(">i")
        r.pos += max(user_data, 0)
        if r.pos > len(metadata):
            raise struct.error("user data runs past the end")
        owned: dict[str, set[int]] = {}
        rack = None
        if version >= 1 and r.pos < len(metadata):
            for _ in range(r.count()):
                topic = r.string() or ""
                owned.setdefault(topic, set()).update(r.unpack(">i") for _ in range(r.count()))
            if version >= 2 and r.pos < len(metadata):
                r.unpack(">i")  # generation id
                if version >= 3 and r.pos < len(metadata):
                    rack = r.string()
        return Subscription(version, topics, owned, rack)
    except struct.error as exc:
        raise ValueError(f"malformed consumer protocol subscription: {exc}") from None


def subscription_version(metadata: bytes) -> int:
    """The version an assignment for this member is written in (Kafka's ConsumerProtocol.deserializeVersion,
    capped at the assignment's highest, 3)."""
    if len(metadata) < 2:
        return 0
    return max(0, min(3, struct.unpack_from(">h", metadata)[0]))


def encode_assignment(version: int, partitions: dict[str, set[int]] | dict[str, frozenset[int]]) -> bytes:
    """ConsumerProtocolAssignment: version, [topic, [partition]], null user data."""
    parts = [struct.pack(">hi", version, len(partitions))]
    for topic in sorted(partitions):
        name = topic.encode()
        ps = sorted(partitions[topic])
        parts.append(struct.pack(">h", len(name)) + name + struct.pack(f">i{len(ps)}i", len(ps), *ps))
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocolAssignment; empty for no (or unreadable) assignment."""
    result: dict[str, set[int]] = {}
    try:
        r = _Reader(data)
        r.unpack(">h")
        for _ in range(r.count()):
            topic = r.string() or ""
            result.setdefault(topic, set()).update(r.unpack(">i") for _ in range(r.count()))
    except struct.error:
        return {}
    return result
