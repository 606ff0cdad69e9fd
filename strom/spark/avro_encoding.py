"""Rows to Confluent-framed Avro for the sink: a whole Arrow column at once where the schema allows.

``AvroColumnEncoder.encode(column)`` writes every row of a struct column with the registered
schema, prefixed with the magic byte and the schema id. Records of booleans, ints, longs, floats,
doubles, strings, bytes, enums, nested records, unions of null and one of those, dates and
timestamps are encoded column by column with numpy: each field becomes a piece of bytes per row
(a varint is a row of up to ten 7-bit groups, masked to its width), and the pieces are laid side
by side into the rows in one gather. A schema with anything else (arrays, maps, fixed, decimals,
unions of several types) is written row by row with fastavro, as is a column whose values do
not fit the fast path; the bytes are the same either way (fastavro's are what the test checks).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from strom.spark.avro_types import Names, collect_names, full_name, non_null_branches


class _Unsupported(Exception):
    """This schema or column is written row by row."""


class AvroColumnEncoder:
    def __init__(self, schema_text: str, schema_id: int):
        import json

        from strom.spark.avro_columns import parse

        self.schema = json.loads(schema_text)
        self.parsed = parse(schema_text)
        self.prefix = b"\x00" + int(schema_id).to_bytes(4, "big")
        self.names = collect_names(self.schema)
        self.columnar = True

    def encode(self, column: pa.Array) -> list[bytes | None]:
        """The framed bytes of every row (None for a null row)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if self.columnar:
            try:
                return self._columnar(column)
            except _Unsupported:
                pass
        return [self._row(row) for row in column.to_pylist()]

    def _row(self, row: Any) -> bytes | None:
        from fastavro import schemaless_writer

        if row is None:
            return None
        out = io.BytesIO()
        out.write(self.prefix)
        schemaless_writer(out, self.parsed, _unshape(row, self.schema, None, self.names))
        return out.getvalue()

    def _columnar(self, column: pa.Array) -> list[bytes | None]:
        n = len(column)
        present = _valid(column)
        pieces = [_Piece(np.tile(np.frombuffer(self.prefix, np.uint8), n), np.full(n, 5, np.int64))]
        try:
            _encode(self.schema, column, present, None, self.names, pieces, "value")
        except _SchemaUnsupported:
            self.columnar = False
            raise
        written = [piece.written(present) for piece in pieces]
        sizes = np.sum(written, axis=0)
        bounds = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=bounds[1:])
        out = np.zeros(int(bounds[-1]), np.uint8)
        at = bounds[:-1].copy()  # where each row's next piece goes
        for piece, lengths in zip(pieces, written):
            starts = np.zeros(n + 1, np.int64)
            np.cumsum(piece.lengths, out=starts[1:])
            within = _within(lengths)
            out[np.repeat(at, lengths) + within] = piece.data[np.repeat(starts[:-1], lengths) + within]
            at += lengths
        data = out.tobytes()
        offsets = bounds.tolist()
        rows: list[bytes | None] = [data[offsets[i] : offsets[i + 1]] for i in range(n)]
        if not present.all():
            rows = [row if keep else None for row, keep in zip(rows, present.tolist())]
        return rows


class _SchemaUnsupported(_Unsupported):
    """The schema has a type the columnar encoder does not write: row by row from now on."""


class _Piece:
    """Bytes of one field for every row: ``data`` holds each row's ``lengths`` bytes one after the
    other; only the rows in ``present`` (None: all) are written."""

    def __init__(self, data: np.ndarray, lengths: np.ndarray, present: np.ndarray | None = None):
        self.data = data
        self.lengths = lengths
        self.present = present

    def written(self, rows: np.ndarray) -> np.ndarray:
        """The bytes each row gets of this piece, for the rows that are written at all."""
        keep = rows if self.present is None else rows & self.present
        return np.where(keep, self.lengths, 0)


