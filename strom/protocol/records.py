"""RecordBatch v2 (magic 2): the unit strom stores, replicates and serves without parsing records.

Batch layout (61-byte header, big-endian), exactly as it travels on the wire and lies in .log files::

    0  baseOffset int64          21 attributes int16        43 producerId int64
    8  batchLength int32         23 lastOffsetDelta int32   51 producerEpoch int16
    12 partitionLeaderEpoch i32  27 baseTimestamp int64     53 baseSequence int32
    16 magic int8                35 maxTimestamp int64      57 recordsCount int32
    17 crc uint32 (CRC-32C of bytes 21..end)                61 records...

The CRC covers neither baseOffset nor partitionLeaderEpoch, so the broker assigns offsets by
patching those two fields and never recomputes it. Record-level parsing lives here too, for
tools, the cleaner and recompression, and for the leader's record checks where Kafka's rules need
them (``scan_records``, ``first_offset_gap``): fetch, and produce to a plain topic in
uncompressed batches, stay per batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import crc32c

from strom.clock import wall_ms
from strom.protocol.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError

if TYPE_CHECKING:
    from mmap import mmap
    from typing import Protocol, TypeAlias

    # What batches are read from: request bytes, a fetched buffer, a slice of either, a mapped file.
    ByteSource: TypeAlias = bytes | bytearray | memoryview | mmap
    # HEADER's 13 fields, in BatchHeader's order
    HeaderFields: TypeAlias = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]

    class _HeaderStruct(Protocol):
        """HEADER as the type checker sees it: a struct.Struct whose unpack knows its 13 int fields."""

        @property
        def size(self) -> int: ...

        def unpack_from(self, buffer: ByteSource, offset: int = 0, /) -> HeaderFields: ...

        def pack_into(self, buffer: bytearray | memoryview, offset: int, /, *fields: int) -> None: ...


HEADER: _HeaderStruct = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted in batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
_OFFSET_LENGTH = struct.Struct(">qi")
_OFFSET_LENGTH_EPOCH = struct.Struct(">qii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08  # set: LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(slots=True)
class BatchHeader:
    """A decoded 61-byte batch header; ``position`` is where the batch starts in its buffer or file."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @classmethod
    def parse(cls, buf: ByteSource, position: int = 0) -> BatchHeader:
        return cls(*HEADER.unpack_from(buf, position), position)

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def batch_crc(buf: ByteSource, position: int, size: int) -> int:
    """CRC-32C over attributes..end, as the batch's crc field should hold."""
    return crc32c.crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : position + size])


def read_batch_header(buf: ByteSource, position: int, available: int) -> BatchHeader:
    """Parse and structurally check one batch header at ``position`` (``available`` bytes in view).

    Checks what every reader needs (magic 2, length bounds); this runs for every batch scanned
    in a segment, so it is kept to one unpack.
    """
    if available < BATCH_HEADER_SIZE:
        if available >= MAGIC_OFFSET + 1 and buf[position + MAGIC_OFFSET] != 2:
            raise InvalidRecordError(_magic_message(buf[position + MAGIC_OFFSET]))
        raise CorruptRecordError(f"record batch truncated: {available} bytes at position {position}")
    fields = HEADER.unpack_from(buf, position)
    if fields[3] != 2:
        raise InvalidRecordError(_magic_message(fields[3]))
    batch_length = fields[1]
    if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {batch_length} is below the minimum header size")
    if available < batch_length + LOG_OVERHEAD:
        raise CorruptRecordError(
            f"record batch at position {position} declares {batch_length + LOG_OVERHEAD} bytes "
            f"but only {available} remain"
        )
    return BatchHeader(*fields, position)


def _magic_message(magic: int) -> str:
    return (
        f"message format magic v{magic} is not supported: strom stores only record batches "
        "(magic 2, Kafka 0.11+); upgrade the client or enable its v2 message format"
    )


