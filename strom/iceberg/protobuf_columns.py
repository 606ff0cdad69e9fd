"""Protobuf messages as Arrow columns, and Confluent-framed Protobuf values decoded into them.

Shared by everything that reads Protobuf records as columns: the Spark source and sink
(``value.format=protobuf``), the console's message browser and the Iceberg schema modes. It sits
in the iceberg layer, below ``strom.schemas``, so that translation workers can use it; it therefore
takes descriptors (``FileDescriptorProto``s, as ``strom.schemas.protobuf.parse`` makes them from
``.proto`` text), never schema text.

The mapping (as Spark's ``from_protobuf`` and Redpanda's Iceberg topics map Protobuf):

- double/float → float64/float32; int32, sint32, sfixed32 → int32; int64, sint64, sfixed64 →
  int64; uint32, fixed32 → int64 and uint64, fixed64 → decimal(20, 0) (Spark and Iceberg have no
  unsigned types, and these hold values past the signed range); bool, string, bytes → themselves;
- an enum → string, its value's name (a number the reader's enum lacks: the number as text);
- a message → struct of its fields in declaration order; ``google.protobuf.Timestamp`` →
  timestamp (µs, UTC); the wrappers (``google.protobuf.Int64Value`` ...) → their scalar;
- ``repeated`` → list; ``map<K, V>`` → map;
- presence: a field that tracks it (a message, a proto3 ``optional``, a oneof member, a proto2
  ``optional``) is null when unset; a proto3 scalar without presence holds its default (0, "")
  as protobuf itself reads it. Every column is nullable.

A recursive message has no Arrow type (``UnsupportedMessage``).

Decoding is columnar where it can be (``decode``): the values of a batch that carry the expected
prefix are rewritten, in one numpy pass over the batch's bytes, into the elements of one synthetic
message ``repeated <the message> items = 1`` (each 6-byte prefix becomes the element's tag and a
5-byte length), so that protobuf's own parser (upb) reads the whole batch in one C call instead
of one Python call per record; each field is then read for all messages at once (``map`` with
``attrgetter``, one Arrow array per column; timestamps, enums and uint64 converted with numpy
and Arrow), never a Python dict per record. Values without that prefix are parsed one by one
(they are bad, or name the message in a rarer encoding), and a batch whose bulk parse fails is
parsed again one value at a time, which says which value is bad and why. Flat proto3 messages
(no ``repeated``, no ``map``) skip upb and the Python reads altogether: ``strom.iceberg.protobuf_wire``
reads their fields from the batch's bytes with numpy, and hands back to upb whatever it would not
read exactly as upb does.

Confluent's wire format: the magic byte 0, the schema id (4 bytes, big-endian), the message
indexes (a zig-zag varint count and as many zig-zag varint indexes, the path from the file's
top-level messages down through nested ones; a single 0 byte means ``[0]``, the first message),
then the message's bytes.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter, methodcaller
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError

from strom.iceberg import protobuf_wire
from strom.iceberg.protobuf_wire import MICROS_SAFE as _MICROS_SAFE
from strom.iceberg.protobuf_wire import TIMESTAMP, TIMESTAMP_TYPE
from strom.iceberg.protobuf_wire import UINT64 as _UINT64
from strom.iceberg.protobuf_wire import WRAPPERS as _WRAPPERS

_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_UINT64: _UINT64,
    FieldDescriptor.TYPE_FIXED64: _UINT64,
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}


class UnsupportedMessage(ValueError):
    """A message (or part of it) with no Arrow type; the message says which part and why."""


class ProtobufSchema:
    """The message classes of one registered schema: ``files`` are its descriptors, the files it
    imports first and its own last (``FileDescriptorProto``s or their serialized bytes)."""

    def __init__(self, files: Sequence[Any]):
        self.pool = DescriptorPool()
        protos = []
        for file in files:
            if isinstance(file, bytes):
                file = descriptor_pb2.FileDescriptorProto.FromString(file)
            protos.append(file)
        self.files = tuple(proto.SerializeToString() for proto in protos)  # what RegisteredSchema.descriptors holds
        by_name = {proto.name: proto for proto in protos}
        added: set[str] = set()

        def add(proto: Any) -> None:  # a file after the files it imports, as the pool requires
            if proto.name in added:
                return
            added.add(proto.name)
            for name in proto.dependency:
                if name in by_name:
                    add(by_name[name])
            self.pool.Add(proto)

        for proto in protos:
            add(proto)
        self.file = self.pool.FindFileByName(protos[-1].name)
        prefix = f"{protos[-1].package}." if protos[-1].package else ""
        # top-level messages in declaration order (what the first message index counts)
        self.top = [self.pool.FindMessageTypeByName(prefix + m.name) for m in protos[-1].message_type]

    def message(self, path: Sequence[int] = (0,)) -> Descriptor:
        """The message a value's indexes name; IndexError when the file has no such message."""
        if not path:
            raise IndexError("no message index")
        found = self.top[path[0]]
        for index in path[1:]:
            found = found.nested_types[index]
        return found

    def named(self, name: str | None) -> Descriptor:
        """The message called ``name`` (full, or relative to the file's package; nested ones as
        ``Outer.Inner``) in this file, the first message for None; KeyError naming the choices."""
        if name is None:
            return self.message()
        package = self.file.package
        for candidate in (name, f"{package}.{name}" if package else name):
            try:
                found = self.pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
            if found.file.name == self.file.name:
                return found
        choices = ", ".join(d.full_name for d in self.top)
        raise KeyError(f"the schema has no message {name!r} (its top-level messages: {choices})")

    def path_of(self, descriptor: Descriptor) -> tuple[int, ...]:
        """The message indexes of ``descriptor`` in this file (the inverse of ``message``)."""
        path: list[int] = []
        while descriptor.containing_type is not None:
            parent = descriptor.containing_type
            path.append(list(parent.nested_types).index(descriptor))
            descriptor = parent
        path.append(self.top.index(descriptor))
        return tuple(reversed(path))


