"""Confluent-framed Avro values to one Arrow column, in bulk (the sink's way back is
``strom.spark.avro_encoding``).

A value in Confluent's wire format is the magic byte 0, the writer schema's id (4 bytes,
big-endian) and the Avro binary body. ``AvroColumnDecoder.decode`` turns a binary column of them
into a column of the reader schema's Spark type (``strom.spark.avro_types``), with the rows that
do not decode marked, so that the source can fail the query or keep their bytes (``mode``).

Rows are grouped by writer schema id; each group is decoded in one of two ways:

* **columnar** (``strom.spark.avro_columnar``; every type but arrays of nulls and recursive
  records): the fields are decoded one after the other for all rows of the group at once with
  numpy, so a 10-field record costs a few dozen numpy calls per batch instead of a Python call
  per field per row; the writer's columns are then conformed to the reader's schema as Avro
  resolution says (fields matched by name or alias, missing ones from their defaults, int read
  as long ...).
* **per record with fastavro** (any group the columnar path cannot take: a string that is not
  UTF-8, an enum symbol the reader lacks, a record default, a corrupt value):
  ``fastavro.schemaless_reader`` with the writer and reader schemas, which also tells which rows
  are corrupt and why.

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

from strom.spark.avro_columnar import PAD, SIMPLE, Cursor, SchemaUnsupported, Unsupported, conform
from strom.spark.avro_types import NAMED, Names, collect_names, full_name, non_null_branches


class Decoded(NamedTuple):
    column: pa.Array  # the reader's type; null where the value was null or did not decode
    bad: np.ndarray  # bool per row: the value did not decode
    reasons: dict[int, str]  # row -> why, for the first bad rows


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
        buf = np.concatenate([raw[: offsets[-1] if n else 0], np.zeros(PAD, np.uint8)])
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
                cursor = Cursor(buf, starts[group] + 5, ends[group])
                decoded = cursor.decode(writer_json, np.arange(len(group)), None, Names())
                done = cursor.pos == cursor.end
                if not done.all() or cursor.bad.any():
                    raise Unsupported("some rows do not decode")  # the per-record path tells which and why
                names = (collect_names(writer_json), self.reader_names)
                column = conform(decoded, writer_json, self.reader_json, self.arrow_type, names)
                return column, np.zeros(len(group), bool), {}
            except Unsupported as exc:
                if isinstance(exc, SchemaUnsupported):
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
        if schema in SIMPLE:
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
    if isinstance(kind, (dict, list)) or kind in SIMPLE:
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
    if isinstance(kind, str) and kind not in SIMPLE and kind not in NAMED and kind not in ("array", "map"):
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
