"""Flat Protobuf messages decoded straight from their wire bytes into Arrow columns with numpy.

``strom.iceberg.protobuf_columns.decode`` parses a batch with upb and then reads every field of
every message from Python, a Python object per value. For the messages most topics carry (proto3,
fields that are scalars, strings, bytes, open enums, ``google.protobuf.Timestamp``, the wrappers
or messages made of those; no ``repeated`` and no ``map``) this module reads the wire format
itself for all the batch's values at once: step k reads the k-th field of every value (its tag,
then its value by wire type) with a few numpy operations per field number met in that step, as
``strom.spark.avro_columnar`` reads Avro. A field seen twice keeps the last value, as protobuf
does; fields the reader lacks are skipped by wire type.

Anything it does not do exactly as upb does, it refuses (``Fallback``) and the caller decodes
the batch with upb: a message field or two oneof members in one value (merged or cleared by
protobuf), a wire type the field does not have, groups, a string that is not UTF-8 (upb
refuses it), bytes that run past their value. So the results are upb's, or not made here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

TIMESTAMP = "google.protobuf.Timestamp"
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
WRAPPERS = {
    f"google.protobuf.{name}"
    for name in (
        "DoubleValue",
        "FloatValue",
        "Int64Value",
        "UInt64Value",
        "Int32Value",
        "UInt32Value",
        "BoolValue",
        "StringValue",
        "BytesValue",
    )
}
UINT64 = pa.decimal128(20, 0)
MICROS_SAFE = (2**63 - 1) // 1_000_000 - 1  # seconds whose microseconds an int64 holds
PAD = 16  # zero bytes after the values: a varint read past the last value stays in the buffer
_T = FieldDescriptor
_VARINT = {_T.TYPE_INT32, _T.TYPE_INT64, _T.TYPE_UINT32, _T.TYPE_UINT64, _T.TYPE_SINT32, _T.TYPE_SINT64}
_VARINT |= {_T.TYPE_BOOL, _T.TYPE_ENUM}
_FIXED64 = {_T.TYPE_FIXED64, _T.TYPE_SFIXED64, _T.TYPE_DOUBLE}
_FIXED32 = {_T.TYPE_FIXED32, _T.TYPE_SFIXED32, _T.TYPE_FLOAT}


class Fallback(Exception):
    """This batch (or this message) is for upb to decode."""


_SUPPORTED: dict[int, tuple[Descriptor, bool]] = {}  # id of a descriptor -> (it, supported(it))


def _proto3(file: Any) -> bool:
    """Whether a file is proto3 (its strings checked for UTF-8 by upb, its enums open)."""
    return descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb).syntax == "proto3"


def supported(descriptor: Descriptor) -> bool:
    """Whether ``decode`` takes messages of ``descriptor`` (asked once per descriptor)."""
    found = _SUPPORTED.get(id(descriptor))
    if found is None or found[0] is not descriptor:
        found = _SUPPORTED[id(descriptor)] = (descriptor, _supported(descriptor, 0))
    return found[1]


def _supported(descriptor: Descriptor, depth: int) -> bool:
    if depth > 8 or not _proto3(descriptor.file):
        return False
    for field in descriptor.fields:
        if field.is_repeated or field.type == _T.TYPE_GROUP:
            return False
        if field.type == _T.TYPE_ENUM and field.enum_type.is_closed:
            return False
        if field.type == _T.TYPE_MESSAGE and not _supported(field.message_type, depth + 1):
            return False
    return True


def enum_names(field: FieldDescriptor) -> dict[int, str]:
    """Number -> name of an enum field's values; for aliases the first name, as protobuf's
    ``values_by_number`` answers (and ``as_dict`` reads it)."""
    by_number = field.enum_type.values_by_number
    return {v.number: by_number[v.number].name for v in field.enum_type.values}


def _wire_type(field: FieldDescriptor) -> int:
    if field.type in _VARINT:
        return 0
    if field.type in _FIXED64:
        return 1
    if field.type in _FIXED32:
        return 5
    return 2


def varint(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the varint at each position as uint64, the position after it); Fallback past 10 bytes."""
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    going = byte >= 0x80
    width = np.ones(len(pos), np.int64)
    for k in range(1, 10):
        if not going.any():
            return value, pos + width
        at = np.flatnonzero(going)
        byte = buf[pos[at] + k]
        value[at] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        width[at] += 1
        going[at] = byte >= 0x80
    if going.any():
        raise Fallback("a varint longer than 10 bytes")
    return value, pos + width


