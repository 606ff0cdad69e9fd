import os
import struct
import tracemalloc
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.protocol.compression import (
    XERIAL_MAGIC,
    CompressionError,
    CompressionType,
    compress,
    decompress,
)

try:
    from kafka import codec as kafka_codec
except ImportError:  # kafka-python is a test extra; interop tests skip without it
    kafka_codec = None

ALL = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c is not CompressionType.NONE]
MiB = 1024 * 1024

# Binary noise alone never exercises matches; repeating it does (and crosses block boundaries).
payloads = st.one_of(
    st.binary(max_size=5000),
    st.builds(lambda chunk, n: chunk * n, st.binary(min_size=1, max_size=300), st.integers(1, 600)),
)


@pytest.mark.parametrize("codec", ALL)
@settings(max_examples=60, deadline=None)
@given(data=payloads)
def test_round_trip(codec, data):
    packed = compress(codec, data)
    assert decompress(codec, packed, max_output=len(data)) == data
    assert decompress(codec, memoryview(packed), max_output=len(data) + 10) == data


@pytest.mark.parametrize("codec", ALL)
def test_round_trip_large_and_empty(codec):
    data = os.urandom(1000) * 3000 + os.urandom(70_000)  # ~3 MB: many blocks of every framing
    assert decompress(codec, compress(codec, data), max_output=len(data)) == data
    assert decompress(codec, compress(codec, b""), max_output=0) == b""


@pytest.mark.parametrize("codec", COMPRESSED)
def test_high_ratio_within_limit_grows_the_buffer(codec):
    data = b"\0" * (20 * MiB)
    assert decompress(codec, compress(codec, data), max_output=64 * MiB) == data


@pytest.mark.parametrize("codec", ALL)
def test_limit_is_exact(codec):
    data = b"kafka " * 50_000
    packed = compress(codec, data)
    assert decompress(codec, packed, max_output=len(data)) == data
    with pytest.raises(CompressionError, match="limit"):
        decompress(codec, packed, max_output=len(data) - 1)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_is_rejected_without_allocating_it(codec):
    bomb = compress(codec, b"\0" * (256 * MiB))
    assert len(bomb) < 16 * MiB  # snappy's best ratio is about 21:1, the others' far higher
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match="limit"):
            decompress(codec, bomb, max_output=1 * MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB


def test_snappy_bomb_by_forged_length_is_rejected_before_decoding():
    forged = bytes([0x80, 0x80, 0x80, 0x80, 0x04]) + b"\0" * 10  # varint length 1 GiB, no body
    with pytest.raises(CompressionError, match="limit"):
        decompress(CompressionType.SNAPPY, forged, max_output=MiB)
    xerial = XERIAL_MAGIC + struct.pack(">iii", 1, 1, len(forged)) + forged
    with pytest.raises(CompressionError, match="limit"):
        decompress(CompressionType.SNAPPY, xerial, max_output=MiB)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_corrupt_and_truncated_data_raise_compression_error(codec):
    packed = compress(codec, os.urandom(500) * 100)
    for bad in (b"garbage that is not compressed", packed[: len(packed) // 2]):
        with pytest.raises(CompressionError):
            decompress(codec, bad, max_output=MiB)
    assert issubclass(CompressionError, ValueError)


def test_unknown_codec_id():
    with pytest.raises(CompressionError, match="codec id 5"):
        decompress(5, b"x", max_output=10)
    with pytest.raises(CompressionError):
        compress(7, b"x")


def test_from_name_accepts_kafka_spellings():
    assert CompressionType.from_name("none") is CompressionType.NONE
    assert CompressionType.from_name("uncompressed") is CompressionType.NONE
    assert CompressionType.from_name("gzip") is CompressionType.GZIP
    assert CompressionType.from_name("Snappy") is CompressionType.SNAPPY
    assert CompressionType.from_name("lz4") is CompressionType.LZ4
    assert CompressionType.from_name(" zstd ") is CompressionType.ZSTD
    assert [int(c) for c in CompressionType] == [0, 1, 2, 3, 4]
    assert CompressionType.ZSTD.kafka_name == "zstd"
    with pytest.raises(CompressionError):
        CompressionType.from_name("producer")


# --- framings that other clients write or read -------------------------------------------------


def test_snappy_is_written_in_xerial_framing_like_java():
    data = os.urandom(100) * 1000  # 100 kB -> four 32 KiB blocks
    packed = compress(CompressionType.SNAPPY, data)
    assert packed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, out = 16, b""
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        block = bytes(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]))
        assert len(block) <= 32 * 1024
        out += block
        pos += 4 + length
    assert out == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them():
    data = b"librdkafka " * 1000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw, max_output=len(data)) == data


