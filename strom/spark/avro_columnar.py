"""The columnar half of the Avro decoder: many records of one writer schema decoded field by field
for all rows at once with numpy (``Cursor``), and the writer's columns conformed to the reader's
schema by Avro's resolution rules (``conform``). ``strom.spark.avro_columns`` decides which rows
go here and decodes the rest per record with fastavro.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from strom.spark.avro_types import NAMED, Names, full_name, non_null_branches

PAD = 16  # zero bytes after the values, so that a read a few bytes past the last one stays inside
_INT32 = (-(2**31), 2**31 - 1)


class Unsupported(Exception):
    """The columnar decoder does not do this schema or this data: decode the group per record."""


class SchemaUnsupported(Unsupported):
    """The writer schema has a type the columnar decoder does not do: never try it again."""


# -- the columnar decoder ---------------------------------------------------------------------


class Cursor:
    """Read positions of many records in one buffer, decoded field by field for all at once."""

    def __init__(self, buf: np.ndarray, pos: np.ndarray, end: np.ndarray):
        self.buf = buf
        self.limit = len(buf) - PAD
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
            raise Unsupported("more than 2 GiB of strings")
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
            if schema in SIMPLE:
                return SIMPLE[schema](self, rows)
            found, space = names.lookup(schema, namespace)
            return self._named(found, rows, space, names, defined=True)
        if isinstance(schema, list):
            return self._union(schema, rows, namespace, names)
        kind = schema["type"]
        logical = schema.get("logicalType")
        if logical is not None and kind in SIMPLE and logical in _LOGICAL:
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
            raise SchemaUnsupported("an array of nulls")  # items of no bytes: counts cannot be checked
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
            raise Unsupported("more than 2**31 array items in one batch")
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


def _boolean(c: Cursor, rows):
    b = c.fixed_width(rows, 1, "u1")
    if (b > 1).any():
        c.bad[rows[b > 1]] = True
    return pa.array(b == 1)


def _int(c: Cursor, rows):
    v = c.varint(rows)
    out = (v < _INT32[0]) | (v > _INT32[1])
    if out.any():
        c.bad[rows[out]] = True
    return pa.array(v.astype(np.int32))


def _string(c: Cursor, rows):
    binary = c.fixed_bytes(rows, c.varint(rows))
    text = binary.view(pa.string())
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        raise Unsupported("a string that is not UTF-8") from None
    return text


SIMPLE: dict[str, Callable[[Cursor, np.ndarray], pa.Array]] = {
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
        raise Unsupported("a decimal of more than 16 bytes")
    out = np.zeros((n, 16), np.uint8)
    first = data[np.minimum(offsets[:-1], max(len(data) - 1, 0))] if len(data) else np.zeros(n, np.uint8)
    out[(lengths > 0) & ((first & 0x80) != 0)] = 0xFF
    total = int(lengths.sum())
    row = np.repeat(np.arange(n), lengths)
    column = 16 - np.repeat(lengths, lengths) + (np.arange(total) - np.repeat(offsets[:-1] - offsets[0], lengths))
    out[row, column] = data[offsets[0] : offsets[0] + total]
    target = pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    return pa.Array.from_buffers(target, n, [None, pa.py_buffer(np.ascontiguousarray(out[:, ::-1]))])


_LOGICAL: dict[str, Callable[[Cursor, np.ndarray, dict], pa.Array]] = {
    "date": lambda c, rows, s: _int(c, rows).view(pa.date32()),
    "timestamp-millis": lambda c, rows, s: pa.array(c.varint(rows) * 1000).view(pa.timestamp("us", tz="UTC")),
    "timestamp-micros": lambda c, rows, s: pa.array(c.varint(rows)).view(pa.timestamp("us", tz="UTC")),
    "local-timestamp-millis": lambda c, rows, s: pa.array(c.varint(rows) * 1000).view(pa.timestamp("us")),
    "local-timestamp-micros": lambda c, rows, s: pa.array(c.varint(rows)).view(pa.timestamp("us")),
    "uuid": lambda c, rows, s: _string(c, rows),
    "decimal": lambda c, rows, s: _decimal(c.fixed_bytes(rows, c.varint(rows)), s),
}


# -- writer columns to the reader's schema --------------------------------------------------------


def conform(column: pa.Array, writer: Any, reader: Any, target: pa.DataType, names: tuple[Names, Names]) -> pa.Array:
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
            raise Unsupported("a union of several types that differs between writer and reader")
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
                    raise Unsupported(f"reader field {field['name']!r} has no default")
                children.append(_default(field["default"], field["type"], child_type, len(column)))
            else:
                child = column.field(source["name"])
                children.append(conform(child, source["type"], field["type"], child_type, names))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=None if mask is None else pa.array(mask))
    symbols = _enum_symbols(reader, names[1])
    if symbols is not None and column.type == pa.string():
        if not set(column.unique().drop_null().to_pylist()) <= set(symbols):
            raise Unsupported("an enum symbol the reader does not have")
        return column
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Unsupported(f"cannot read {column.type} as {target}: {exc}") from None


def _resolved(schema: Any, names: Names) -> Any:
    """A reference to a named type replaced by its definition (a union's branches too)."""
    if isinstance(schema, str) and schema not in SIMPLE:
        for key, found in names.types.items():
            if key == schema or key.rsplit(".", 1)[-1] == schema:
                return found
    if isinstance(schema, list):
        return [_resolved(b, names) for b in schema]
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return _resolved(schema["type"], names)
    if isinstance(schema, dict) and schema.get("type") not in (*NAMED, *SIMPLE, "array", "map"):
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
        raise Unsupported("a record, array or map default")
    try:
        return pa.array([value] * n, target)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise Unsupported(f"default {value!r}: {exc}") from None
