"""Record batches straight to Arrow columns, for the Spark source's executors.

A per-record decoder (``strom.protocol.records``, or a client library's Message objects) costs a
few microseconds a record in Python, which is most of what the source spends. Here records are
decoded in bulk with numpy, in two ways:

* Runs of records of one layout (what producers of fixed-layout values write, and stretches of
  any batch): records of one size sit at a fixed stride, so every field is a strided column
  read in place. A run is found, and checked, by comparing the head of every row (its bytes
  before the value, read as 64-bit words) with the first record's: the same length, key length
  and value length bytes, and deltas of the same varint widths. Nothing is done record by record.
* Everything else: a Python loop hops from each record's length varint to the next (a handful of
  bytecodes a record), and the fields of all those records are then decoded at once, one varint
  position array after the other.

Keys and values are cut out by Arrow itself (``cut``): the buffer becomes one binary array whose
elements alternate between "a value" and "the bytes up to the next value", and taking every
other element copies the values out in C. ``decode_fields`` leaves them in place, so that the
source cuts those of all the uncompressed batches of a Fetch response with one call, straight
into the arrays it hands to Spark.

Headers are decoded per record (``decode_batch_records``) and only when the query asks for them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from strom.protocol.errors import CorruptRecordError
from strom.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    batch_records_payload,
    decode_batch_records,
)

_MAX_VARINT_BYTES = 10
_RUN_MIN_RECORDS = 32  # shorter runs of one size are hopped: their column set-up costs more than the hops
_STRETCH_FIRST, _STRETCH_MAX = 16, 4096  # records hopped after a failed run guess; doubles while guesses fail
# the zig-zag value of each one-byte varint (bytes 0..127), and of each two-byte one's 14 bits
_ZIGZAG_1 = (np.arange(128, dtype=np.int64) >> 1) ^ -(np.arange(128, dtype=np.int64) & 1)
_ZIGZAG_2 = (np.arange(1 << 14, dtype=np.int64) >> 1) ^ -(np.arange(1 << 14, dtype=np.int64) & 1)


class BatchColumns(NamedTuple):
    """One batch's records as arrays of equal length (offsets ascending)."""

    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, milliseconds
    keys: pa.BinaryArray
    values: pa.BinaryArray
    headers: list | None  # per record [(key, value-or-None), ...] when asked for


class BatchFields(NamedTuple):
    """One batch's records with keys and values still in place: ``cut(source, start, length)``
    copies them out, for many batches of one buffer at once if need be (offsets ascending)."""

    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, milliseconds
    source: object  # the buffer the starts point into: the batch's own, or its decompressed records
    key_start: np.ndarray
    key_length: np.ndarray  # -1: null
    value_start: np.ndarray
    value_length: np.ndarray  # -1: null
    headers: list | None  # per record [(key, value-or-None), ...] when asked for


class _Fields(NamedTuple):
    """Per record: the deltas and where its key and value lie in the records section (length -1: null)."""

    timestamp_delta: np.ndarray
    offset_delta: np.ndarray
    key_start: np.ndarray
    key_length: np.ndarray
    value_start: np.ndarray
    value_length: np.ndarray

    @classmethod
    def allocate(cls, count: int) -> _Fields:
        return cls(*(np.empty(count, np.int64) for _ in range(6)))


def decode_columns(
    batch, header: BatchHeader, with_headers: bool = False, max_output: int = 256 * 1024 * 1024
) -> BatchColumns:
    """Every record of one (possibly compressed) batch; ``header.position`` locates it in ``batch``."""
    fields = decode_fields(batch, header, with_headers, max_output)
    return BatchColumns(
        fields.offsets,
        fields.timestamps,
        cut(fields.source, fields.key_start, fields.key_length),
        cut(fields.source, fields.value_start, fields.value_length),
        fields.headers,
    )