def test_snappy_xerial_variants():
    data = b"variant " * 10_000
    packed = compress(CompressionType.SNAPPY, data)
    # Redpanda writes the version ints little-endian: the versions must be ignored.
    little = XERIAL_MAGIC + struct.pack("<ii", 1, 1) + packed[16:]
    assert decompress(CompressionType.SNAPPY, little, max_output=len(data)) == data
    # Concatenated streams, as snappy-java reads them.
    twice = packed + packed
    assert decompress(CompressionType.SNAPPY, twice, max_output=2 * len(data)) == data * 2
    with pytest.raises(CompressionError):
        decompress(CompressionType.SNAPPY, packed[:-3], max_output=len(data))


def _java_style_lz4_decode(frame: bytes) -> bytes:
    """Decode like Kafka's Lz4BlockInputStream: each block alone, no dictionary from the last."""
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 1, "frame version must be 01"
    assert flg & 0x20, "blocks must be independent"
    assert not flg & 0x01, "no dictionary id"
    max_block = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}[(bd >> 4) & 7]
    pos = 6 + (8 if flg & 0x08 else 0) + 1
    out = b""
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            break
        stored, size = size & 0x80000000, size & 0x7FFFFFFF
        block = frame[pos : pos + size]
        pos += size + (4 if flg & 0x10 else 0)
        if stored:
            out += block
        else:
            buffer = bytearray(max_block)
            out += buffer[: cramjam.lz4.decompress_block_into(block, buffer)]
    return out


def test_lz4_frames_are_readable_by_the_java_client():
    data = (os.urandom(3000) * 100)[:300_000]  # matches reach across 64 KiB block boundaries
    assert _java_style_lz4_decode(compress(CompressionType.LZ4, data)) == data


def test_gzip_is_gzip_and_concatenated_members_are_read():
    data = b"gzip " * 1000
    packed = compress(CompressionType.GZIP, data)
    assert packed[:2] == b"\x1f\x8b"
    assert decompress(CompressionType.GZIP, packed + packed, max_output=2 * len(data)) == data * 2
    with pytest.raises(CompressionError, match="limit"):
        decompress(CompressionType.GZIP, packed + packed, max_output=2 * len(data) - 1)
    zlib_only = zlib.compress(data)  # not gzip: Java consumers could not read it
    with pytest.raises(CompressionError):
        decompress(CompressionType.GZIP, zlib_only, max_output=len(data))


# --- interop with kafka-python's codec functions ------------------------------------------------


def _kafka_python(has: str):
    if kafka_codec is None or not getattr(kafka_codec, has)():
        pytest.skip(f"kafka-python {has} codec library not installed")
    return kafka_codec


INTEROP_DATA = [b"", b"x", b"kafka-python " * 5000, os.urandom(100_000)]


@pytest.mark.parametrize("data", INTEROP_DATA, ids=["empty", "one", "text", "random"])
def test_interop_gzip(data):
    kc = _kafka_python("has_gzip")
    assert decompress(CompressionType.GZIP, kc.gzip_encode(data), max_output=len(data)) == data
    assert kc.gzip_decode(compress(CompressionType.GZIP, data)) == data


@pytest.mark.parametrize("data", INTEROP_DATA, ids=["empty", "one", "text", "random"])
@pytest.mark.parametrize("xerial", [True, False])
def test_interop_snappy(data, xerial):
    kc = _kafka_python("has_snappy")
    theirs = kc.snappy_encode(data, xerial_compatible=xerial)
    assert decompress(CompressionType.SNAPPY, theirs, max_output=len(data)) == data
    if data:  # kafka-python detects xerial only past the 16-byte header
        assert kc.snappy_decode(compress(CompressionType.SNAPPY, data)) == data


@pytest.mark.parametrize("data", INTEROP_DATA, ids=["empty", "one", "text", "random"])
def test_interop_lz4(data):
    kc = _kafka_python("has_lz4")
    assert decompress(CompressionType.LZ4, kc.lz4_encode(data), max_output=len(data)) == data
    assert kc.lz4_decode(compress(CompressionType.LZ4, data)) == data


@pytest.mark.parametrize("data", INTEROP_DATA, ids=["empty", "one", "text", "random"])
def test_interop_zstd(data):
    kc = _kafka_python("has_zstd")
    assert decompress(CompressionType.ZSTD, kc.zstd_encode(data), max_output=len(data)) == data
    assert kc.zstd_decode(compress(CompressionType.ZSTD, data)) == data