def message_class(descriptor: Descriptor) -> Any:
    return message_factory.GetMessageClass(descriptor)


# -- the Arrow type of a message ------------------------------------------------------------------


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def arrow_type(descriptor: Descriptor) -> pa.StructType:
    """The Arrow struct of a message (module docstring)."""
    return _struct(descriptor, descriptor.full_name, ())


def _struct(descriptor: Descriptor, path: str, open_: tuple[str, ...]) -> pa.StructType:
    if descriptor.full_name in open_:
        raise UnsupportedMessage(f"{path}: the message {descriptor.full_name} contains itself")
    inner = (*open_, descriptor.full_name)
    return pa.struct(
        [pa.field(f.name, _field_type(f, f"{path}.{f.name}", inner), nullable=True) for f in descriptor.fields]
    )


def _field_type(field: FieldDescriptor, path: str, open_: tuple[str, ...]) -> pa.DataType:
    if _is_map(field):
        key, value = field.message_type.fields_by_number[1], field.message_type.fields_by_number[2]
        return pa.map_(_single_type(key, path, open_), _single_type(value, path, open_))
    single = _single_type(field, path, open_)
    return pa.list_(single) if _is_repeated(field) else single


def _single_type(field: FieldDescriptor, path: str, open_: tuple[str, ...]) -> pa.DataType:
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        name = field.message_type.full_name
        if name == TIMESTAMP:
            return TIMESTAMP_TYPE
        if name in _WRAPPERS:
            return _SCALARS[field.message_type.fields_by_name["value"].type]
        return _struct(field.message_type, path, open_)
    return _SCALARS[field.type]


# -- decoding -------------------------------------------------------------------------------------


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """(the varint at ``at``, the position after it); IndexError past the end."""
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def message_indexes(value: bytes, at: int = 5) -> tuple[tuple[int, ...], int]:
    """(the message indexes after the schema id, the position of the message's bytes)."""
    raw, at = read_varint(value, at)
    count = _zigzag(raw)
    if count == 0:
        return (0,), at
    if count < 0 or count > 64:
        raise ValueError(f"{count} message indexes")
    path = []
    for _ in range(count):
        raw, at = read_varint(value, at)
        path.append(_zigzag(raw))
    return tuple(path), at


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def frame(schema_id: int, path: Sequence[int] = (0,)) -> bytes:
    """The prefix of a value of message ``path`` in schema ``schema_id`` (as Confluent's serializer writes it)."""
    head = b"\x00" + int(schema_id).to_bytes(4, "big")
    if tuple(path) == (0,):
        return head + b"\x00"
    return head + b"".join(_varint((i << 1) ^ (i >> 63)) for i in (len(path), *path))


