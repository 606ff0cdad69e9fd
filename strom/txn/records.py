"""Keys and values of the __transaction_state topic, in Kafka's own schemas.

Kafka's tools (and ``strom dump-log``) decode these, so the layouts are Kafka's exactly:

    TransactionLogKey v0:    transactional_id string
    TransactionLogValue v0:  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                             status int8, partitions [topic string, partition_ids [int32]]?,
                             last_update_timestamp_ms int64, start_timestamp_ms int64

A null value is a tombstone: the transactional id expired. Strings are classic (int16 length),
arrays int32-counted with -1 for null. Value v1 is flexible (compact strings and arrays, tagged
fields) and adds, for transactions v2 (KIP-890 part 2), the tagged fields PreviousProducerId
(tag 0), NextProducerId (tag 1) and ClientTransactionVersion (tag 2). As Kafka 4 does, strom
writes v1 for an id whose client speaks transactions v2 and v0 otherwise, and reads both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum

from strom.group.record_fields import RecordFormatError, _Reader, _string

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


class TxnState(IntEnum):
    """Kafka's TransactionState ids (the int8 stored in TransactionLogValue)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name Kafka's admin APIs and tools use (DescribeTransactions, ListTransactions)."""
        return _DISPLAY[self]


_DISPLAY = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _DISPLAY.items()}


@dataclass
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1
    # transactions v2 (value v1's tagged fields)
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    reader = _Reader(data)
    version = reader.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    transactional_id = reader.string()
    if transactional_id is None:
        raise RecordFormatError("transaction log key without a transactional id")
    return transactional_id


def encode_value(value: TxnLogValue) -> bytes:
    if value.client_transaction_version >= 2:
        return _encode_flexible(value)
    out = [
        _I16.pack(VALUE_VERSION),
        _I64.pack(value.producer_id),
        _I16.pack(value.producer_epoch),
        _I32.pack(value.timeout_ms),
        _I8.pack(int(value.state)),
        _I32.pack(len(value.partitions)),
    ]
    for topic, partitions in sorted(value.partitions.items()):
        out.append(_string(topic))
        out.append(_I32.pack(len(partitions)))
        out.extend(_I32.pack(p) for p in sorted(partitions))
    out.append(_I64.pack(value.last_update_ms))
    out.append(_I64.pack(value.start_ms))
    return b"".join(out)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _encode_flexible(value: TxnLogValue) -> bytes:
    out = [
        _I16.pack(FLEXIBLE_VALUE_VERSION),
        _I64.pack(value.producer_id),
        _I16.pack(value.producer_epoch),
        _I32.pack(value.timeout_ms),
        _I8.pack(int(value.state)),
        _uvarint(len(value.partitions) + 1),
    ]
    for topic, partitions in sorted(value.partitions.items()):
        name = topic.encode()
        out += [_uvarint(len(name) + 1), name, _uvarint(len(partitions) + 1)]
        out.extend(_I32.pack(p) for p in sorted(partitions))
        out.append(b"\x00")  # no tagged fields
    out.append(_I64.pack(value.last_update_ms))
    out.append(_I64.pack(value.start_ms))
    tags = [
        (tag, raw)
        for tag, raw, default in (
            (_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.previous_producer_id), value.previous_producer_id == -1),
            (_TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id), value.next_producer_id == -1),
            (
                _TAG_CLIENT_TRANSACTION_VERSION,
                _I16.pack(value.client_transaction_version),
                value.client_transaction_version == 0,
            ),
        )
        if not default
    ]
    out.append(_uvarint(len(tags)))
    for tag, raw in tags:
        out += [_uvarint(tag), _uvarint(len(raw)), raw]
    return b"".join(out)


def decode_value(data: bytes) -> TxnLogValue:
    reader = _FlexReader(data)
    version = reader.i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id = reader.i64()
    epoch = reader.i16()
    timeout = reader.i32()
    state = reader.i8()
    count = reader.uvarint() - 1 if flexible else reader.i32()
    partitions: dict[str, list[int]] = {}
    for _ in range(max(count, 0)):
        topic = reader.compact_string() if flexible else reader.string()
        n = reader.uvarint() - 1 if flexible else reader.i32()
        partitions[topic or ""] = [reader.i32() for _ in range(max(n, 0))]
        if flexible:
            reader.skip_tags()
    last_update = reader.i64()
    start = reader.i64()
    tagged = reader.tags() if flexible else {}
    try:
        status = TxnState(state)
    except ValueError:
        raise RecordFormatError(f"unknown transaction state {state}") from None
    return TxnLogValue(
        producer_id,
        epoch,
        timeout,
        status,
        partitions,
        last_update,
        start,
        _I64.unpack(tagged[_TAG_PREVIOUS_PRODUCER_ID])[0] if _TAG_PREVIOUS_PRODUCER_ID in tagged else -1,
        _I64.unpack(tagged[_TAG_NEXT_PRODUCER_ID])[0] if _TAG_NEXT_PRODUCER_ID in tagged else -1,
        _I16.unpack(tagged[_TAG_CLIENT_TRANSACTION_VERSION])[0] if _TAG_CLIENT_TRANSACTION_VERSION in tagged else 0,
    )


class _FlexReader(_Reader):
    """The group records' reader plus the compact encodings of flexible versions."""

    def i8(self) -> int:
        return _I8.unpack(self._take(1))[0]

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint too long")

    def compact_string(self) -> str | None:
        length = self.uvarint() - 1
        return None if length < 0 else self._take(length).decode("utf-8", "replace")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def tags(self) -> dict[int, bytes]:
        """The tagged fields of a structure: tag -> raw bytes (checked against the known widths)."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = bytes(self._take(self.uvarint()))
        widths = {_TAG_PREVIOUS_PRODUCER_ID: 8, _TAG_NEXT_PRODUCER_ID: 8, _TAG_CLIENT_TRANSACTION_VERSION: 2}
        for tag, raw in out.items():
            if tag in widths and len(raw) != widths[tag]:
                raise RecordFormatError(f"tagged field {tag} has {len(raw)} bytes, expected {widths[tag]}")
        return out