def validate_batches(
    buf: ByteSource, max_batch_bytes: int | None = None, *, from_producer: bool = True
) -> list[BatchHeader]:
    """Validate every batch of a record set (a Produce payload or a follower's fetched bytes).

    Raises before anything is written, so a bad payload leaves the log untouched. Checks the
    length, magic 2, CRC-32C and the size limit; for producer batches also the record count
    against lastOffsetDelta (compacted batches replicated to followers legitimately have gaps).
    """
    view = memoryview(buf)
    total = len(view)
    if total == 0:
        raise InvalidRecordError("record set is empty")
    headers: list[BatchHeader] = []
    position = 0
    while position < total:
        if total - position < BATCH_HEADER_SIZE:
            read_batch_header(view, position, total - position)  # raises the precise error
        fields = HEADER.unpack_from(view, position)
        size = fields[1] + LOG_OVERHEAD
        if fields[3] != 2 or size < BATCH_HEADER_SIZE or size > total - position:
            read_batch_header(view, position, total - position)  # raises the precise error
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise RecordTooLargeError(
                f"record batch of {size} bytes exceeds the maximum of {max_batch_bytes} (max.message.bytes)"
            )
        if from_producer and (fields[12] <= 0 or fields[12] != fields[6] + 1):
            raise InvalidRecordError(f"record batch has {fields[12]} records but lastOffsetDelta {fields[6]}")
        actual = crc32c.crc32c(view[position + ATTRIBUTES_OFFSET : position + size])
        if actual != fields[4]:
            raise CorruptRecordError(
                f"record batch at offset {fields[0]} has CRC {fields[4]:#010x}, computed {actual:#010x}"
            )
        headers.append(BatchHeader(*fields, position))
        position += size
    return headers


def patch_offset_and_epoch(
    buf: bytearray | memoryview, header: BatchHeader, base_offset: int, leader_epoch: int
) -> None:
    """Assign offsets in place: the only two fields the CRC does not cover (one pack spans both)."""
    _OFFSET_LENGTH_EPOCH.pack_into(buf, header.position, base_offset, header.batch_length, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, position: int, size: int, timestamp_ms: int) -> None:
    """Stamp LogAppendTime on a batch; attributes are CRC-covered, so the CRC is recomputed."""
    attributes = _INT16.unpack_from(buf, position + ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    _INT16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _UINT32.pack_into(buf, position + CRC_OFFSET, batch_crc(buf, position, size))


def iter_batch_headers(buf: ByteSource) -> Iterator[BatchHeader]:
    """Walk the batch headers of an in-memory record set (already validated or trusted)."""
    view = memoryview(buf)
    position = 0
    total = len(view)
    while position + BATCH_HEADER_SIZE <= total:
        header = BatchHeader.parse(view, position)
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or position + header.size > total:
            return
        yield header
        position += header.size


def complete_batches_end(buf: ByteSource) -> tuple[int, int]:
    """(bytes of whole batches at the start of ``buf``, offset after the last of them).

    A fetch may end in a partial batch; readers (followers, tools) keep only whole ones. Walks
    with one small unpack per batch. Returns (0, -1) when not even one batch is complete.
    """
    total = len(buf)
    position = 0
    last_start = -1
    while position + BATCH_HEADER_SIZE <= total:
        size = _INT32.unpack_from(buf, position + 8)[0] + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or position + size > total:
            break
        last_start = position
        position += size
    if last_start < 0:
        return 0, -1
    next_offset: int = _INT64.unpack_from(buf, last_start)[0] + _INT32.unpack_from(buf, last_start + 23)[0] + 1
    return position, next_offset


# ---------------------------------------------------------------------------------------------
# Record level: varints and the record format (tools, cleaner, recompression, tests)


def encode_varint(value: int, out: bytearray) -> None:
    """Zig-zag varint as in protobuf, which Kafka's record format uses."""
    value = (value << 1) ^ (value >> 63)
    value &= 0xFFFFFFFFFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def decode_varint(buf: ByteSource, position: int, limit: int) -> tuple[int, int]:
    """Zig-zag varint at ``position``; returns (value, next position). Bounded by ``limit``."""
    result = 0
    shift = 0
    while True:
        if position >= limit:
            raise CorruptRecordError("varint runs past the end of the record")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint is longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), position


