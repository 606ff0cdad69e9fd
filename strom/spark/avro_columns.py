"""Confluent-framed Avro values to one Arrow column, in bulk (the sink's way back is
``strom.spark.avro_encoding``).

A value in Confluent's wire format is the magic byte 0, the writer schema's id (4 bytes,
big-endian) and the Avro binary body. ``AvroColumnDecoder.decode`` turns a binary column of them
into a column of the reader schema's Spark type (``strom.spark.avro_types``), with the rows that
do not decode marked, so that the source can fail the query or keep their bytes (``mode``).

Rows are grouped by writer schema id; each group is decoded in one of two ways:

* **columnar** (every type but arrays of nulls and recursive records): the fields are decoded
  one after the other for all rows of the group at once with numpy (each row's read position in
  an array, varints a few array operations a byte width), so a 10-field record costs a few dozen
  numpy calls per batch instead of a Python call per field per row. Arrays and maps are decoded
  item position by item position (item k of every row that has one, at once), then put in row
  order. The writer's columns are then conformed to the reader's schema as Avro
  resolution says (fields matched by name or alias, missing ones from their defaults, int read
  as long, float as double ...).
* **per record with fastavro** (any group the columnar path cannot take: a string that is not
  UTF-8, an enum symbol the reader lacks, a record default, a corrupt value): ``fastavro.schemaless_reader`` with the writer and reader
  schemas, which also tells which rows are corrupt and why.

A record is corrupt when its prefix is missing, its id is not registered, its body runs past
the value or leaves bytes over, or a union branch, enum index or boolean is out of range.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from strom.spark.avro_types import NAMED, Names, collect_names, full_name, non_null_branches

_PAD = 16  # zero bytes after the values, so that a read a few bytes past the last one stays inside
_INT32 = (-(2**31), 2**31 - 1)


class Decoded(NamedTuple):
    column: pa.Array  # the reader's type; null where the value was null or did not decode
    bad: np.ndarray  # bool per row: the value did not decode
    reasons: dict[int, str]  # row -> why, for the first bad rows


class _Unsupported(Exception):
    """The columnar decoder does not do this schema or this data: decode the group per record."""


def parse(schema_text: str):
    """fastavro's parsed form of a schema text (raises ValueError when it does not parse)."""
    import fastavro

    return fastavro.parse_schema(json.loads(schema_text))