def decode_fields(
    batch, header: BatchHeader, with_headers: bool = False, max_output: int = 256 * 1024 * 1024
) -> BatchFields:
    """Every record of one batch, keys and values left where they are.

    Uncompressed, they stay in ``batch`` (the starts count from its beginning), so that the
    batches of one Fetch response are cut out together, straight into the rows handed to Spark.
    """
    count = header.records_count
    if header.is_control or count <= 0:
        nothing = np.empty(0, np.int64)
        return BatchFields(nothing, nothing, b"", nothing, nothing, nothing, nothing, [] if with_headers else None)
    payload = _records_section(batch, header, max_output)
    fields = _decode_fields(payload, np.frombuffer(payload, np.uint8), count, header.base_offset)
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamps = np.full(count, header.max_timestamp, np.int64)
    else:
        timestamps = header.base_timestamp + fields.timestamp_delta
    headers = None
    if with_headers:
        headers = _headers(batch, header, fields, np.frombuffer(payload, np.uint8), count)
    source, key_start, value_start = payload, fields.key_start, fields.value_start
    if header.compression == 0:  # positions in the batch's buffer rather than in its records section
        source = batch
        key_start += header.position + BATCH_HEADER_SIZE
        value_start += header.position + BATCH_HEADER_SIZE
    return BatchFields(
        header.base_offset + fields.offset_delta,
        timestamps,
        source,
        key_start,
        fields.key_length,
        value_start,
        fields.value_length,
        headers,
    )


def _headers(batch, header: BatchHeader, fields: _Fields, data: np.ndarray, count: int) -> list:
    """Each record's headers. Most batches carry none: each record's header count, the byte right
    after its value, is then 0, which one numpy look tells; only a batch with some headers is
    decoded record by record (a few microseconds a record, more than all its other columns)."""
    after = fields.value_start + np.maximum(fields.value_length, 0)
    if len(after) == count and (count == 0 or int(after.max()) < len(data)) and not data[after].any():
        return [[] for _ in range(count)]
    return [r.headers for r in decode_batch_records(batch, header)]


def _records_section(batch, header: BatchHeader, max_output: int):
    """The batch's records section: a view of ``batch`` when uncompressed (keys and values are
    copied out by ``cut`` anyway), else the decompressed bytes."""
    if header.compression == 0:
        start = header.position + BATCH_HEADER_SIZE
        return memoryview(batch)[start : header.position + header.size]
    return batch_records_payload(batch, header, max_output)


def _decode_fields(payload, data: np.ndarray, count: int, base_offset: int) -> _Fields:
    """Every record's fields: runs of one layout as columns, the records between them hopped.

    A failed run guess makes the next hopped stretch longer, so batches without runs pay a few
    failed guesses, not one a record. Hopped records are decoded together at the end.
    """
    limit = len(data)
    out = _Fields.allocate(count)
    hopped_marks: list = []  # per hopped stretch: where each record starts, then where the next does
    hopped_rows: list[np.ndarray] = []
    done = position = 0
    stretch = _STRETCH_FIRST
    while done < count:
        left = count - done
        if left >= _RUN_MIN_RECORDS:
            run = _decode_run(payload, data, position, left, out, done, probe=stretch > _STRETCH_FIRST)
            if run is not None:
                n, size = run
                done += n
                position += n * size
                stretch = _STRETCH_FIRST
                continue
        n = left if left < _RUN_MIN_RECORDS + stretch else stretch
        marks, position = _hop(payload, position, n, limit)
        hopped_marks.append(marks)
        hopped_rows.append(np.arange(done, done + n))
        done += n
        stretch = min(stretch * 2, _STRETCH_MAX)
    if hopped_marks:
        _decode_hopped(data, hopped_marks, hopped_rows, out, base_offset)
    return out


# -- runs of one layout ---------------------------------------------------------------------------


class _Layout(NamedTuple):
    """Where the fields of one record lie, relative to its first byte (its length varint)."""

    size: int  # the whole record, length varint included
    length_width: int
    timestamp_column: int
    timestamp_width: int
    offset_column: int
    offset_width: int
    key_length_column: int
    key_length_width: int
    key_length: int
    value_length_column: int
    value_length_width: int
    value_length: int

    @property
    def key_column(self) -> int:
        return self.key_length_column + self.key_length_width

    @property
    def value_column(self) -> int:
        return self.value_length_column + self.value_length_width


