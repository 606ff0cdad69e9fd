"""Record-batch compression codecs, by the codec id in a batch's attributes (bits 0-2).

The broker rarely decompresses (compaction, recompression to a topic's compression.type,
LogAppendTime checks), but when it does the input comes from any client, so decompression is
always bounded: a batch that would expand past ``max_output`` raises ``CompressionError``
instead of allocating it. The codecs themselves are cramjam's (gzip is the stdlib's zlib); only
Kafka's framing conventions live here.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

import cramjam


class CompressionError(ValueError):
    """Data cannot be (de)compressed: corrupt, truncated, unknown codec, or too large."""


class DecompressedTooLargeError(CompressionError):
    """The data would expand past ``max_output``; refused before that much was allocated."""


class CompressionType(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Kafka's spelling (compression.type / producer config) to a codec."""
        key = name.strip().lower()
        if key == "uncompressed":
            return cls.NONE
        try:
            return cls[key.upper()]
        except KeyError:
            raise CompressionError(f"unknown compression type {name!r}") from None

    @property
    def kafka_name(self) -> str:
        return self.name.lower()


ATTRIBUTES_CODEC_MASK = 0x07

# Java's SnappyOutputStream (xerial snappy-java): 8-byte magic, then big-endian version and
# minimum-compatible version (both 1), then [>i length, raw snappy block]*.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size, so our blocks look like Java's
_GZIP_LEVEL = 6  # Kafka's default (Deflater.DEFAULT_COMPRESSION)
_ZSTD_LEVEL = 3  # Kafka's default compression.zstd.level


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's Java client would, so every client can read it."""
    codec = _codec(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return zlib.compress(data, _GZIP_LEVEL if level is None else level, wbits=31)
    if codec is CompressionType.SNAPPY:
        return _xerial_compress(memoryview(data))
    if codec is CompressionType.LZ4:
        # Independent blocks are required: Java's Lz4BlockInputStream decodes every block on its
        # own, so a block referring back to the previous one would be corrupt for Java consumers.
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL if level is None else level))


def decompress(codec: int, data: bytes | bytearray | memoryview, max_output: int) -> bytes:
    """Decompress ``data``; never produces (or allocates much) more than ``max_output`` bytes."""
    codec = _codec(codec)
    if max_output < 0:
        raise ValueError(f"max_output {max_output} < 0")
    if codec is CompressionType.NONE:
        if len(data) > max_output:
            raise _too_large(codec, max_output)
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gzip_decompress(data, max_output)
    if codec is CompressionType.SNAPPY:
        view = memoryview(data).cast("B")
        if len(view) >= len(_XERIAL_HEADER) and view[: len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            return _xerial_decompress(view, max_output)
        return _snappy_raw_decompress(view, max_output)
    into = cramjam.lz4.decompress_into if codec is CompressionType.LZ4 else cramjam.zstd.decompress_into
    return _decompress_bounded(codec, into, data, max_output)


def _codec(codec: int) -> CompressionType:
    try:
        return CompressionType(codec)
    except ValueError:
        raise CompressionError(f"unknown compression codec id {codec}") from None


def _too_large(codec: CompressionType, max_output: int) -> DecompressedTooLargeError:
    return DecompressedTooLargeError(f"{codec.kafka_name} data expands past the limit of {max_output} bytes")


# Neither the lz4 frame nor the zstd frame reliably states its decompressed size (streaming
# producers omit it), so decompress into a buffer of a guessed size and retry with a larger one.
# The buffer can never exceed max_output, so a bomb costs at most about 1.33 * max_output of work.
# The guess matters: bytearray(n) zeroes n bytes, so a buffer of max_output for every call would
# cost more than the decompression itself when max_output is large.
_FIRST_GUESS_RATIO = 8
_MIN_GUESS = 64 * 1024
_OVERFLOW_HINTS = ("failed to write whole buffer", "smaller than required")


def _decompress_bounded(
    codec: CompressionType,
    into: Callable[[bytes | bytearray | memoryview, bytearray], int],
    data: bytes | bytearray | memoryview,
    max_output: int,
) -> bytes:
    size = min(max_output, max(_MIN_GUESS, _FIRST_GUESS_RATIO * len(data)))
    while True:
        buffer = bytearray(size)
        try:
            written = into(data, buffer)
        except cramjam.DecompressionError as exc:
            # Retry on any error, not only on recognised overflow messages: a cramjam upgrade
            # rewording them must not turn valid high-ratio batches into "corrupt" ones.
            if size < max_output:
                size = min(max_output, size * 4)
                continue
            if any(hint in str(exc) for hint in _OVERFLOW_HINTS):
                raise _too_large(codec, max_output) from None
            raise CompressionError(f"corrupt {codec.kafka_name} data: {exc}") from None
        return bytes(memoryview(buffer)[:written])


def _gzip_decompress(data: bytes | bytearray | memoryview, max_output: int) -> bytes:
    # Several concatenated gzip members are one valid stream (Java's GZIPInputStream reads them).
    parts: list[bytes] = []
    produced = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(wbits=31)
        try:
            part = inflater.decompress(rest, max_output - produced + 1)
        except zlib.error as exc:
            raise CompressionError(f"corrupt gzip data: {exc}") from None
        produced += len(part)
        if produced > max_output:
            raise _too_large(CompressionType.GZIP, max_output)
        if not inflater.eof:
            raise CompressionError("truncated gzip data")
        parts.append(part)
        rest = inflater.unused_data
        if not rest:
            return b"".join(parts)


def _snappy_raw_decompress(view: memoryview, max_output: int) -> bytes:
    # A raw snappy block starts with its decompressed length, so the bound is checked up front.
    try:
        size = cramjam.snappy.decompress_raw_len(view)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"corrupt snappy data: {exc}") from None
    if size > max_output:
        raise _too_large(CompressionType.SNAPPY, max_output)
    buffer = bytearray(size)
    _snappy_block_into(view, memoryview(buffer), size)
    return bytes(buffer)


def _xerial_decompress(view: memoryview, max_output: int) -> bytes:
    # First pass reads only block headers, so the output is allocated once at its exact size.
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        if view[pos : pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            pos += len(_XERIAL_HEADER)  # concatenated streams, as snappy-java accepts
            continue
        if pos + 4 > len(view):
            raise CompressionError("truncated snappy (xerial) block header")
        (length,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CompressionError(f"snappy (xerial) block of {length} bytes overruns the data")
        block = view[pos : pos + length]
        pos += length
        try:
            size = cramjam.snappy.decompress_raw_len(block)
        except cramjam.DecompressionError as exc:
            raise CompressionError(f"corrupt snappy data: {exc}") from None
        total += size
        if total > max_output:
            raise _too_large(CompressionType.SNAPPY, max_output)
        blocks.append((block, size))
    buffer = bytearray(total)
    out = memoryview(buffer)
    offset = 0
    for block, size in blocks:
        _snappy_block_into(block, out[offset : offset + size], size)
        offset += size
    return bytes(buffer)


def _snappy_block_into(block: memoryview, out: memoryview, size: int) -> None:
    try:
        written = cramjam.snappy.decompress_raw_into(block, out)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"corrupt snappy data: {exc}") from None
    if written != size:
        raise CompressionError(f"snappy block wrote {written} bytes, its header says {size}")


def _xerial_compress(view: memoryview) -> bytes:
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)