@dataclass(slots=True)
class Record:
    """One record with absolute offset and timestamp; headers are (key, value-or-None) pairs."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _read_bytes(buf: ByteSource, position: int, limit: int) -> tuple[bytes | None, int]:
    length, position = decode_varint(buf, position, limit)
    if length < 0:
        return None, position
    if position + length > limit:
        raise CorruptRecordError("record field runs past the end of the record")
    return bytes(buf[position : position + length]), position + length


def _decode_record(buf: ByteSource, position: int, limit: int, header: BatchHeader) -> tuple[Record, int]:
    length, position = decode_varint(buf, position, limit)
    end = position + length
    if length < 0 or end > limit:
        raise CorruptRecordError(f"record length {length} runs past the end of the batch")
    position += 1  # attributes, unused
    timestamp_delta, position = decode_varint(buf, position, end)
    offset_delta, position = decode_varint(buf, position, end)
    key, position = _read_bytes(buf, position, end)
    value, position = _read_bytes(buf, position, end)
    count, position = decode_varint(buf, position, end)
    if count < 0 or count > end - position:
        raise CorruptRecordError(f"record header count {count} is impossible")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        hkey, position = _read_bytes(buf, position, end)
        hvalue, position = _read_bytes(buf, position, end)
        headers.append(((hkey or b"").decode("utf-8", "replace"), hvalue))
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamp = header.max_timestamp
    else:
        timestamp = header.base_timestamp + timestamp_delta
    return Record(header.base_offset + offset_delta, timestamp, key, value, headers), end


def batch_records_payload(batch: ByteSource, header: BatchHeader, max_output: int = 256 * 1024 * 1024) -> bytes:
    """The (decompressed) bytes of a batch's records section."""
    raw = memoryview(batch)[header.position + BATCH_HEADER_SIZE : header.position + header.size]
    if header.compression == 0:
        return bytes(raw)
    from strom.protocol.compression import decompress

    return decompress(header.compression, raw, max_output)


PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"


class RecordSummary(NamedTuple):
    """What the broker checks of one record: no key or value bytes are copied to get it."""

    timestamp_delta: int
    offset_delta: int
    key_length: int  # -1: null key


def scan_records(buf: ByteSource, start: int, end: int, count: int) -> list[RecordSummary]:
    """Walk ``count`` records in ``buf[start:end]`` (a batch's records section, decompressed).

    Checks the structure as Kafka's DefaultRecord reader does: every record ends exactly where
    its length says, and the section holds exactly ``count`` records (Kafka's messages, raised
    as InvalidRecordError). Runs for every record a producer sends to a topic with per-record
    rules (compaction, timestamp bounds), so it reads lengths and skips bytes, never copies.
    """
    try:
        return _scan_records(buf, start, end, count)
    except CorruptRecordError as exc:  # a varint past the record's end or longer than 10 bytes
        raise InvalidRecordError(f"Found invalid record structure: {exc}") from None