class _Field:
    """What the values hold of one field: the last value of each row that has it."""

    def __init__(self, field: FieldDescriptor, n: int):
        self.field = field
        self.wire = _wire_type(field)
        self.present = np.zeros(n, bool)
        self.count = np.zeros(n, np.int8) if field.type == _T.TYPE_MESSAGE else None
        self.raw = np.zeros(n, np.uint64)  # varint and fixed values, or a length-delimited value's start
        self.size = np.zeros(n, np.int64) if self.wire == 2 else None


def _message(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, descriptor: Descriptor) -> pa.Array:
    """The struct column of the messages whose bytes are ``buf[starts[i]:ends[i]]``."""
    n = len(starts)
    fields = {f.number: _Field(f, n) for f in descriptor.fields}
    pos = starts.astype(np.int64)
    active = np.flatnonzero(pos < ends)
    while active.size:
        tag, after = varint(buf, pos[active])
        if (tag > np.uint64(0xFFFFFFFF)).any():
            raise Fallback("a tag past 32 bits")
        tags = tag.astype(np.int64)
        low, high = int(tags.min()), int(tags.max())
        if low == high:  # the usual case: every value has the same field next
            distinct = tags[:1]
        elif high < 32768:
            distinct = np.flatnonzero(np.bincount(tags))
        else:
            distinct = np.unique(tags)
        for key in distinct.tolist():  # a field number with one wire type
            if len(distinct) == 1:
                rows, at = active, after
            else:
                chosen = np.flatnonzero(tags == key)
                rows, at = active[chosen], after[chosen]
            num, kind = key >> 3, key & 7
            if num == 0:
                raise Fallback("field number 0")
            state = fields.get(num)
            if state is not None and kind != state.wire:
                raise Fallback("a wire type the field does not have")
            if kind == 0:
                value, at = varint(buf, at)
            elif kind == 1:
                value = buf[at[:, None] + np.arange(8)].copy().view("<u8").reshape(-1)
                at = at + 8
            elif kind == 5:
                value = buf[at[:, None] + np.arange(4)].copy().view("<u4").reshape(-1).astype(np.uint64)
                at = at + 4
            elif kind == 2:
                size, at = varint(buf, at)
                if (size > np.uint64(2**31)).any():
                    raise Fallback("a length past the value")
                value, length = at.astype(np.uint64), size.astype(np.int64)
                at = at + length
            else:
                raise Fallback("a group or an invalid wire type")
            if (at > ends[rows]).any():
                raise Fallback("a field runs past its value")
            if state is not None:
                state.raw[rows] = value
                if kind == 2:
                    assert state.size is not None
                    state.size[rows] = length
                state.present[rows] = True
                if state.count is not None:
                    state.count[rows] += 1
            if len(distinct) == 1:
                after = at
            else:
                after[chosen] = at
        pos[active] = after
        active = active[after < ends[active]]
    for oneof in descriptor.oneofs:
        members = np.zeros(n, np.int64)
        for member in oneof.fields:
            members += fields[member.number].present
        if len(members) and int(members.max()) > 1:
            raise Fallback("two members of a oneof in one value (protobuf keeps the last)")
    children = [_column(buf, fields[f.number], starts) for f in descriptor.fields]
    if not children:
        raise Fallback("a message without fields")
    return pa.StructArray.from_arrays(children, names=[f.name for f in descriptor.fields])