class Parsed:
    """What ``parse`` makes of a column of framed values."""

    def __init__(self, n: int):
        self.messages: list[Any] = []
        self.rows: list[int] = []  # the row of each message
        self.bad = np.zeros(n, bool)
        self.reasons: dict[int, str] = {}

    def fail(self, row: int, why: str) -> None:
        self.bad[row] = True
        if len(self.reasons) < 5:
            self.reasons.setdefault(row, why)


def parse(
    values: Sequence[bytes | None],
    cls: Any,
    path: tuple[int, ...],
    known: Callable[[int], bool],
    rows: Sequence[int] | None = None,
    out: Parsed | None = None,
) -> Parsed:
    """Framed values to messages of ``cls`` (the reader's message, at ``path`` in its file): the
    bytes are read with the reader's descriptor whatever version wrote them (Protobuf resolves by
    field number: unknown fields are skipped, missing ones are unset). A value is bad when it lacks
    the prefix, names an id ``known`` refuses, names another message or does not parse.
    ``rows``: the row of each value (by default its position), ``out``: where to add them."""
    out = Parsed(len(values)) if out is None else out
    ids: dict[bytes, bool] = {}  # the 4 id bytes -> known: a batch repeats one or two ids
    first = path == (0,)
    for row, value in zip(range(len(values)) if rows is None else rows, values, strict=True):
        if value is None:
            continue
        if len(value) < 6 or value[0] != 0:
            out.fail(row, "no Confluent schema id prefix (magic byte 0, a 4-byte id and message indexes)")
            continue
        id_bytes = value[1:5]
        found = ids.get(id_bytes)
        if found is None:
            found = ids[id_bytes] = known(int.from_bytes(id_bytes, "big"))
        if not found:
            out.fail(row, f"schema id {int.from_bytes(id_bytes, 'big')} is not a registered PROTOBUF schema")
            continue
        if first and value[5] == 0:  # the usual case: the single 0 byte of the first message
            indexes, at = path, 6
        else:
            try:
                indexes, at = message_indexes(value)
            except (IndexError, ValueError) as exc:
                out.fail(row, f"message indexes do not decode: {exc}")
                continue
        if indexes != path:
            out.fail(row, f"message indexes {list(indexes)} name another message than the reader's {list(path)}")
            continue
        message = cls()
        try:
            message.ParseFromString(value[at:])
        except (DecodeError, RuntimeError, ValueError) as exc:
            out.fail(row, f"not a {cls.DESCRIPTOR.full_name}: {exc}")
            continue
        out.messages.append(message)
        out.rows.append(row)
    return out


# -- the whole batch in one parse -----------------------------------------------------------------

_BATCHES: dict[tuple[int, str], tuple[Any, Any]] = {}  # (id of a pool, message name) -> (the pool, batch class)


def batch_class(descriptor: Descriptor) -> Any:
    """The class of ``message Batch { repeated <descriptor> items = 1; optional uint64 pad = 2; }``,
    added once to the descriptor's own pool (``pad`` takes the filler bytes of longer prefixes)."""
    pool = descriptor.file.pool
    key = (id(pool), descriptor.full_name)
    found = _BATCHES.get(key)
    if found is None:
        package = f"strom_batch.{descriptor.full_name}"
        try:
            batch = pool.FindMessageTypeByName(f"{package}.Batch")
        except KeyError:
            proto = descriptor_pb2.FileDescriptorProto(
                name=f"strom_batch/{descriptor.full_name}.proto",
                package=package,
                dependency=[descriptor.file.name],
                syntax="proto2",
            )
            message = proto.message_type.add(name="Batch")
            repeated, optional = FieldDescriptor.LABEL_REPEATED, FieldDescriptor.LABEL_OPTIONAL
            message.field.add(
                name="items",
                number=1,
                label=repeated,
                type=FieldDescriptor.TYPE_MESSAGE,
                type_name=f".{descriptor.full_name}",
            )
            message.field.add(name="pad", number=2, label=optional, type=FieldDescriptor.TYPE_UINT64)
            pool.Add(proto)
            batch = pool.FindMessageTypeByName(f"{package}.Batch")
        found = _BATCHES[key] = (pool, message_class(batch))  # the pool kept alive beside its id
    return found[1]


