"""__consumer_offsets records of the consumer group protocol (KIP-848), in Kafka's own layouts.

From Kafka's group-coordinator message definitions (ConsumerGroup*Key/Value.json). Keys are
non-flexible (int16 version, int16-length strings), values are flexible version 0 (int16 version,
then compact strings and arrays as unsigned varints of length + 1, and a tagged-field section):

    3  ConsumerGroupMetadataKey(group)                      -> Epoch int32
    4  ConsumerGroupPartitionMetadataKey(group)             -> (not written; read and ignored)
    5  ConsumerGroupMemberMetadataKey(group, member)        -> InstanceId string?, RackId string?,
                  ClientId, ClientHost, SubscribedTopicNames []string, SubscribedTopicRegex string?,
                  RebalanceTimeoutMs int32, ServerAssignor string?, tag 0: ClassicMemberMetadata?
                  (SessionTimeoutMs int32, SupportedProtocols [Name string, Metadata bytes])
    6  ConsumerGroupTargetAssignmentMetadataKey(group)      -> AssignmentEpoch int32
    7  ConsumerGroupTargetAssignmentMemberKey(group, member) -> TopicPartitions [TopicId uuid, Partitions []int32]
    8  ConsumerGroupCurrentMemberAssignmentKey(group, member) -> MemberEpoch int32, PreviousMemberEpoch
                  int32, State int8, AssignedPartitions [TopicId, Partitions], PartitionsPendingRevocation [...]
    16 ConsumerGroupRegularExpressionKey(group, regex)      -> Topics []string, Version int64, Timestamp int64
                  (Kafka 4.0: what a regex subscription resolved to, so that a new coordinator has it)

A null value is a tombstone (a member left, or the group was deleted).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from strom.group.record_fields import RecordFormatError, _Reader, _string

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
KEY_VERSIONS = (*range(3, 9), REGULAR_EXPRESSION)
_MEMBER_KEYS = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION)  # keys with a 2nd string

TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class ConsumerKey:
    version: int  # which record: 3..8 or 16 above
    group: str
    member: str = ""  # the member id; for key 16, the regular expression


@dataclass
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMetadata | None = None  # tagged field 0: set for a member using the classic protocol


@dataclass(frozen=True)
class ClassicMetadata:
    """ClassicMemberMetadata: what a classic member sent in its JoinGroup, kept so that the group can
    answer its SyncGroup, pick a protocol when it turns classic again (downgrade), and time it out."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


def encode_key(key: ConsumerKey) -> bytes:
    data = _I16.pack(key.version) + _string(key.group)
    if key.version in _MEMBER_KEYS:
        data += _string(key.member)
    return data


def decode_key(version: int, reader: _Reader) -> ConsumerKey:
    group = reader.string() or ""
    member = (reader.string() or "") if version in _MEMBER_KEYS else ""
    return ConsumerKey(version, group, member)


# -- flexible values -------------------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _cstring(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode()
    return _uvarint(len(data) + 1) + data


def _partitions(value: TopicPartitions) -> bytes:
    parts = [_uvarint(len(value) + 1)]
    for topic_id in sorted(value, key=str):
        partitions = sorted(value[topic_id])
        parts += [topic_id.bytes, _uvarint(len(partitions) + 1), *(_I32.pack(p) for p in partitions), b"\x00"]
    return b"".join(parts)


class _FlexReader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record runs past its end")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.take(1)[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def i8(self) -> int:
        return struct.unpack(">b", self.take(1))[0]

    def i16(self) -> int:
        return _I16.unpack(self.take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self.take(4))[0]

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode("utf-8", "replace")

    def count(self) -> int:
        n = self.uvarint() - 1
        if n > len(self.data) - self.pos:
            raise RecordFormatError(f"impossible array length {n}")
        return max(n, 0)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())

    def partitions(self) -> TopicPartitions:
        result: TopicPartitions = {}
        for _ in range(self.count()):
            topic_id = uuid.UUID(bytes=self.take(16))
            result[topic_id] = frozenset(self.i32() for _ in range(self.count()))
            self.skip_tags()
        return result