def _layout(payload, position: int, limit: int) -> _Layout | None:
    """The layout of the record at ``position``, read in Python; None when it is not a
    well-formed record (the hop path then reports it)."""
    try:
        length, timestamp_at = _scalar_varint(payload, position)
        size = timestamp_at - position + length
        if length < 0 or position + size > limit:
            return None
        timestamp_at += 1  # attributes (unused)
        _, offset_at = _scalar_varint(payload, timestamp_at)
        _, key_length_at = _scalar_varint(payload, offset_at)
        key_length, key_at = _scalar_varint(payload, key_length_at)
        value_length_at = key_at + max(key_length, 0)
        value_length, value_at = _scalar_varint(payload, value_length_at)
    except (IndexError, CorruptRecordError):
        return None
    if key_length < -1 or value_length < -1 or value_at + max(value_length, 0) > position + size:
        return None
    return _Layout(
        size,
        size - length,
        timestamp_at - position,
        offset_at - timestamp_at,
        offset_at - position,
        key_length_at - offset_at,
        key_length_at - position,
        key_at - key_length_at,
        key_length,
        value_length_at - position,
        value_at - value_length_at,
        value_length,
    )


def _decode_run(payload, data: np.ndarray, position: int, left: int, out: _Fields, row: int, probe: bool):
    """The records from ``position`` laid out as the first one, decoded into ``out`` from ``row`` on.

    Returns (records, size), or None when fewer than _RUN_MIN_RECORDS are. ``probe`` first looks
    at that many only: after a failed guess, the next one is likely to fail too.
    """
    layout = _layout(payload, position, len(data))
    if layout is None:
        return None
    size = layout.size
    rows = min(left, (len(data) - position) // size)
    if rows < _RUN_MIN_RECORDS:
        return None
    if probe and _same_layout_rows(data, position, _RUN_MIN_RECORDS, layout) < _RUN_MIN_RECORDS:
        return None
    n = _same_layout_rows(data, position, rows, layout)
    if n < _RUN_MIN_RECORDS:
        return None
    end = row + n
    out.timestamp_delta[row:end] = _column_varint(
        data, position, n, size, layout.timestamp_column, layout.timestamp_width
    )
    out.offset_delta[row:end] = _column_varint(data, position, n, size, layout.offset_column, layout.offset_width)
    starts = np.arange(position, position + n * size, size, dtype=np.int64)
    np.add(starts, layout.key_column, out=out.key_start[row:end])
    out.key_length[row:end] = layout.key_length
    np.add(starts, layout.value_column, out=out.value_start[row:end])
    out.value_length[row:end] = layout.value_length
    return n, size


def _same_layout_rows(data: np.ndarray, position: int, rows: int, layout: _Layout) -> int:
    """How many records from ``position`` on (at most ``rows``) are laid out as the first says.

    A record qualifies when its length bytes, key length bytes and value length bytes are the
    first one's and its two deltas are varints of the first one's widths: then it has the same
    size (so the next one starts where it ends) and its fields in the same columns. The bytes
    that tell are compared eight at a time: each row is read as a few unaligned 64-bit words,
    masked, and compared with the first row's pattern.
    """
    mask, expected = _head_pattern(data[position : position + layout.value_column], layout)
    size = layout.size
    bad = None
    for column in _word_columns(mask):
        # the last row's word must lie inside the data
        rows = min(rows, (len(data) - position - column - 8) // size + 1)
        if rows <= 0:
            return 0
        word = np.ndarray((rows,), "<u8", data, position + column, (size,))
        word_mask = int.from_bytes(_padded(mask[column : column + 8]), "little")
        word_expected = int.from_bytes(_padded(expected[column : column + 8]), "little")
        differs = (word & np.uint64(word_mask)) != np.uint64(word_expected)
        bad = differs if bad is None else bad[: len(differs)] | differs
    assert bad is not None  # the length bytes are always compared
    first = int(bad.argmax())  # 0 when no row is bad: row 0 never is
    return first if first else len(bad)


def _word_columns(mask: np.ndarray) -> list[int]:
    """Where 8-byte words start so that they cover every byte ``mask`` selects."""
    columns: list[int] = []
    for column in np.flatnonzero(mask).tolist():
        if not columns or column >= columns[-1] + 8:
            columns.append(column)
    return columns


def _padded(chunk: np.ndarray) -> bytes:
    return chunk.tobytes().ljust(8, b"\0")


def _head_pattern(first: np.ndarray, layout: _Layout) -> tuple[np.ndarray, np.ndarray]:
    """(mask, expected) over a record's bytes before its value: lengths must equal the first
    record's, deltas must have its varint widths, the attributes and the key do not count."""
    mask = np.zeros(layout.value_column, np.uint8)
    expected = np.zeros(layout.value_column, np.uint8)
    for start, width in (
        (0, layout.length_width),
        (layout.key_length_column, layout.key_length_width),
        (layout.value_length_column, layout.value_length_width),
    ):
        mask[start : start + width] = 0xFF
        expected[start : start + width] = first[start : start + width]
    for start, width in (
        (layout.timestamp_column, layout.timestamp_width),
        (layout.offset_column, layout.offset_width),
    ):
        mask[start : start + width] = 0x80
        expected[start : start + width - 1] = 0x80  # the continuation bit on all but the last byte
    return mask, expected


def _column_varint(data: np.ndarray, position: int, rows: int, size: int, column: int, width: int) -> np.ndarray:
    """The zig-zag varints of ``width`` bytes at ``column`` of ``rows`` records of ``size`` from ``position``
    (their widths checked)."""
    start = position + column
    if width == 1:
        return _ZIGZAG_1[np.ndarray((rows,), np.uint8, data, start, (size,))]
    if width == 2:  # both bytes as one little-endian 16-bit word: two 7-bit groups, then a table
        word = np.ndarray((rows,), "<u2", data, start, (size,))
        return _ZIGZAG_2[(word & 0x7F) | ((word >> 1) & 0x3F80)]
    value = np.zeros(rows, np.int64)
    for k in range(width):
        value |= (np.ndarray((rows,), np.uint8, data, start + k, (size,)).astype(np.int64) & 0x7F) << (7 * k)
    return (value >> 1) ^ -(value & 1)


def _scalar_varint(payload, position: int) -> tuple[int, int]:
    """One zig-zag varint read in Python: (value, next position)."""
    value = shift = 0
    while True:
        byte = payload[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), position
        shift += 7
        if shift >= 7 * _MAX_VARINT_BYTES:
            raise CorruptRecordError("a varint is longer than 10 bytes")


# -- hopped records -------------------------------------------------------------------------------


def _hop(payload, position: int, n: int, limit: int) -> tuple[np.ndarray, int]:
    """Where each of ``n`` records from ``position`` begins, and where the one after them does,
    read as if every length were valid (``_decode_hopped`` checks the chain)."""
    marks: list[int] = []
    append = marks.append
    try:
        for _ in range(n):
            append(position)
            byte = payload[position]
            if byte < 0x80:  # records under 64 bytes
                position += 1 + (byte >> 1)
            else:
                second = payload[position + 1]
                if second < 0x80:  # records under 8 KiB
                    position += 2 + ((byte & 0x7F | second << 7) >> 1)
                else:
                    position = _skip_long_record(payload, position)
    except IndexError:
        raise CorruptRecordError(f"the batch's records run past its {limit} bytes") from None
    append(position)
    return np.array(marks, np.int64), position


def _skip_long_record(payload, position: int) -> int:
    length, shift = 0, 0
    while True:
        byte = payload[position]
        position += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return position + (length >> 1)
        if shift > 63:
            raise CorruptRecordError("record length varint is longer than 10 bytes")


def _decode_hopped(data: np.ndarray, marks: list, rows: list, out: _Fields, base_offset: int) -> None:
    """The fields of every hopped record at once, checked and written into ``out`` at ``rows``.

    The hops trusted each length; here the lengths are decoded again for all records at once and
    the chain is checked: every length non-negative, every record ending where the next begins,
    the last within the records section. A corrupt length makes the hop land somewhere wrong,
    which that check catches.
    """
    begin = np.concatenate([m[:-1] for m in marks]) if len(marks) > 1 else marks[0][:-1]
    follow = np.concatenate([m[1:] for m in marks]) if len(marks) > 1 else marks[0][1:]
    length, starts = _varints(data, begin)
    ends = starts + length
    if (length < 0).any() or (ends != follow).any() or ends.max() > len(data):
        raise CorruptRecordError(f"the records of the batch at offset {base_offset} run past its {len(data)} bytes")
    position = starts + 1  # attributes (unused)
    timestamp_delta, position = _varints(data, position)
    offset_delta, position = _varints(data, position)
    key_length, key_start = _varints(data, position)
    value_length, value_start = _varints(data, key_start + np.maximum(key_length, 0))
    if (value_start + np.maximum(value_length, 0) > ends).any() or (key_length < -1).any() or (value_length < -1).any():
        raise CorruptRecordError(f"a record of the batch at offset {base_offset} overruns its length")
    where = np.concatenate(rows) if len(rows) > 1 else rows[0]
    if len(where) == len(out.offset_delta):  # every record was hopped
        out.timestamp_delta[:] = timestamp_delta
        out.offset_delta[:] = offset_delta
        out.key_start[:] = key_start
        out.key_length[:] = key_length
        out.value_start[:] = value_start
        out.value_length[:] = value_length
        return
    out.timestamp_delta[where] = timestamp_delta
    out.offset_delta[where] = offset_delta
    out.key_start[where] = key_start
    out.key_length[where] = key_length
    out.value_start[where] = value_start
    out.value_length[where] = value_length


def _varints(data: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varint at each position, for all positions at once; returns values and next positions.

    One-byte varints (most deltas and short lengths) take a table look-up; the longer ones are
    continued on the positions that need it only. Reads past the end of ``data`` read its last
    byte instead (only a corrupt record gets there); a field that runs past its record is caught
    by the callers' bounds check.
    """
    byte = data.take(positions, mode="clip")
    more = byte >= 0x80
    if not more.any():
        return _ZIGZAG_1[byte], positions + 1
    value = (byte & 0x7F).astype(np.int64)
    after = positions + 1
    pending = np.flatnonzero(more)
    for shift in range(7, 7 * _MAX_VARINT_BYTES, 7):
        byte = data.take(after[pending], mode="clip").astype(np.int64)
        value[pending] |= (byte & 0x7F) << shift
        after[pending] += 1
        more = byte >= 0x80
        if not more.any():
            return (value >> 1) ^ -(value & 1), after
        pending = pending[more]
    raise CorruptRecordError("a varint is longer than 10 bytes")


def cut(source, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """The byte ranges [start, start + length) of ``source`` as a binary array (length -1: null).

    The ranges must ascend and not overlap. The source is viewed as 2n elements, range i then
    the gap to range i + 1, so the offsets are the range bounds themselves; ``take`` of the even
    elements copies the ranges out.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    if len(source) > 2**31 - 1:
        raise CorruptRecordError("a record batch larger than 2 GiB")
    if (lengths < 0).all():  # no keys at all, as from most producers
        return pa.nulls(n, pa.binary())
    sizes = np.maximum(lengths, 0)
    bounds = np.empty(2 * n + 1, np.int32)
    bounds[0 : 2 * n : 2] = starts
    bounds[1 : 2 * n : 2] = starts + sizes
    bounds[2 * n] = len(source)
    validity = None
    null_count = 0
    if (lengths < 0).any():
        valid = np.ones(2 * n, bool)
        valid[0 : 2 * n : 2] = lengths >= 0
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = int((lengths < 0).sum())
    interleaved = pa.BinaryArray.from_buffers(
        pa.binary(), 2 * n, [validity, pa.py_buffer(bounds), pa.py_buffer(source)], null_count
    )
    return interleaved.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
