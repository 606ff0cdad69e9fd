"""Record batches straight to Arrow columns, for the Spark source's executors.

A per-record decoder (``strom.protocol.records``, or a client library's Message objects) costs a
few microseconds a record in Python, which is most of what the source spends. Here only one thing
is done record by record: the hop from each record's length varint to the next record, a handful
of bytecodes, and not even that along runs of records of one size, which numpy finds. Every other
field (timestamp delta, offset delta, key and value lengths) is decoded for all records of a batch
at once with numpy, and keys and values are cut out of the batch by
Arrow itself: the batch bytes become one binary array whose elements alternate between "a value"
and "the bytes up to the next value", and taking every other element copies the values out in C.

Headers are decoded per record (``decode_batch_records``) and only when the query asks for them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from strom.protocol.errors import CorruptRecordError
from strom.protocol.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    batch_records_payload,
    decode_batch_records,
)

_MAX_VARINT_BYTES = 10
_SAME_SIZE_MIN_RECORDS = 64  # below this, a guess that fails costs more than the loop it could save


class BatchColumns(NamedTuple):
    """One batch's records as arrays of equal length (offsets ascending)."""

    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, milliseconds
    keys: pa.BinaryArray
    values: pa.BinaryArray
    headers: list | None  # per record [(key, value-or-None), ...] when asked for


def decode_columns(
    batch, header: BatchHeader, with_headers: bool = False, max_output: int = 256 * 1024 * 1024
) -> BatchColumns:
    """Every record of one (possibly compressed) batch; ``header.position`` locates it in ``batch``."""
    count = header.records_count
    if header.is_control or count <= 0:
        return _empty(with_headers)
    payload = batch_records_payload(batch, header, max_output)
    limit = len(payload)
    data = np.frombuffer(payload, np.uint8)
    starts, ends = _record_bounds(payload, data, count, limit)
    position = starts + 1  # attributes (unused)
    timestamp_delta, position = _varints(data, position)
    offset_delta, position = _varints(data, position)
    key_length, position = _varints(data, position)
    key_start = position
    position = key_start + np.maximum(key_length, 0)
    value_length, position = _varints(data, position)
    value_start = position
    value_end = value_start + np.maximum(value_length, 0)
    if (value_end > ends).any() or (key_length < -1).any() or (value_length < -1).any():
        raise CorruptRecordError(f"a record of the batch at offset {header.base_offset} overruns its length")
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamps = np.full(count, header.max_timestamp, np.int64)
    else:
        timestamps = header.base_timestamp + timestamp_delta
    headers = None
    if with_headers:
        headers = [r.headers for r in decode_batch_records(batch, header)]
    return BatchColumns(
        header.base_offset + offset_delta,
        timestamps,
        _cut(payload, key_start, key_length),
        _cut(payload, value_start, value_length),
        headers,
    )


def _empty(with_headers: bool) -> BatchColumns:
    nothing = np.empty(0, np.int64)
    return BatchColumns(
        nothing, nothing, pa.array([], pa.binary()), pa.array([], pa.binary()), [] if with_headers else None
    )