def _scan_records(buf: ByteSource, start: int, end: int, count: int) -> list[RecordSummary]:
    out: list[RecordSummary] = []
    append = out.append
    pos = start
    for _ in range(count):
        if pos >= end:
            raise InvalidRecordError(PREMATURE_EOF)
        length, pos = _varint(buf, pos, end)
        body = pos
        limit = pos + length
        if length < 6 or limit > end:  # attributes and five one-byte varints at the least
            raise InvalidRecordError(PREMATURE_EOF if length > 0 else f"Invalid record size {length}")
        timestamp_delta, pos = _varint(buf, pos + 1, limit)  # + 1: attributes, unused in v2
        offset_delta, pos = _varint(buf, pos, limit)
        key_length, pos = _varint(buf, pos, limit)
        if key_length > 0:
            pos += key_length
        value_length, pos = _varint(buf, pos, limit)
        if value_length > 0:
            pos += value_length
        headers, pos = _varint(buf, pos, limit)
        if headers:
            if headers < 0 or headers > limit - pos:
                raise InvalidRecordError(f"Found invalid number of record headers {headers}")
            for _header in range(headers):
                header_key_length, pos = _varint(buf, pos, limit)
                if header_key_length < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {header_key_length}")
                pos += header_key_length
                header_value_length, pos = _varint(buf, pos, limit)
                if header_value_length > 0:
                    pos += header_value_length
        if pos != limit:
            raise InvalidRecordError(
                f"Invalid record size: expected to read {length} bytes in record payload, but instead read {pos - body}"
            )
        append(RecordSummary(timestamp_delta, offset_delta, key_length))
    if pos != end:
        raise InvalidRecordError(RECORDS_REMAINING)
    return out


def first_offset_gap(buf: ByteSource, start: int, end: int, count: int) -> int:
    """Hop over ``count`` records by their lengths; the index of the first whose offset delta is
    not its index (-1: offsets are consecutive from 0).

    The cheap check of a compressed batch for a topic without per-record rules: the record
    count and the framing must match the header (InvalidRecordError with Kafka's messages
    otherwise), and only the offset delta of each record is read.
    """
    try:
        gap = -1
        pos = start
        for index in range(count):
            if pos >= end:
                raise InvalidRecordError(PREMATURE_EOF)
            length, pos = _varint(buf, pos, end)
            limit = pos + length
            if length < 6 or limit > end:
                raise InvalidRecordError(PREMATURE_EOF if length > 0 else f"Invalid record size {length}")
            timestamp_byte = buf[pos + 1]
            if timestamp_byte < 0x80:
                offset_delta, _ = _varint(buf, pos + 2, limit)
            else:
                _, after = decode_varint(buf, pos + 1, limit)
                offset_delta, _ = _varint(buf, after, limit)
            if offset_delta != index and gap < 0:
                gap = index
            pos = limit
        if pos != end:
            raise InvalidRecordError(RECORDS_REMAINING)
        return gap
    except CorruptRecordError as exc:
        raise InvalidRecordError(f"Found invalid record structure: {exc}") from None


def _varint(buf: ByteSource, pos: int, limit: int) -> tuple[int, int]:
    """decode_varint with the one- and two-byte cases (most record fields) unrolled."""
    if pos < limit:
        byte = buf[pos]
        if byte < 0x80:
            return (byte >> 1) ^ -(byte & 1), pos + 1
        if pos + 1 < limit:
            second = buf[pos + 1]
            if second < 0x80:
                value = (byte & 0x7F) | (second << 7)
                return (value >> 1) ^ -(value & 1), pos + 2
    return decode_varint(buf, pos, limit)


def decode_batch_records(batch: ByteSource, header: BatchHeader | None = None) -> list[Record]:
    """Every record of one batch (decompressing if needed)."""
    return list(iter_batch_records(batch, header))


def iter_batch_records(
    batch: ByteSource, header: BatchHeader | None = None, max_output: int = 256 * 1024 * 1024
) -> Iterator[Record]:
    """The records of one batch one at a time, for a caller that must stop between records (the
    cleaner gives its CPU way every few hundred microseconds; a 1 MB batch takes milliseconds).
    A compressed batch is decompressed once, never past ``max_output`` bytes."""
    if header is None:
        header = BatchHeader.parse(batch, 0)
    payload = batch_records_payload(batch, header, max_output)
    if header.is_control and header.records_count == 0:
        return
    position = 0
    for _ in range(header.records_count):
        record, position = _decode_record(payload, position, len(payload), header)
        yield record


def iter_records(buf: ByteSource) -> Iterator[Record]:
    """Every record of every batch in a record set."""
    for header in iter_batch_headers(buf):
        yield from decode_batch_records(buf, header)


