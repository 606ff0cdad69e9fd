"""Message format v0/v1 <-> v2 batches, checked against kafka-python's own legacy-format code."""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from strom.protocol.errors import CorruptRecordError
from strom.protocol.legacy.records import (
    _xxh32_short,
    iter_messages,
    to_message_set,
    to_record_batch,
)
from strom.protocol.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    NewRecord,
    build_batch,
    build_control_batch,
    decode_batch_records,
)

TS = 1_700_000_000_000


def legacy_set(magic: int, codec: int, items: list[tuple[bytes | None, bytes | None]]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (key, value) in enumerate(items):
        builder.append(i, TS + i if magic else None, key, value)
    return bytes(builder.build())


ITEMS = [(b"k0", b"v0"), (None, b"v1" * 500), (b"k2", None), (b"", b"")]


# magic 0 lz4 needs xxhash in kafka-python's writer; the next test builds such a message itself
@pytest.mark.parametrize(("magic", "codec"), [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)])
def test_message_set_becomes_one_v2_batch(magic, codec):
    batch = to_record_batch(legacy_set(magic, codec, ITEMS))
    header = BatchHeader.parse(batch, 0)
    assert (header.magic, header.compression, header.records_count, header.last_offset_delta) == (2, codec, 4, 3)
    assert header.producer_id == -1 and header.timestamp_type == 0
    records = decode_batch_records(batch, header)
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [(i, k, v, []) for i, (k, v) in enumerate(ITEMS)]
    # magic 0 has no timestamp: NoTimestamp (-1), as Kafka's up-conversion writes it
    assert [r.timestamp for r in records] == ([TS + i for i in range(4)] if magic else [-1] * 4)


def test_magic_0_lz4_with_the_old_kafka_header_checksum():
    """KAFKA-3160: 0.8/0.9 clients hashed the frame magic into the LZ4 header checksum; Kafka accepts it."""
    import lz4.frame

    inner = legacy_set(0, 0, ITEMS)
    frame = bytearray(lz4.frame.compress(inner))
    end = 6 + (8 if frame[4] & 0x08 else 0)
    frame[end] = (_xxh32_short(bytes(frame[:end])) >> 8) & 0xFF  # the broken checksum
    body = struct.pack(">bb", 0, 3) + struct.pack(">i", -1) + struct.pack(">i", len(frame)) + bytes(frame)
    message = struct.pack(">qi", 3, len(body) + 4) + struct.pack(">I", zlib.crc32(body)) + body
    records = decode_batch_records(to_record_batch(message))
    assert [(r.key, r.value) for r in records] == ITEMS


def test_xxh32_matches_the_reference_vectors():
    assert _xxh32_short(b"") == 0x02CC5D05
    assert _xxh32_short(b"a") == 0x550D7456
    assert _xxh32_short(b"abc") == 0x32D153FF


def test_bad_message_sets_are_corrupt_messages():
    good = legacy_set(1, 0, ITEMS)
    flipped = bytearray(good)
    flipped[30] ^= 0xFF
    for bad, why in [
        (bytes(flipped), "CRC-32"),
        (good[:-2], "runs past the end"),
        (good + b"\x00" * 5, "not a message"),
        (b"", "no message"),
    ]:
        with pytest.raises(CorruptRecordError, match=why):
            to_record_batch(bad)
    zstd = bytearray(legacy_set(1, 0, ITEMS[:1]))
    zstd[17] = 4  # attributes: codec 4 (zstd) does not exist in magic 0/1
    struct.pack_into(">I", zstd, 12, zlib.crc32(zstd[16:]))
    with pytest.raises(CorruptRecordError, match="codec 4"):
        to_record_batch(bytes(zstd))


@pytest.mark.parametrize("magic", [0, 1])
def test_batches_become_messages_kafka_python_reads(magic):
    plain = build_batch([NewRecord(b"v0", b"k0", [("h", b"x")], TS), NewRecord(None, None, (), TS + 5)], base_offset=10)
    zstd = build_batch([NewRecord(b"z" * 1000, b"kz", (), TS + 9)], base_offset=12, compression=4)
    marker = build_control_batch(7, 0, True, 0, TS)
    appended = bytearray(build_batch([NewRecord(b"la", None, (), TS)], base_offset=14, timestamp_type=LOG_APPEND_TIME))
    marker_at_13 = bytearray(marker)
    struct.pack_into(">q", marker_at_13, 0, 13)
    data = plain + zstd + bytes(marker_at_13) + bytes(appended) + plain[:30]  # a partial batch at the end
    out = to_message_set(data, magic, 11)
    messages = list(iter_messages(out))
    assert [(m.offset, m.magic, m.key, m.value) for m in messages] == [
        (11, magic, None, None),
        (12, magic, b"kz", b"z" * 1000),
        (14, magic, None, b"la"),
    ]
    parsed = []
    records = MemoryRecords(out)
    while (batch := records.next_batch()) is not None:
        parsed.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    timestamps = [TS + 5, TS + 9, TS] if magic else [None, None, None]
    assert parsed == [
        (11, timestamps[0], None, None),
        (12, timestamps[1], b"kz", b"z" * 1000),
        (14, timestamps[2], None, b"la"),
    ]
    if magic == 1:
        assert messages[2].attributes == 0x08  # LogAppendTime, as the batch said