def _header(width: int) -> tuple[bytes, int]:
    """What replaces a prefix of ``width`` (>= 6) bytes: (filler and the tag of field 1, the width
    of the element's length varint after them). The filler sets field 2 to 0 (``10 00``, or
    ``10 80 00`` for an odd count); the length takes 5 bytes, 4 when 1 byte would be left over
    (one byte holds no field); upb reads a length of at most 5 varint bytes, so never more."""
    filler, size = width - 6, 5
    if filler == 1:
        filler, size = 2, 4
    pad = b"\x10\x00" * (filler // 2) if filler % 2 == 0 else b"\x10\x00" * (filler // 2 - 1) + b"\x10\x80\x00"
    return pad + b"\x0a", size


def _buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(the value offsets as int64, the data bytes) of a binary array, without copying the data."""
    offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1, values.offset * 4).astype(np.int64)
    data = values.buffers()[2]
    return offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)


def _bulk(values: pa.Array, descriptor: Descriptor, path: tuple[int, ...], known: Callable[[int], bool]):
    """(the rows whose values have the usual prefix naming ``path`` and an id ``known`` accepts,
    their messages in the same order), or None when those values do not all parse as one batch."""
    expected = np.frombuffer(frame(0, path)[5:], np.uint8)
    width = 5 + len(expected)
    offsets, data = _buffers(values)
    candidates = np.diff(offsets) >= width
    if values.null_count:
        candidates &= np.asarray(values.is_valid())
    rows = np.flatnonzero(candidates)
    head = data[offsets[rows][:, None] + np.arange(width)]
    good = (head[:, 0] == 0) & (head[:, 5:] == expected).all(axis=1)
    quad = head[:, 1:5].astype(np.int64)
    ids = (quad[:, 0] << 24) | (quad[:, 1] << 16) | (quad[:, 2] << 8) | quad[:, 3]
    for schema_id in np.unique(ids[good]).tolist():
        if not known(schema_id):
            good &= ids != schema_id
    rows = rows[good]
    if not len(rows):
        return rows, []
    if len(rows) < len(values):  # the chosen values side by side, as Arrow's filter copies them
        mask = np.zeros(len(values), bool)
        mask[rows] = True
        offsets, data = _buffers(values.filter(pa.array(mask)))
    buf = data[offsets[0] : offsets[-1]].copy()
    at = offsets[:-1] - offsets[0]
    sizes = np.diff(offsets) - width
    if int(sizes.max()) >= 2**28:  # a length past 4 varint bytes: not worth a case of its own
        return None
    if protobuf_wire.supported(descriptor):  # flat messages: their columns straight from the bytes
        padded = np.concatenate([buf, np.zeros(protobuf_wire.PAD, np.uint8)])
        try:
            return rows, protobuf_wire.decode(padded, at + width, at + width + sizes, descriptor)
        except protobuf_wire.Fallback:
            pass
    header, size = _header(width)
    buf[at[:, None] + np.arange(len(header))] = np.frombuffer(header, np.uint8)
    for k in range(size):
        buf[at + len(header) + k] = ((sizes >> (7 * k)) & 0x7F) | (0x80 if k < size - 1 else 0)
    batch = batch_class(descriptor)()
    try:
        batch.ParseFromString(buf.data)
    except (DecodeError, RuntimeError, ValueError):
        return None
    messages = list(batch.items)
    return (rows, messages) if len(messages) == len(rows) else None


def decode(values: pa.Array, descriptor: Descriptor, path: tuple[int, ...], known: Callable[[int], bool]):
    """(a column of ``arrow_type(descriptor)``, bad rows, row → reason) for a binary column of framed values.

    The values with the usual prefix are parsed as one batch (module docstring); the others, and
    all of them when that batch does not parse, one by one with ``parse``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    cls = message_class(descriptor)
    bulk = _bulk(values, descriptor, path, known) if pa.types.is_binary(values.type) else None
    head: tuple[np.ndarray, pa.Array] | None = None
    if bulk is None:
        parsed = parse(values.to_pylist(), cls, path, known)
    else:
        rows, found = bulk
        parsed = Parsed(n)
        rest = np.ones(n, bool) if not values.null_count else np.asarray(values.is_valid()).copy()
        rest[rows] = False
        others = np.flatnonzero(rest)
        if len(others):
            parse(values.take(pa.array(others)).to_pylist(), cls, path, known, others.tolist(), parsed)
        if isinstance(found, list):
            parsed.messages = found + parsed.messages
            parsed.rows = rows.tolist() + parsed.rows
        else:
            head = (rows, found)
    struct = _columns_or_bad(parsed, descriptor)
    order = parsed.rows
    if head is not None:  # the columns read from the bytes come first
        struct = pa.concat_arrays([head[1], struct])
        order = head[0].tolist() + order
    reasons = dict(sorted(parsed.reasons.items()))
    rows = np.asarray(order, np.int64)
    if len(rows) == n and (rows == np.arange(n)).all():  # every value decoded, in order: no reordering
        return struct, parsed.bad, reasons
    index = np.full(n, len(rows), np.int64)
    index[rows] = np.arange(len(rows))
    whole = pa.concat_arrays([struct, pa.nulls(1, struct.type)])
    return whole.take(pa.array(index)), parsed.bad, reasons


def _columns_or_bad(parsed: Parsed, descriptor: Descriptor) -> pa.StructArray:
    """The parsed messages' columns; a message that parses but has no value of its column type
    (a proto2 string that is not UTF-8, a timestamp past int64 microseconds) is a bad row, with
    Arrow's reason, instead of failing the whole batch."""
    try:
        return columns(parsed.messages, descriptor)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError):
        pass
    kept: list[tuple[Any, int]] = []
    for message, row in zip(parsed.messages, parsed.rows, strict=True):
        try:
            columns([message], descriptor)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, ValueError) as exc:
            parsed.fail(row, f"not a {descriptor.full_name} of the reader's column types: {exc}")
            continue
        kept.append((message, row))
    parsed.messages = [message for message, _ in kept]
    parsed.rows = [row for _, row in kept]
    return columns(parsed.messages, descriptor)