def _column(buf: np.ndarray, state: _Field, starts: np.ndarray) -> pa.Array:
    field, raw = state.field, state.raw
    mask = ~state.present if field.has_presence else None
    kind = field.type
    if kind == _T.TYPE_MESSAGE:
        assert state.count is not None and state.size is not None
        if (state.count > 1).any():
            raise Fallback("a message field twice in one value (protobuf merges them)")
        rows = np.flatnonzero(state.present)
        inner_starts = raw[rows].astype(np.int64)
        inner = _message(buf, inner_starts, inner_starts + state.size[rows], field.message_type)
        name = field.message_type.full_name
        if name == TIMESTAMP:
            seconds, nanos = inner.field(0).to_numpy(), inner.field(1).to_numpy()
            if len(seconds) and int(np.abs(seconds).max()) > MICROS_SAFE:
                raise Fallback("a timestamp past what microseconds in an int64 hold")
            values = np.zeros(len(raw), np.int64)
            values[rows] = seconds * 1_000_000 + nanos // 1000
            return pa.array(values, pa.int64(), mask=mask).cast(TIMESTAMP_TYPE)
        index = np.full(len(raw), -1, np.int64)
        index[rows] = np.arange(len(rows))
        taken = (inner.field(0) if name in WRAPPERS else inner).take(pa.array(index, mask=index < 0))
        return taken
    if kind in (_T.TYPE_STRING, _T.TYPE_BYTES):
        assert state.size is not None
        # the values lie in row order in ``buf``: offsets start, end of each (an absent one empty at
        # its row's start) make a binary array of the values and the gaps between them, and
        # taking every other item copies the values out in C
        if not len(raw):
            return pa.array([], pa.binary() if kind == _T.TYPE_BYTES else pa.string())
        begin = np.where(state.present, raw.astype(np.int64), starts)
        bounds = np.empty(2 * len(raw) + 1, np.int64)
        bounds[0:-1:2] = begin
        bounds[1::2] = begin + np.where(state.present, state.size, 0)
        bounds[-1] = bounds[-2]
        spans = pa.Array.from_buffers(
            pa.binary(), 2 * len(raw), [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(buf)]
        )
        array = spans.take(pa.array(np.arange(0, 2 * len(raw), 2), mask=None if mask is None else mask))
        if kind == _T.TYPE_BYTES:
            return array
        try:
            return array.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise Fallback("a string that is not UTF-8") from None
    if kind in (_T.TYPE_INT32, _T.TYPE_SFIXED32, _T.TYPE_ENUM):
        values = raw.astype(np.uint32).view(np.int32)
        if kind == _T.TYPE_ENUM:
            names = enum_names(field)
            for number in np.unique(values).tolist():
                names.setdefault(number, str(number))  # a number the reader's enum lacks: as text
            keys = np.array(sorted(names), np.int32)
            labels = pa.array([names[k] for k in keys.tolist()], pa.string())
            return labels.take(pa.array(np.searchsorted(keys, values), mask=mask))
        return pa.array(values, pa.int32(), mask=mask)
    if kind == _T.TYPE_SINT32:
        low = raw.astype(np.uint32)
        return pa.array(
            (low >> np.uint32(1)).view(np.int32) ^ -(low & np.uint32(1)).view(np.int32), pa.int32(), mask=mask
        )
    if kind == _T.TYPE_SINT64:
        return pa.array(
            (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64), pa.int64(), mask=mask
        )
    if kind in (_T.TYPE_INT64, _T.TYPE_SFIXED64):
        return pa.array(raw.view(np.int64), pa.int64(), mask=mask)
    if kind in (_T.TYPE_UINT32, _T.TYPE_FIXED32):
        return pa.array(raw.astype(np.uint32).astype(np.int64), pa.int64(), mask=mask)
    if kind in (_T.TYPE_UINT64, _T.TYPE_FIXED64):
        return pa.array(raw, pa.uint64(), mask=mask).cast(UINT64)
    if kind == _T.TYPE_BOOL:
        return pa.array(raw != 0, pa.bool_(), mask=mask)
    if kind == _T.TYPE_DOUBLE:
        return pa.array(raw.view(np.float64), pa.float64(), mask=mask)
    if kind == _T.TYPE_FLOAT:
        return pa.array(raw.astype(np.uint32).view(np.float32), pa.float32(), mask=mask)
    raise Fallback(f"field type {kind}")


def decode(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, descriptor: Descriptor) -> pa.Array:
    """The struct column of the messages at ``buf[starts[i]:ends[i]]`` (``buf`` padded with
    ``PAD`` zero bytes), of the type ``protobuf_columns.arrow_type`` gives; Fallback when upb
    must decode them."""
    return _message(buf, starts.astype(np.int64), ends.astype(np.int64), descriptor)
