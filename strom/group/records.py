"""Keys and values of the __consumer_offsets topic, in Kafka's own schemas.

Kafka's tools (and anything else reading __consumer_offsets) decode these, so the layouts are
Kafka's exactly. The key's leading int16 version says what a record is:

    0/1  OffsetCommitKey:    group string, topic string, partition int32
    2    GroupMetadataKey:   group string

    OffsetCommitValue v3:    offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    GroupMetadataValue v3:   protocol_type string, generation int32, protocol string?, leader string?,
                             current_state_timestamp int64,
                             members [member_id string, group_instance_id string?, client_id string,
                                      client_host string, rebalance_timeout int32, session_timeout int32,
                                      subscription bytes, assignment bytes]

A null value is a tombstone: the offset (or the whole group) was deleted. Strings here are
classic (int16 length, -1 for null), bytes int32-length.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.group.record_fields import MAX_STRING_BYTES, RecordFormatError, _Reader, _string

if TYPE_CHECKING:
    from strom.group.consumer_records import ConsumerKey

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


def fits(value: str) -> bool:
    """Whether ``value`` can be stored in one of these records' int16-length strings."""
    return len(value) * 4 <= MAX_STRING_BYTES or len(value.encode()) <= MAX_STRING_BYTES


def _blob(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0


@dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    if isinstance(key, OffsetKey):
        return _I16.pack(OFFSET_KEY_VERSION) + _string(key.group) + _string(key.topic) + _I32.pack(key.partition)
    return _I16.pack(GROUP_KEY_VERSION) + _string(key.group)


def decode_key(data: bytes) -> OffsetKey | GroupKey | ConsumerKey:
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.string() or "", reader.string() or "", reader.i32())
    if version == 2:
        return GroupKey(reader.string() or "")
    if 3 <= version <= 8 or version == 16:  # the consumer group protocol's records (KIP-848)
        from strom.group.consumer_records import decode_key as decode_consumer_key

        return decode_consumer_key(version, reader)
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(value: OffsetValue) -> bytes:
    return (
        _I16.pack(OFFSET_VALUE_VERSION)
        + _I64.pack(value.offset)
        + _I32.pack(value.leader_epoch)
        + _string(value.metadata)
        + _I64.pack(value.commit_timestamp)
    )


def decode_offset_value(data: bytes) -> OffsetValue:
    reader = _Reader(data)
    version = reader.i16()
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string() or ""
    commit_timestamp = reader.i64()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp)


def encode_group_value(value: GroupValue) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += [
            _string(m.member_id),
            _string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout),
            _I32.pack(m.session_timeout),
            _blob(m.subscription),
            _blob(m.assignment),
        ]
    return b"".join(parts)


def decode_group_value(data: bytes) -> GroupValue:
    reader = _Reader(data)
    version = reader.i16()
    protocol_type = reader.string() or ""
    generation = reader.i32()
    protocol = reader.string()
    leader = reader.string()
    timestamp = reader.i64() if version >= 2 else -1
    count = reader.i32()
    if count < 0 or count > len(data):
        raise RecordFormatError(f"impossible member count {count}")
    members = []
    for _ in range(count):
        member_id = reader.string() or ""
        instance = reader.string() if version >= 3 else None
        client_id = reader.string() or ""
        client_host = reader.string() or ""
        rebalance_timeout = reader.i32() if version >= 1 else 0
        session_timeout = reader.i32()
        members.append(
            MemberRecord(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                reader.blob(),
                reader.blob(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, members)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


@functools.lru_cache(maxsize=8192)
def partition_for_group(group: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % partitions, so strom picks the same partition as Kafka.

    Cached: every group and transactional request asks it again for the same few ids, and the
    hash walks the string in Python (a tenth of the coordinator's time in a commit-per-1000-records
    transactional run)."""
    h = java_string_hash(group)
    return (0 if h == -(2**31) else abs(h)) % partitions