def _within(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ... lengths[i]-1 for each row, concatenated."""
    total = int(lengths.sum())
    starts = np.zeros(len(lengths), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)


def _valid(column: pa.Array) -> np.ndarray:
    if column.null_count == 0:
        return np.ones(len(column), bool)
    return np.asarray(column.is_valid(), dtype=bool)


def _varints(values: np.ndarray, present: np.ndarray) -> _Piece:
    """Zig-zag varints of int64 ``values``; rows not ``present`` get no bytes."""
    v = values.astype(np.int64)
    zz = ((v << 1) ^ (v >> 63)).view(np.uint64)
    shifts = np.arange(10, dtype=np.uint64) * np.uint64(7)
    groups = (zz[:, None] >> shifts[None, :]) & np.uint64(0x7F)
    width = np.ones(len(v), np.int64)
    for k in range(1, 10):
        width += zz >= (np.uint64(1) << np.uint64(7 * k))
    width = np.where(present, width, 0)
    more = np.arange(10)[None, :] < (width[:, None] - 1)
    groups = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    return _Piece(groups[np.arange(10)[None, :] < width[:, None]], width)


def _encode(schema: Any, column: pa.Array, present: np.ndarray, namespace, names: Names, out: list, path: str) -> None:
    """Append the pieces of ``schema``'s encoding of ``column`` (rows not ``present`` write nothing)."""
    if isinstance(schema, str) and schema not in _PRIMITIVES:
        found, space = names.lookup(schema, namespace)
        return _encode(found, column, present, space, names, out, path)
    if isinstance(schema, list):
        members = non_null_branches(schema)
        if len(members) != 1 or len(schema) != 2:
            raise _SchemaUnsupported("a union of several types")
        null_at = next(i for i, b in enumerate(schema) if b not in members)
        valid = _valid(column) & present
        out.append(_varints(np.where(valid, 1 - null_at, null_at), present))
        return _encode(members[0], column, valid, namespace, names, out, path)
    if present.any() and not (_valid(column) | ~present).all():
        raise ValueError(f"{path}: a null where the schema has no null")
    kind = schema if isinstance(schema, str) else schema.get("type")
    logical = None if isinstance(schema, str) else schema.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _encode(kind, column, present, namespace, names, out, path)
    if kind in ("record", "error"):
        _, space = full_name(schema, namespace)
        if not pa.types.is_struct(column.type):
            raise _Unsupported(f"{path}: not a struct")
        fields = {column.type.field(i).name: i for i in range(column.type.num_fields)}
        for field in schema["fields"]:
            if field["name"] not in fields:
                raise _Unsupported(f"{path}.{field['name']} is not a column")
            child = column.field(fields[field["name"]])
            _encode(field["type"], child, present, space, names, out, f"{path}.{field['name']}")
        return None
    if kind == "enum":
        symbols = pa.array(schema["symbols"], pa.string())
        index = pc.index_in(column.cast(pa.string()), value_set=symbols)
        if (np.asarray(index.is_null(), dtype=bool) & present).any():
            raise _Unsupported(f"{path}: a value that is not a symbol")
        out.append(_varints(index.fill_null(0).to_numpy(zero_copy_only=False), present))
        return None
    if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros"):
        if not pa.types.is_timestamp(column.type):
            raise _Unsupported(f"{path}: not a timestamp")
        micros = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64()).fill_null(0).to_numpy()
        values = micros // 1000 if logical.endswith("millis") else micros
        out.append(_varints(values, present))
        return None
    if logical == "date":
        if not pa.types.is_date32(column.type):
            raise _Unsupported(f"{path}: not a date")
        out.append(_varints(column.cast(pa.int32()).fill_null(0).to_numpy(), present))
        return None
    if logical is not None and logical != "uuid":
        raise _SchemaUnsupported(f"logical type {logical}")
    if kind in ("int", "long"):
        if not pa.types.is_integer(column.type):
            raise _Unsupported(f"{path}: not an integer")
        values = column.cast(pa.int64()).fill_null(0).to_numpy()
        if kind == "int" and ((values < -(2**31)) | (values >= 2**31))[present].any():
            raise ValueError(f"{path}: a value out of an Avro int's range")
        out.append(_varints(values, present))
        return None
    if kind == "boolean":
        values = column.cast(pa.bool_()).fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        out.append(_Piece(values, np.ones(len(values), np.int64), present))
        return None
    if kind in ("float", "double"):
        width, dtype = (4, "<f4") if kind == "float" else (8, "<f8")
        values = column.cast(pa.float64()).fill_null(0).to_numpy().astype(dtype)
        out.append(_Piece(values.view(np.uint8), np.full(len(values), width, np.int64), present))
        return None
    if kind in ("string", "bytes"):
        binary = column.cast(pa.binary()) if not pa.types.is_binary(column.type) else column
        _, offsets_buffer, data_buffer = binary.buffers()
        n = len(binary)
        offsets = np.frombuffer(offsets_buffer, np.int32)[binary.offset : binary.offset + n + 1].astype(np.int64)
        lengths = np.diff(offsets)
        out.append(_varints(lengths, present))
        data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        out.append(_Piece(data[offsets[0] : offsets[-1]], lengths, present))
        return None
    if kind == "null":
        return None
    raise _SchemaUnsupported(f"{kind}")


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _unshape(value: Any, schema: Any, namespace, names: Names) -> Any:
    """Arrow's Python value of a Spark-shaped column as fastavro writes it: a map's list of pairs
    as a dict, a union's struct<member0, member1, ...> as the one member that is set."""
    if value is None:
        return None
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return value
        found, space = names.lookup(schema, namespace)
        return _unshape(value, found, space, names)
    if isinstance(schema, list):
        members = non_null_branches(schema)
        if len(members) == 1:
            return _unshape(value, members[0], namespace, names)
        if isinstance(value, dict) and set(value) == {f"member{i}" for i in range(len(members))}:
            for i, member in enumerate(members):
                if value[f"member{i}"] is not None:
                    return _unshape(value[f"member{i}"], member, namespace, names)
            return None
        return value  # int|long and float|double: one Spark column
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _unshape(value, kind, namespace, names)
    if kind in ("record", "error"):
        _, space = full_name(schema, namespace)
        return {f["name"]: _unshape(value.get(f["name"]), f["type"], space, names) for f in schema["fields"]}
    if kind == "array":
        return [_unshape(v, schema["items"], namespace, names) for v in value]
    if kind == "map":
        pairs = value.items() if isinstance(value, dict) else value
        return {k: _unshape(v, schema["values"], namespace, names) for k, v in pairs}
    return value