class AvroColumnDecoder:
    """Decodes framed values for one reader schema; writer schemas come from ``writer_schema(id)``,
    which returns the schema text or raises LookupError for an unknown id."""

    def __init__(self, reader_text: str, arrow_type: pa.DataType, writer_schema: Callable[[int], str]):
        self.reader_text = reader_text
        self.reader_json = json.loads(reader_text)
        self.reader = parse(reader_text)
        self.reader_names = collect_names(self.reader_json)
        self.arrow_type = arrow_type
        self._writer_schema = writer_schema
        self._writers: dict[int, tuple[Any, Any] | None] = {}  # id -> (json, parsed), None: unknown
        self._columnar: dict[int, bool] = {}

    def _writer(self, schema_id: int):
        if schema_id not in self._writers:
            try:
                text = self._writer_schema(schema_id)
                self._writers[schema_id] = (json.loads(text), parse(text))
            except LookupError:
                self._writers[schema_id] = None
        return self._writers[schema_id]

    def decode(self, values: pa.Array) -> Decoded:
        n = len(values)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.type != pa.binary():
            values = values.cast(pa.binary())
        validity, offsets_buffer, data_buffer = values.buffers()
        offsets = np.frombuffer(offsets_buffer, np.int32)[values.offset : values.offset + n + 1].astype(np.int64)
        raw = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        buf = np.concatenate([raw[: offsets[-1] if n else 0], np.zeros(_PAD, np.uint8)])
        present = ~np.asarray(values.is_null(), dtype=bool) if values.null_count else np.ones(n, bool)
        starts, ends = offsets[:-1], offsets[1:]
        bad = np.zeros(n, bool)
        reasons: dict[int, str] = {}
        framed = present & (ends - starts >= 5)
        framed[framed] = buf[starts[framed]] == 0
        for row in np.flatnonzero(present & ~framed)[:5].tolist():
            reasons[row] = "no Confluent schema id prefix (magic byte 0 and a 4-byte id)"
        bad |= present & ~framed
        ids = np.zeros(n, np.int64)
        rows = np.flatnonzero(framed)
        if rows.size:
            head = starts[rows] + 1
            ids[rows] = (
                (buf[head].astype(np.int64) << 24)
                | (buf[head + 1].astype(np.int64) << 16)
                | (buf[head + 2].astype(np.int64) << 8)
                | buf[head + 3].astype(np.int64)
            )
        pieces: list[pa.Array] = []
        index = np.full(n, -1, np.int64)  # row -> its place in the concatenated pieces; -1: null
        placed = 0
        for schema_id in np.unique(ids[rows]).tolist():
            group = rows[ids[rows] == schema_id]
            writer = self._writer(schema_id)
            if writer is None:
                bad[group] = True
                for row in group[:5].tolist():
                    reasons.setdefault(row, f"schema id {schema_id} is not registered")
                continue
            column, group_bad, group_reasons = self._decode_group(schema_id, writer, values, buf, starts, ends, group)
            bad[group] = group_bad
            for i, why in group_reasons.items():
                reasons.setdefault(int(group[i]), why)
            good = ~group_bad
            index[group[good]] = placed + np.flatnonzero(good)
            pieces.append(column)
            placed += len(column)
        pieces.append(pa.nulls(1, self.arrow_type))
        index[index < 0] = placed
        whole = pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]
        if placed == 0:
            column = pa.nulls(n, self.arrow_type)
        elif n == placed and (index == np.arange(n)).all():
            column = whole.slice(0, n)
        else:
            column = whole.take(pa.array(index))
        return Decoded(column, bad, dict(sorted(reasons.items())[:5]))

    def _decode_group(self, schema_id, writer, values, buf, starts, ends, group):
        writer_json, writer_parsed = writer
        if self._columnar.get(schema_id, True):
            try:
                cursor = _Cursor(buf, starts[group] + 5, ends[group])
                decoded = cursor.decode(writer_json, np.arange(len(group)), None, Names())
                done = cursor.pos == cursor.end
                if not done.all() or cursor.bad.any():
                    raise _Unsupported("some rows do not decode")  # the per-record path tells which and why
                names = (collect_names(writer_json), self.reader_names)
                column = _conform(decoded, writer_json, self.reader_json, self.arrow_type, names)
                return column, np.zeros(len(group), bool), {}
            except _Unsupported as exc:
                if isinstance(exc, _SchemaUnsupported):
                    self._columnar[schema_id] = False
        return self._per_record(writer_parsed, values, group)

    def _per_record(self, writer_parsed, values: pa.Array, group: np.ndarray):
        from fastavro import schemaless_reader

        out: list = []
        bad = np.zeros(len(group), bool)
        reasons: dict[int, str] = {}
        shape = _Shaper(self.reader_json)
        taken = values.take(pa.array(group)).to_pylist()
        for i, raw in enumerate(taken):
            stream = io.BytesIO(raw)
            stream.seek(5)
            try:
                record = schemaless_reader(stream, writer_parsed, self.reader)
                if stream.tell() != len(raw):
                    raise ValueError(f"{len(raw) - stream.tell()} bytes left over after the record")
                out.append(shape(record))
            except Exception as exc:  # noqa: BLE001 - any failure to decode marks the row, with its reason
                bad[i] = True
                out.append(None)
                if len(reasons) < 5:
                    reasons[i] = f"{type(exc).__name__}: {exc}"
        try:
            column = pa.array(out, self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            # one row's value does not fit the Spark type (a decimal beyond its precision ...): find it
            column_rows = []
            for i, value in enumerate(out):
                try:
                    column_rows.append(pa.array([value], self.arrow_type))
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
                    bad[i] = True
                    reasons.setdefault(i, f"does not fit {self.arrow_type}: {exc}")
                    column_rows.append(pa.nulls(1, self.arrow_type))
            column = pa.concat_arrays(column_rows)
        return column, bad, reasons


class _SchemaUnsupported(_Unsupported):
    """The writer schema has a type the columnar decoder does not do: never try it again."""


# -- the columnar decoder ---------------------------------------------------------------------


class _Cursor:
    """Read positions of many records in one buffer, decoded field by field for all at once."""

    def __init__(self, buf: np.ndarray, pos: np.ndarray, end: np.ndarray):
        self.buf = buf
        self.limit = len(buf) - _PAD
        self.pos = pos.astype(np.int64)
        self.end = end.astype(np.int64)
        self.bad = np.zeros(len(pos), bool)

    def varint(self, rows: np.ndarray) -> np.ndarray:
        """The zig-zag varint at each row's position (rows: indices into the cursor), moving past it.

        Byte k of every row is read at once, for all rows while many go on (a masked step is
        cheaper than indexing the few), for the remaining ones only when they are few.
        """
        p = np.minimum(self.pos[rows], self.limit)
        b = self.buf[p]
        value = (b & 0x7F).astype(np.int64)
        going = b >= 0x80
        width = np.ones(len(rows), np.int64)
        k = 1
        while True:
            left = int(np.count_nonzero(going))
            if not left:
                break
            if k >= 10:
                self.bad[rows[going]] = True
                break
            if left * 8 >= len(rows):
                nxt = self.buf[np.minimum(p + k, self.limit)]
                value |= np.where(going, (nxt & 0x7F).astype(np.int64) << (7 * k), 0)
                width += going
                going &= nxt >= 0x80
            else:
                at = np.flatnonzero(going)
                nxt = self.buf[np.minimum(p[at] + k, self.limit)]
                value[at] |= (nxt & 0x7F).astype(np.int64) << (7 * k)
                width[at] += 1
                going[at] = nxt >= 0x80
            k += 1
        self.pos[rows] = p + width
        return (value.view(np.uint64) >> np.uint64(1)).view(np.int64) ^ -(value & 1)

    def fixed_bytes(self, rows: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
        """``lengths`` bytes at each row's position as a binary array, moving past them."""
        starts = np.minimum(self.pos[rows], self.limit)
        room = np.maximum(self.end[rows] - starts, 0)
        over = (lengths < 0) | (lengths > room)
        if over.any():
            self.bad[rows[over]] = True
            lengths = np.where(over, 0, lengths)
        self.pos[rows] = starts + lengths
        bounds = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        total = int(bounds[-1])
        if total >= 2**31:
            raise _Unsupported("more than 2 GiB of strings")
        gather = np.arange(total, dtype=np.int64) + np.repeat(starts - bounds[:-1], lengths)
        data = self.buf[gather]
        return pa.BinaryArray.from_buffers(
            pa.binary(), len(rows), [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(data)]
        )

    def fixed_width(self, rows: np.ndarray, width: int, dtype: str) -> np.ndarray:
        p = np.minimum(self.pos[rows], self.limit)
        if width == 1:
            out = self.buf[p].copy()
        else:
            out = self.buf[p[:, None] + np.arange(width)].reshape(-1).view(dtype)
        self.pos[rows] = p + width
        return out

    def decode(self, schema: Any, rows: np.ndarray, namespace: str | None, names: Names) -> pa.Array:
        """The values of ``schema`` at ``rows``' positions, in the writer's own Spark shape."""
        if isinstance(schema, str):
            if schema in _SIMPLE:
                return _SIMPLE[schema](self, rows)
            found, space = names.lookup(schema, namespace)
            return self._named(found, rows, space, names, defined=True)
        if isinstance(schema, list):
            return self._union(schema, rows, namespace, names)
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None and kind in _SIMPLE and logical in _LOGICAL:
            return _LOGICAL[logical](self, rows, schema)
        if logical == "decimal" and kind == "fixed":
            names.types[full_name(schema, namespace)[0]] = schema
            return _decimal(self.fixed_bytes(rows, np.full(len(rows), int(schema["size"]))), schema)
        if kind in NAMED:
            return self._named(schema, rows, namespace, names, defined=False)
        if kind == "array":
            return self._blocks(schema["items"], rows, namespace, names, keyed=False)
        if kind == "map":
            return self._blocks(schema["values"], rows, namespace, names, keyed=True)
        return self.decode(kind, rows, namespace, names)

    def _blocks(self, items: Any, rows: np.ndarray, namespace, names: Names, keyed: bool) -> pa.Array:
        """An array (or map) for every row: blocks of a count (negative: then a byte size too)
        and that many items (map entries: a key string first), until a count of 0.

        Item k of the current block is decoded for all rows that have one at once, so the work is
        a numpy pass per item position, not per item; the items are then put in row order.
        """
        if items == "null" or (isinstance(items, dict) and items.get("type") == "null"):
            raise _SchemaUnsupported("an array of nulls")  # items of no bytes: counts cannot be checked
        n = len(rows)
        counts = np.zeros(n, np.int64)
        pieces = [(np.zeros(0, np.int64), np.zeros(0, np.int64), self.decode(items, rows[:0], namespace, names))]
        key_pieces = [_string(self, rows[:0])] if keyed else []
        active = np.arange(n)
        while active.size:
            count = self.varint(rows[active])
            sized = count < 0
            if sized.any():
                count = np.abs(count)
                self.varint(rows[active[sized]])  # the block's byte size, not needed
            room = self.end[rows[active]] - self.pos[rows[active]]
            over = count > np.maximum(room, 0)  # every item takes a byte at least
            if over.any():
                self.bad[rows[active[over]]] = True
                count[over] = 0
            going = count > 0
            active, count = active[going], count[going]
            base = counts[active]
            for k in range(int(count.max()) if count.size else 0):
                chosen = count > k
                sub = active[chosen]
                if keyed:
                    key_pieces.append(_string(self, rows[sub]))
                pieces.append((sub, base[chosen] + k, self.decode(items, rows[sub], namespace, names)))
            counts[active] += count
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        if offsets[-1] >= 2**31:
            raise _Unsupported("more than 2**31 array items in one batch")
        where = np.concatenate([offsets[sub] + index for sub, index, _ in pieces])
        order = pa.array(np.argsort(where, kind="stable"))
        values = pa.concat_arrays([column for _, _, column in pieces]).take(order)
        bounds = pa.array(offsets.astype(np.int32))
        if keyed:
            keys = pa.concat_arrays(key_pieces).take(order)
            return pa.MapArray.from_arrays(bounds, keys, values)
        return pa.ListArray.from_arrays(bounds, values)

    def _named(self, schema: dict, rows, namespace, names: Names, defined: bool) -> pa.Array:
        key, space = full_name(schema, namespace)
        if not defined:
            names.types[key] = schema
        kind = schema["type"]
        if kind == "enum":
            symbols = schema["symbols"]
            index = self.varint(rows)
            out = (index < 0) | (index >= len(symbols))
            if out.any():
                self.bad[rows[out]] = True
                index = np.where(out, 0, index)
            return pa.array(symbols, pa.string()).take(pa.array(index))
        if kind == "fixed":
            return self.fixed_bytes(rows, np.full(len(rows), int(schema["size"]), np.int64))
        children = [self.decode(f["type"], rows, space, names) for f in schema.get("fields", [])]
        names_ = [f["name"] for f in schema.get("fields", [])]
        if not children:
            return pa.StructArray.from_arrays([], fields=[], mask=pa.array(np.zeros(len(rows), bool)))
        return pa.StructArray.from_arrays(children, names=names_)

    def _union(self, branches: list, rows: np.ndarray, namespace, names: Names) -> pa.Array:
        branch = self.varint(rows)
        out = (branch < 0) | (branch >= len(branches))
        if out.any():
            self.bad[rows[out]] = True
            branch = np.where(out, 0, branch)
        members = non_null_branches(branches)
        decoded = []
        for j, schema in enumerate(branches):
            if schema in members:
                sub = np.flatnonzero(branch == j)
                decoded.append((sub, self.decode(schema, rows[sub], namespace, names)))
        if len(members) == 1:
            sub, column = decoded[0]
            return _scatter(column, sub, len(rows))
        simple = {str(m) for m in members if isinstance(m, str)}
        if len(simple) == len(members) and (simple <= {"int", "long"} or simple <= {"float", "double"}):
            target = pa.int64() if simple <= {"int", "long"} else pa.float64()
            column = pa.concat_arrays([c.cast(target) for _, c in decoded])
            where = np.concatenate([s for s, _ in decoded])
            return _scatter(column, where, len(rows), order=True)
        valid = np.zeros(len(rows), bool)
        for sub, _ in decoded:
            valid[sub] = True
        children = [_scatter(column, sub, len(rows)) for sub, column in decoded]
        return pa.StructArray.from_arrays(
            children, names=[f"member{i}" for i in range(len(children))], mask=pa.array(~valid)
        )


def _scatter(column: pa.Array, where: np.ndarray, n: int, order: bool = False) -> pa.Array:
    """An array of ``n`` rows holding ``column``'s values at rows ``where``, null elsewhere."""
    if len(where) == n and not order:
        return column
    index = np.zeros(n, np.int64)
    index[where] = np.arange(len(where))
    mask = np.ones(n, bool)
    mask[where] = False
    return column.take(pa.array(index, mask=mask))


def _boolean(c: _Cursor, rows):
    b = c.fixed_width(rows, 1, "u1")
    if (b > 1).any():
        c.bad[rows[b > 1]] = True
    return pa.array(b == 1)


def _int(c: _Cursor, rows):
    v = c.varint(rows)
    out = (v < _INT32[0]) | (v > _INT32[1])
    if out.any():
        c.bad[rows[out]] = True
    return pa.array(v.astype(np.int32))


def _string(c: _Cursor, rows):
    binary = c.fixed_bytes(rows, c.varint(rows))
    text = binary.view(pa.string())
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        raise _Unsupported("a string that is not UTF-8") from None
    return text


_SIMPLE: dict[str, Callable[[_Cursor, np.ndarray], pa.Array]] = {
    "null": lambda c, rows: pa.nulls(len(rows)),
    "boolean": _boolean,
    "int": _int,
    "long": lambda c, rows: pa.array(c.varint(rows)),
    "float": lambda c, rows: pa.array(c.fixed_width(rows, 4, "<f4")),
    "double": lambda c, rows: pa.array(c.fixed_width(rows, 8, "<f8")),
    "bytes": lambda c, rows: c.fixed_bytes(rows, c.varint(rows)),
    "string": _string,
}


def _decimal(binary: pa.BinaryArray, schema: dict) -> pa.Array:
    """Big-endian two's complement bytes (as Avro writes decimals) to Arrow's 16-byte little-endian
    decimal128, for all rows at once: right-aligned, sign-extended, reversed."""
    n = len(binary)
    _, offsets_buffer, data_buffer = binary.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32)[binary.offset : binary.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    if (lengths > 16).any():
        raise _Unsupported("a decimal of more than 16 bytes")
    out = np.zeros((n, 16), np.uint8)
    first = data[np.minimum(offsets[:-1], max(len(data) - 1, 0))] if len(data) else np.zeros(n, np.uint8)
    out[(lengths > 0) & ((first & 0x80) != 0)] = 0xFF
    total = int(lengths.sum())
    row = np.repeat(np.arange(n), lengths)
    column = 16 - np.repeat(lengths, lengths) + (np.arange(total) - np.repeat(offsets[:-1] - offsets[0], lengths))
    out[row, column] = data[offsets[0] : offsets[0] + total]
    target = pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    return pa.Array.from_buffers(target, n, [None, pa.py_buffer(np.ascontiguousarray(out[:, ::-1]))])


_LOGICAL: dict[str, Callable[[_Cursor, np.ndarray, dict], pa.Array]] = {
    "date": lambda c, rows, s: _int(c, rows).view(pa.date32()),
    "timestamp-millis": lambda c, rows, s: pa.array(c.varint(rows) * 1000).view(pa.timestamp("us", tz="UTC")),
    "timestamp-micros": lambda c, rows, s: pa.array(c.varint(rows)).view(pa.timestamp("us", tz="UTC")),
    "local-timestamp-millis": lambda c, rows, s: pa.array(c.varint(rows) * 1000).view(pa.timestamp("us")),
    "local-timestamp-micros": lambda c, rows, s: pa.array(c.varint(rows)).view(pa.timestamp("us")),
    "uuid": lambda c, rows, s: _string(c, rows),
    "decimal": lambda c, rows, s: _decimal(c.fixed_bytes(rows, c.varint(rows)), s),
}


# -- writer columns to the reader's schema --------------------------------------------------------


def _conform(column: pa.Array, writer: Any, reader: Any, target: pa.DataType, names: tuple[Names, Names]) -> pa.Array:
    """The writer's decoded column as the reader's type, by Avro's resolution rules."""
    writer, reader = _resolved(writer, names[0]), _resolved(reader, names[1])
    if _same(writer, reader):
        if column.type == target:
            return column
        try:
            return column.cast(target)  # the same schema: only the fields' nullability differs
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if pa.types.is_struct(target) and pa.types.is_struct(column.type):
        reader_record = _record_of(reader, names[1])
        writer_record = _record_of(writer, names[0])
        if reader_record is None or writer_record is None:
            raise _Unsupported("a union of several types that differs between writer and reader")
        by_name = {f["name"]: f for f in writer_record["fields"]}
        mask = np.asarray(column.is_null(), dtype=bool) if column.null_count else None
        children = []
        for i, field in enumerate(reader_record["fields"]):
            child_type = target.field(i).type
            source = next(
                (by_name[n] for n in [field["name"], *field.get("aliases", [])] if n in by_name),
                None,
            )
            if source is None:
                if "default" not in field:
                    raise _Unsupported(f"reader field {field['name']!r} has no default")
                children.append(_default(field["default"], field["type"], child_type, len(column)))
            else:
                child = column.field(source["name"])
                children.append(_conform(child, source["type"], field["type"], child_type, names))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=None if mask is None else pa.array(mask))
    symbols = _enum_symbols(reader, names[1])
    if symbols is not None and column.type == pa.string():
        if not set(column.unique().drop_null().to_pylist()) <= set(symbols):
            raise _Unsupported("an enum symbol the reader does not have")
        return column
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unsupported(f"cannot read {column.type} as {target}: {exc}") from None


def _resolved(schema: Any, names: Names) -> Any:
    """A reference to a named type replaced by its definition (a union's branches too)."""
    if isinstance(schema, str) and schema not in _SIMPLE:
        for key, found in names.types.items():
            if key == schema or key.rsplit(".", 1)[-1] == schema:
                return found
    if isinstance(schema, list):
        return [_resolved(b, names) for b in schema]
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return _resolved(schema["type"], names)
    if isinstance(schema, dict) and schema.get("type") not in (*NAMED, *_SIMPLE, "array", "map"):
        return _resolved(schema["type"], names)
    return schema


def _same(writer: Any, reader: Any) -> bool:
    return writer == reader


def _record_of(schema: Any, names: Names) -> dict | None:
    schema = _resolved(schema, names)
    if isinstance(schema, list):
        branches = non_null_branches(schema)
        return _record_of(branches[0], names) if len(branches) == 1 else None
    if isinstance(schema, dict) and schema.get("type") in ("record", "error"):
        return schema
    return None


def _enum_symbols(schema: Any, names: Names) -> list | None:
    schema = _resolved(schema, names)
    if isinstance(schema, list):
        branches = non_null_branches(schema)
        return _enum_symbols(branches[0], names) if len(branches) == 1 else None
    if isinstance(schema, dict) and schema.get("type") == "enum":
        return schema["symbols"]
    return None


def _default(value: Any, schema: Any, target: pa.DataType, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, target)
    branch = schema[0] if isinstance(schema, list) else schema
    kind = branch.get("type") if isinstance(branch, dict) else branch
    if kind in ("bytes", "fixed") and isinstance(value, str):
        value = value.encode("latin-1")  # Avro writes byte defaults as strings of code points 0-255
    if isinstance(value, (dict, list)):
        raise _Unsupported("a record, array or map default")
    try:
        return pa.array([value] * n, target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise _Unsupported(f"default {value!r}: {exc}") from None


# -- fastavro's records to Spark's shape -----------------------------------------------------------


class _Shaper:
    """Turns fastavro's Python values into what ``pa.array`` takes for the Spark type: a union of
    several types becomes {"memberN": value}, a map a list of pairs, a UUID its string."""

    def __init__(self, reader: Any):
        self.reader = reader
        self.needed = _needs_shaping(reader, set())
        self.names = collect_names(reader)

    def __call__(self, record: Any) -> Any:
        if not self.needed:
            return record
        return _shape(record, self.reader, None, self.names)


def _needs_shaping(schema: Any, seen: set) -> bool:
    if isinstance(schema, list):
        members = non_null_branches(schema)
        if len(members) > 1:
            return True
        return any(_needs_shaping(m, seen) for m in members)
    if isinstance(schema, dict):
        kind = schema.get("type")
        if schema.get("logicalType") == "uuid" or kind == "map":
            return True
        if kind in ("record", "error"):
            if id(schema) in seen:
                return False
            seen.add(id(schema))
            return any(_needs_shaping(f["type"], seen) for f in schema.get("fields", []))
        if kind == "array":
            return _needs_shaping(schema["items"], seen)
        if isinstance(kind, (dict, list)):
            return _needs_shaping(kind, seen)
    return False


def _shape(value: Any, schema: Any, namespace: str | None, names: Names) -> Any:
    if value is None:
        return None
    if isinstance(schema, str):
        if schema in _SIMPLE:
            return value
        found, space = names.lookup(schema, namespace)
        return _shape_named(value, found, space, names, defined=True)
    if isinstance(schema, list):
        members = non_null_branches(schema)
        if len(members) == 1:
            return _shape(value, members[0], namespace, names)
        simple = {str(m) for m in members if isinstance(m, str)}
        if len(simple) == len(members) and (simple <= {"int", "long"} or simple <= {"float", "double"}):
            return value
        for i, member in enumerate(members):
            if _python_matches(value, member, namespace, names):
                return {f"member{i}": _shape(value, member, namespace, names)}
        return None
    kind = schema.get("type")
    if schema.get("logicalType") == "uuid":
        return str(value) if isinstance(value, uuid.UUID) else value
    if kind in NAMED:
        return _shape_named(value, schema, namespace, names, defined=False)
    if kind == "array":
        return [_shape(v, schema["items"], namespace, names) for v in value]
    if kind == "map":
        return [(k, _shape(v, schema["values"], namespace, names)) for k, v in value.items()]
    if isinstance(kind, (dict, list)) or kind in _SIMPLE:
        return _shape(value, kind, namespace, names)
    return value


def _shape_named(value: Any, schema: dict, namespace, names: Names, defined: bool) -> Any:
    key, space = full_name(schema, namespace)
    if not defined:
        names.types[key] = schema
    if schema["type"] not in ("record", "error"):
        return value
    return {f["name"]: _shape(value.get(f["name"]), f["type"], space, names) for f in schema["fields"]}


def _python_matches(value: Any, schema: Any, namespace, names: Names) -> bool:
    """Whether fastavro's ``value`` is of the union branch ``schema`` (the first that fits wins)."""
    kind = schema if isinstance(schema, str) else schema.get("type")
    if isinstance(kind, str) and kind not in _SIMPLE and kind not in NAMED and kind not in ("array", "map"):
        try:
            kind = names.lookup(kind, namespace)[0]["type"]
        except Exception:  # noqa: BLE001 - an unknown name matches nothing
            return False
    checks = {
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, float),
        "double": lambda v: isinstance(v, float),
        "string": lambda v: isinstance(v, str),
        "enum": lambda v: isinstance(v, str),
        "bytes": lambda v: isinstance(v, bytes),
        "fixed": lambda v: isinstance(v, bytes),
        "record": lambda v: isinstance(v, dict),
        "error": lambda v: isinstance(v, dict),
        "map": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
    }
    check = checks.get(kind) if isinstance(kind, str) else None
    return bool(check and check(value))