def columns(messages: Sequence[Any], descriptor: Descriptor, valid: Sequence[bool] | None = None) -> pa.StructArray:
    """The messages as one struct array (``valid``: which are set; the others are null)."""
    type_ = arrow_type(descriptor)
    if not descriptor.fields:
        return pa.array([{} if v else None for v in (valid or [True] * len(messages))], type_)
    children = [_column(messages, f, type_.field(f.name).type) for f in descriptor.fields]
    mask = None if valid is None else pa.array(_mask(valid))
    return pa.StructArray.from_arrays(children, fields=list(type_), mask=mask)


def _offsets(lengths: Any, n: int) -> pa.Array:
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.fromiter(lengths, np.int64, n), out=offsets[1:])
    return pa.array(offsets)


def _column(messages: Sequence[Any], field: FieldDescriptor, type_: pa.DataType) -> pa.Array:
    if _is_map(field):
        return _map_column(messages, field, type_)
    found = list(map(attrgetter(field.name), messages))
    if _is_repeated(field):
        values = _values(list(chain.from_iterable(found)), field, type_.value_type, None)
        return pa.ListArray.from_arrays(_offsets(map(len, found), len(found)), values)
    present = list(map(methodcaller("HasField", field.name), messages)) if field.has_presence else None
    return _values(found, field, type_, present)


def _map_column(messages: Sequence[Any], field: FieldDescriptor, type_: pa.MapType) -> pa.Array:
    entry = field.message_type
    key_field, value_field = entry.fields_by_number[1], entry.fields_by_number[2]
    maps = list(map(attrgetter(field.name), messages))
    keys = [k for found in maps for k in found]
    items = [found[k] for found in maps for k in found]
    key_array = _values(keys, key_field, type_.key_type, None)
    item_array = _values(items, value_field, type_.item_type, None)
    return pa.MapArray.from_arrays(_offsets(map(len, maps), len(maps)), key_array, item_array)