@dataclass(slots=True)
class NewRecord:
    """A record to build into a batch; ``offset_delta`` defaults to its index in the batch."""

    value: bytes | None
    key: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


def _encode_record(out: bytearray, record: NewRecord, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray()
    body.append(0)
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    for blob in (record.key, record.value):
        if blob is None:
            encode_varint(-1, body)
        else:
            encode_varint(len(blob), body)
            body += blob
    encode_varint(len(record.headers), body)
    for hkey, hvalue in record.headers:
        encoded = hkey.encode()
        encode_varint(len(encoded), body)
        body += encoded
        if hvalue is None:
            encode_varint(-1, body)
        else:
            encode_varint(len(hvalue), body)
            body += hvalue
    encode_varint(len(body), out)
    out += body


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Build one v2 batch, as a producer (or the cleaner, or recompression) would."""
    now = wall_ms()
    timestamps = [r.timestamp if r.timestamp is not None else now for r in records]
    base_timestamp = min(timestamps) if timestamps else NO_TIMESTAMP
    max_timestamp = max(timestamps) if timestamps else NO_TIMESTAMP
    payload = bytearray()
    deltas: list[int] = []
    for index, (record, ts) in enumerate(zip(records, timestamps)):
        delta = record.offset_delta if record.offset_delta is not None else index
        deltas.append(delta)
        _encode_record(payload, record, delta, ts - base_timestamp)
    if compression:
        from strom.protocol.compression import compress

        payload = bytearray(compress(compression, bytes(payload), compression_level))
    if last_offset_delta is None:
        last_offset_delta = max(deltas) if deltas else 0
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    batch = bytearray(BATCH_HEADER_SIZE) + payload
    HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    _UINT32.pack_into(batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def rebuild_batch(
    header: BatchHeader, records: Sequence[Record], compression: int | None = None, compression_level: int | None = None
) -> bytes:
    """Re-encode a subset of a batch's records, keeping offsets, producer fields and flags.

    Used by the cleaner (records dropped, offsets kept), by topic-level recompression (at the
    topic's compression.<codec>.level) and to renumber a compressed batch's inner offsets.
    """
    return build_batch(
        [NewRecord(r.value, r.key, r.headers, r.timestamp, r.offset - header.base_offset) for r in records],
        base_offset=header.base_offset,
        compression=header.compression if compression is None else compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        control=header.is_control,
        timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch,
        compression_level=compression_level,
    )


# ---------------------------------------------------------------------------------------------
# Control batches: the commit and abort markers of transactions (KIP-98)
#
# One record, offset delta 0. Key: int16 version (0) + int16 type; value: int16 version (0) +
# int32 coordinator epoch. Kafka writes them uncompressed, with base sequence -1.

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def build_control_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp: int | None = None
) -> bytes:
    """A transaction marker as the partition leader writes it on WriteTxnMarkers."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [NewRecord(value, key=key, timestamp=timestamp)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


def read_control_record(batch: ByteSource, header: BatchHeader) -> tuple[bool, int]:
    """(commit?, coordinator epoch) of a control batch starting at ``header.position`` of ``batch``.

    A control record of another type (Kafka reserves types >= 2) reads as neither commit nor
    abort: the caller treats it as no marker.
    """
    if header.compression:  # markers are written uncompressed; a codec here is damage, not worth inflating
        raise InvalidRecordError(f"control batch at offset {header.base_offset} claims codec {header.compression}")
    records = decode_batch_records(batch, header)
    if not records or records[0].key is None or len(records[0].key) < 4:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has no control record key")
    _, kind = _CONTROL_KEY.unpack_from(records[0].key, 0)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise InvalidRecordError(f"control record type {kind} at offset {header.base_offset} is not a marker")
    epoch = -1
    value = records[0].value
    if value is not None and len(value) >= 6:
        epoch = _CONTROL_VALUE.unpack_from(value, 0)[1]
    return kind == CONTROL_COMMIT, epoch