def _record_bounds(payload: bytes, data: np.ndarray, count: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Each record's first byte after its length varint, and its end: the one sequential pass.

    The Python loop only hops from length to length (a few bytecodes a record, no checks); the
    lengths are then decoded again for all records at once and the chain is checked with numpy:
    every length non-negative, every record ending where the next begins, the last within the
    payload. A corrupt length makes the loop hop somewhere wrong, which that check catches.
    """
    marks = _length_marks(payload, data, count, limit)
    length, starts = _varints(data, marks)
    ends = starts + length
    if (length < 0).any():
        raise CorruptRecordError("a record length is negative")
    if (ends[:-1] != marks[1:]).any() or ends[-1] > limit:
        raise CorruptRecordError(f"the batch's {count} records run past its {limit} bytes")
    return starts, ends


def _length_marks(payload: bytes, data: np.ndarray, count: int, limit: int) -> np.ndarray:
    """Where each record's length varint begins, read as if every length were valid.

    Runs of records of one size are found with numpy (``_same_size_run``); the rest hop from
    length to length in a Python loop of a few bytecodes a record. A guess that fails makes the
    loop's next stretch longer, so batches without runs pay a few failed guesses, not one a record.
    """
    parts: list[np.ndarray] = []
    done = position = 0
    window, stretch = 256, 16
    try:
        while done < count:
            if count - done >= _SAME_SIZE_MIN_RECORDS:
                run, position = _same_size_run(data, position, min(window, count - done))
                parts.append(run)
                done += len(run)
                if len(run) == window:
                    window, stretch = min(window * 2, 8192), 16
                else:
                    window, stretch = max(_SAME_SIZE_MIN_RECORDS, 2 * len(run)), min(stretch * 2, 4096)
            n = count - done if count - done < _SAME_SIZE_MIN_RECORDS + stretch else stretch
            marks: list[int] = []
            append = marks.append
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
            parts.append(np.array(marks, np.int64))
            done += n
    except IndexError:
        raise CorruptRecordError(f"the batch's {count} records run past its {limit} bytes") from None
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _same_size_run(data: np.ndarray, position: int, window: int) -> tuple[np.ndarray, int]:
    """Up to ``window`` records from ``position`` that have the size of the first, found without a loop.

    Records of one size (fixed-layout values, with offset deltas of one varint width) sit at
    multiples of that size; the lengths at all those places are read at once and the run ends
    at the first record that does not end where the next was guessed to begin. Returns the
    run's marks and where the record after the run begins.
    """
    first_length, first_start = _varints(data, np.array([position], np.int64))
    step = int(first_start[0] + first_length[0]) - position
    if step <= 0:
        return np.empty(0, np.int64), position
    guess = position + np.arange(window, dtype=np.int64) * step
    length, start = _varints(data, guess)
    off = np.flatnonzero(start + length != guess + step)
    if len(off) == 0:
        return guess, position + window * step
    run = int(off[0])  # this record starts where guessed (its predecessor ends there) but ends elsewhere
    return guess[:run], int(guess[run])


def _skip_long_record(payload: bytes, position: int) -> int:
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


def _varints(data: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varint at each position, for all positions at once; returns values and next positions.

    Reads past the end of ``data`` read its last byte instead (only a corrupt record gets there);
    a field that runs past its record is caught by the callers' bounds check.
    """
    value = np.zeros(len(positions), np.int64)
    position = positions.copy()
    active = np.ones(len(positions), bool)
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        byte = data[np.minimum(position, len(data) - 1)].astype(np.int64)
        value |= np.where(active, (byte & 0x7F) << shift, 0)
        position += active
        active &= byte >= 0x80
        if not active.any():
            break
    else:
        raise CorruptRecordError("a varint is longer than 10 bytes")
    return (value >> 1) ^ -(value & 1), position


def _cut(payload: bytes, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """The byte ranges [start, start + length) of ``payload`` as a binary array (length -1: null).

    The payload is viewed as 2n elements, range i then the gap to range i + 1, so the offsets are
    the range bounds themselves; ``take`` of the even elements copies the ranges out.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    if len(payload) > 2**31 - 1:
        raise CorruptRecordError("a record batch larger than 2 GiB")
    if (lengths < 0).all():  # no keys at all, as from most producers
        return pa.nulls(n, pa.binary())
    sizes = np.maximum(lengths, 0)
    bounds = np.empty(2 * n + 1, np.int32)
    bounds[0 : 2 * n : 2] = starts
    bounds[1 : 2 * n : 2] = starts + sizes
    bounds[2 * n] = len(payload)
    validity = None
    null_count = 0
    if (lengths < 0).any():
        valid = np.ones(2 * n, bool)
        valid[0 : 2 * n : 2] = lengths >= 0
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = int((lengths < 0).sum())
    interleaved = pa.BinaryArray.from_buffers(
        pa.binary(), 2 * n, [validity, pa.py_buffer(bounds), pa.py_buffer(payload)], null_count
    )
    return interleaved.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