def _values(values: list[Any], field: FieldDescriptor, type_: pa.DataType, present: list[bool] | None) -> pa.Array:
    """One column of single values of ``field`` (``present``: which rows hold one; None: all do)."""
    if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        name = field.message_type.full_name
        if name == TIMESTAMP:
            seconds = np.array(list(map(attrgetter("seconds"), values)), np.int64)
            nanos = np.array(list(map(attrgetter("nanos"), values)), np.int64)
            if len(seconds) and int(np.abs(seconds).max()) > _MICROS_SAFE:  # Arrow's error, as for any int
                micros: Any = [
                    s * 1_000_000 + ns // 1000 for s, ns in zip(seconds.tolist(), nanos.tolist(), strict=True)
                ]
            else:
                micros = seconds * 1_000_000 + nanos // 1000
            return pa.array(micros, pa.int64(), mask=_mask(present)).cast(TIMESTAMP_TYPE)
        if name in _WRAPPERS:
            inner = field.message_type.fields_by_name["value"]
            return _values(list(map(attrgetter("value"), values)), inner, type_, present)
        return columns(values, field.message_type, present)
    if field.type == FieldDescriptor.TYPE_ENUM:
        names = protobuf_wire.enum_names(field)
        try:
            values = list(map(names.__getitem__, values))
        except KeyError:  # a number the reader's enum lacks: the number as text
            values = [names.get(v, str(v)) for v in values]
    elif type_ == _UINT64:
        return pa.array(values, pa.uint64(), mask=_mask(present)).cast(_UINT64)
    return pa.array(values, type_, mask=_mask(present))


def _mask(present: Sequence[bool] | None) -> np.ndarray | None:
    return None if present is None else ~np.array(present, bool)


# -- encoding (the sink) --------------------------------------------------------------------------


def to_message(row: dict, cls: Any) -> Any:
    """A message of ``cls`` from a row of its Arrow/Spark struct (as ``to_pylist`` gives it):
    the inverse of ``columns``. Raises ValueError or TypeError naming the field that does not fit."""
    message = cls()
    _fill(message, row, cls.DESCRIPTOR.full_name)
    return message


def _fill(message: Any, row: dict, path: str) -> None:
    for field in message.DESCRIPTOR.fields:
        value = row.get(field.name)
        if value is None:
            continue
        where = f"{path}.{field.name}"
        try:
            if _is_map(field):
                target = getattr(message, field.name)
                value_field = field.message_type.fields_by_number[2]
                pairs = value.items() if isinstance(value, dict) else value
                for key, item in pairs:
                    if value_field.message_type is not None:
                        _set_message(target[key], value_field, item, where)
                    else:
                        target[key] = _scalar(value_field, item)
            elif _is_repeated(field):
                target = getattr(message, field.name)
                for item in value:
                    if field.message_type is not None:
                        _set_message(target.add(), field, item, where)
                    else:
                        target.append(_scalar(field, item))
            elif field.message_type is not None:
                _set_message(getattr(message, field.name), field, value, where)
            else:
                setattr(message, field.name, _scalar(field, value))
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"{where}: {exc}") from None


def _set_message(target: Any, field: FieldDescriptor, value: Any, path: str) -> None:
    name = field.message_type.full_name
    if name == TIMESTAMP:
        if isinstance(value, dt.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            micros = (value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
        else:
            micros = int(value)
        target.seconds, rest = divmod(micros, 1_000_000)
        target.nanos = rest * 1000
    elif name in _WRAPPERS:
        target.value = _scalar(field.message_type.fields_by_name["value"], value)
    else:
        target.SetInParent()
        _fill(target, value, path)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        if isinstance(value, str):
            found = field.enum_type.values_by_name.get(value)
            if found is None:
                raise ValueError(f"{value!r} is not a value of enum {field.enum_type.full_name}")
            return found.number
        return int(value)
    if isinstance(value, decimal.Decimal):  # a decimal(20, 0) column of a uint64, or a decimal given for a double
        return (
            float(value)
            if field.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT)
            else int(value)
        )
    return value


# -- one message as Python values (the Iceberg schema modes read record by record) ---------------


def as_dict(message: Any) -> dict:
    """A message as the Python values pyarrow takes for ``arrow_type`` (maps as (key, value) pairs):
    ``columns`` for one message, without building Arrow arrays."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_number[2]
            out[field.name] = [(k, _python(value_field, value[k])) for k in value]
        elif _is_repeated(field):
            out[field.name] = [_python(field, item) for item in value]
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _python(field, value)
    return out


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _python(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is not None:
        name = field.message_type.full_name
        if name == TIMESTAMP:
            return _EPOCH + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
        if name in _WRAPPERS:
            return _python(field.message_type.fields_by_name["value"], value.value)
        return as_dict(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    if field.type in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return decimal.Decimal(value)
    return value