def encode_epoch(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue: one int32."""
    return _I16.pack(0) + _I32.pack(epoch) + b"\x00"


def decode_epoch(data: bytes) -> int:
    reader = _FlexReader(data)
    reader.i16()
    return reader.i32()


def encode_member(value: MemberMetadata) -> bytes:
    names = [_uvarint(len(value.subscribed_topic_names) + 1), *(_cstring(t) for t in value.subscribed_topic_names)]
    return b"".join(
        [
            _I16.pack(0),
            _cstring(value.instance_id),
            _cstring(value.rack_id),
            _cstring(value.client_id),
            _cstring(value.client_host),
            *names,
            _cstring(value.subscribed_topic_regex),
            _I32.pack(value.rebalance_timeout_ms),
            _cstring(value.server_assignor),
            _classic_tag(value.classic),
        ]
    )


def _classic_tag(classic: ClassicMetadata | None) -> bytes:
    """The tagged-field section: none, or tag 0 holding the nullable struct (a presence byte, then
    SessionTimeoutMs, SupportedProtocols [Name, Metadata], its own empty tagged fields)."""
    if classic is None:
        return b"\x00"
    body = b"".join(
        [
            b"\x01",
            _I32.pack(classic.session_timeout_ms),
            _uvarint(len(classic.protocols) + 1),
            *(_cstring(name) + _uvarint(len(meta) + 1) + meta + b"\x00" for name, meta in classic.protocols),
            b"\x00",
        ]
    )
    return b"\x01\x00" + _uvarint(len(body)) + body


def decode_member(data: bytes) -> MemberMetadata:
    r = _FlexReader(data)
    r.i16()
    instance_id, rack_id, client_id, client_host = r.string(), r.string(), r.string() or "", r.string() or ""
    names = [r.string() or "" for _ in range(r.count())]
    value = MemberMetadata(instance_id, rack_id, client_id, client_host, names, r.string(), r.i32(), r.string())
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0 and size and r.uvarint():  # 0: a null struct
            timeout = r.i32()
            protocols = []
            for _ in range(r.count()):
                name = r.string() or ""
                protocols.append((name, r.take(max(r.uvarint() - 1, 0))))
                r.skip_tags()
            value.classic = ClassicMetadata(timeout, tuple(protocols))
        if end > len(r.data) or r.pos > end:
            raise RecordFormatError("tagged field runs past its end")
        r.pos = end
    return value


@dataclass(frozen=True)
class ResolvedRegex:
    """ConsumerGroupRegularExpressionValue: the topics a regex matched (for the member that had it
    resolved: only topics it may Describe), when (Timestamp, epoch ms) and at which resolution
    (Version: Kafka's metadata image offset; strom's count of resolutions, see consumer_group.py)."""

    topics: frozenset[str]
    version: int
    timestamp: int


def encode_regex(value: ResolvedRegex) -> bytes:
    names = [_uvarint(len(value.topics) + 1), *(_cstring(t) for t in sorted(value.topics))]
    return b"".join([_I16.pack(0), *names, _I64.pack(value.version), _I64.pack(value.timestamp), b"\x00"])


def decode_regex(data: bytes) -> ResolvedRegex:
    r = _FlexReader(data)
    r.i16()
    topics = frozenset(r.string() or "" for _ in range(r.count()))
    version, timestamp = _I64.unpack(r.take(8))[0], _I64.unpack(r.take(8))[0]
    return ResolvedRegex(topics, version, timestamp)


def encode_target(partitions: TopicPartitions) -> bytes:
    return _I16.pack(0) + _partitions(partitions) + b"\x00"


def decode_target(data: bytes) -> TopicPartitions:
    r = _FlexReader(data)
    r.i16()
    return r.partitions()


def encode_current(value: CurrentAssignment) -> bytes:
    return b"".join(
        [
            _I16.pack(0),
            _I32.pack(value.member_epoch),
            _I32.pack(value.previous_member_epoch),
            struct.pack(">b", value.state),
            _partitions(value.assigned),
            _partitions(value.pending_revocation),
            b"\x00",
        ]
    )


def decode_current(data: bytes) -> CurrentAssignment:
    r = _FlexReader(data)
    r.i16()
    member_epoch, previous, state = r.i32(), r.i32(), r.i8()
    return CurrentAssignment(member_epoch, previous, state, r.partitions(), r.partitions())
