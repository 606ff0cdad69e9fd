"""Message format v0/v1 (magic 0 and 1): converted to a v2 batch on produce, back on fetch.

Produce v0-2 and Fetch v0-3 carry message sets, Kafka's format before KIP-98. strom stores only
v2 batches, so, as Kafka 3.x's LogValidator does, a produced message set becomes one v2 batch
(offsets are assigned by the log as for any batch; a magic 0 message has no timestamp, so its
record gets NoTimestamp, -1), and a fetch at an old version gets its batches down-converted.

Message (big-endian)::

    offset int64, size int32, crc uint32 (CRC-32 of the rest), magic int8, attributes int8,
    [timestamp int64: magic 1 only], key bytes (int32 length, -1 null), value bytes

The low 3 bits of attributes are the codec; bit 3 (magic 1) is LogAppendTime. A compressed
message is a wrapper whose value is the compressed message set of its inner messages.

Down-conversion drops what the old format cannot carry: headers, producer ids, control batches
(transaction markers). It writes uncompressed messages, each a complete message, so an old client
never sees a partial one; Kafka keeps the batch's codec there, which costs bandwidth, not meaning.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from strom.protocol.compression import CompressionError, decompress
from strom.protocol.errors import CorruptRecordError
from strom.protocol.records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    NewRecord,
    build_batch,
    decode_batch_records,
    iter_batch_headers,
)

_OFFSET_SIZE = struct.Struct(">qi")
_CRC_MAGIC_ATTRIBUTES = struct.Struct(">IBB")
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_HEAD_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_HEAD_V1 = struct.Struct(">qiIbbq")  # + timestamp
_LOG_OVERHEAD = 12
_MIN_MESSAGE = 14  # crc, magic, attributes, key length, value length (v0)
_LZ4 = 3
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_ZSTD = 4  # Kafka refuses zstd in magic 0/1 (UNSUPPORTED_COMPRESSION_TYPE); so does this
MAX_DECOMPRESSED = 256 * 1024 * 1024


class Message:
    __slots__ = ("attributes", "key", "magic", "offset", "timestamp", "value")

    def __init__(
        self, offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
    ) -> None:
        self.offset, self.magic, self.attributes = offset, magic, attributes
        self.timestamp, self.key, self.value = timestamp, key, value


def iter_messages(buf: bytes | bytearray | memoryview, *, allow_partial: bool = False) -> Iterator[Message]:
    """The messages of a message set, each checked against its CRC-32.

    A produce request's set must end on a message boundary (CORRUPT_MESSAGE otherwise); a fetched
    one may end in a partial message, which ``allow_partial`` skips as consumers do.
    """
    view = memoryview(buf).cast("B")
    position, total = 0, len(view)
    while position < total:
        if position + _LOG_OVERHEAD > total:
            if allow_partial:
                return
            raise CorruptRecordError(f"message set ends in {total - position} bytes that are not a message")
        offset, size = _OFFSET_SIZE.unpack_from(view, position)
        start, end = position + _LOG_OVERHEAD, position + _LOG_OVERHEAD + size
        if size < _MIN_MESSAGE:
            raise CorruptRecordError(f"message at {position} has size {size}, below the minimum {_MIN_MESSAGE}")
        if end > total:
            if allow_partial:
                return
            raise CorruptRecordError(f"message at {position} of {size} bytes runs past the end of the set")
        crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(view, start)
        if magic not in (0, 1):
            raise CorruptRecordError(f"message at {position} has magic {magic}; a message set holds 0 or 1")
        if zlib.crc32(view[start + 4 : end]) != crc:
            raise CorruptRecordError(f"message at offset {offset} fails its CRC-32 check")
        pos = start + 6
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if end - pos < 16:
                raise CorruptRecordError(f"message at {position} is too short for magic 1")
            (timestamp,) = _TIMESTAMP.unpack_from(view, pos)
            pos += 8
        key, pos = _read_bytes(view, pos, end)
        value, pos = _read_bytes(view, pos, end)
        if pos != end:
            raise CorruptRecordError(f"message at offset {offset} has {end - pos} bytes after its value")
        yield Message(offset, magic, attributes, timestamp, key, value)
        position = end


def _read_bytes(view: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("message field runs past the end of its message")
    (length,) = _LENGTH.unpack_from(view, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"message field of {length} bytes runs past the end of its message")
    return bytes(view[pos : pos + length]), pos + length


def to_record_batch(buf: bytes | bytearray | memoryview) -> bytes:
    """One v2 batch with the records of a produced message set (Kafka 3.x's up-conversion).

    Compressed wrappers are opened and their inner messages kept in order; the batch is compressed
    with the wrappers' codec (the producer's choice, which compression.type=producer keeps).
    """
    records: list[NewRecord] = []
    codec = 0
    for message in iter_messages(buf):
        message_codec = message.attributes & 0x07
        if not message_codec:
            records.append(_record(message, message.timestamp))
            continue
        if message_codec >= _ZSTD:
            raise CorruptRecordError(f"codec {message_codec} is not valid in message format v{message.magic}")
        if message.value is None:
            raise CorruptRecordError(f"compressed message at offset {message.offset} has no value")
        codec = codec or message_codec
        value = message.value
        if message_codec == _LZ4 and message.magic == 0:
            value = _fix_lz4_header_checksum(value)
        try:
            inner_set = decompress(message_codec, value, MAX_DECOMPRESSED)
        except CompressionError as exc:
            raise CorruptRecordError(f"compressed message at offset {message.offset}: {exc}") from None
        append_time = message.magic == 1 and message.attributes & TIMESTAMP_TYPE_MASK
        for inner in iter_messages(inner_set):
            if inner.attributes & 0x07:
                raise CorruptRecordError("a compressed message inside a compressed message")
            records.append(_record(inner, message.timestamp if append_time else inner.timestamp))
    if not records:
        raise CorruptRecordError("message set holds no message")
    return build_batch(records, compression=codec)


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    """Magic 0 LZ4 (KAFKA-3160): Kafka 0.8-0.9 clients hashed the frame magic into the header checksum.

    Kafka reads those frames by ignoring the checksum; a standard LZ4 reader refuses them, so the
    byte is recomputed over the descriptor only, as the LZ4 frame format defines it.
    """
    if len(frame) < 7 or frame[:4] != _LZ4_FRAME_MAGIC:
        return frame
    flags = frame[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= end:
        return frame
    checksum = (_xxh32_short(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes([checksum]) + frame[end + 1 :]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes) -> int:
    """XXH32 with seed 0 of fewer than 16 bytes (an LZ4 frame descriptor is 2 to 14)."""
    h = (_P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        h = (_rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        h = (_rotl((h + byte * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _record(message: Message, timestamp: int) -> NewRecord:
    return NewRecord(message.value, message.key, (), timestamp if message.magic == 1 else NO_TIMESTAMP)


def to_message_set(batches: bytes | bytearray | memoryview, magic: int, first_offset: int) -> bytes:
    """The records of v2 batches as uncompressed messages of ``magic`` (Kafka's down-conversion).

    Records below ``first_offset`` (the start of a batch the fetch offset falls in) and control
    batches are left out; a trailing partial batch is ignored, as a consumer would.
    """
    out = bytearray()
    head = _HEAD_V1 if magic == 1 else _HEAD_V0
    for header in iter_batch_headers(batches):
        if header.is_control or header.base_offset + header.last_offset_delta < first_offset:
            continue
        attributes = TIMESTAMP_TYPE_MASK if magic == 1 and header.timestamp_type == LOG_APPEND_TIME else 0
        for record in decode_batch_records(batches, header):
            if record.offset < first_offset:
                continue
            start = len(out)
            out += bytes(head.size)
            for blob in (record.key, record.value):
                if blob is None:
                    out += b"\xff\xff\xff\xff"
                else:
                    out += _LENGTH.pack(len(blob))
                    out += blob
            size = len(out) - start - _LOG_OVERHEAD
            if magic == 1:
                head.pack_into(out, start, record.offset, size, 0, 1, attributes, record.timestamp)
            else:
                head.pack_into(out, start, record.offset, size, 0, 0, 0)
            crc = zlib.crc32(memoryview(out)[start + 16 :])
            struct.pack_into(">I", out, start + 12, crc)
    return bytes(out)
