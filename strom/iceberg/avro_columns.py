"""Avro schemas as Iceberg columns, and decoded Avro values as the Python values pyarrow takes for them.

The mapping (as Redpanda's Iceberg topics map Avro): a record becomes a struct, an array a list, a
map a map with string keys, a union of null and one type that type made optional, an enum a
string, fixed a fixed, bytes binary; the logical types date, time-millis/-micros,
timestamp-millis/-micros (an instant: timestamptz), local-timestamp-millis/-micros (timestamp)
and decimal their Iceberg types; uuid is a string column in its canonical text form, not
Iceberg's uuid: Spark's own Parquet reader, which ``strom.spark.read_topic`` scans the files with,
refuses Parquet's UUID type (PARQUET_TYPE_ILLEGAL). Every value column is optional, however the Avro field is
declared: a column added by a newer schema version has no value in the records of the older ones.

A union of several non-null types and a recursive record have no Iceberg type: such a schema is
refused (``UnsupportedSchema``) and its records go to the dead-letter table.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any

# the columns strom writes itself in the schema modes: a value field of the same name cannot be one
RESERVED = ("kafka", "key")
PRIMITIVE_TYPES = {"boolean", "int", "long", "float", "double", "bytes", "string"}


class UnsupportedSchema(ValueError):
    """An Avro schema (or part of it) with no Iceberg type; the message says which part and why."""


def parse(text: str, referenced: tuple[str, ...] = ()) -> Any:
    """fastavro's parsed form of a schema, the schemas it references parsed first."""
    import json

    from fastavro.schema import parse_schema

    named: dict[str, Any] = {}
    for other in referenced:
        parse_schema(json.loads(other), named_schemas=named)
    return parse_schema(json.loads(text), named_schemas=named)


class _Walk:
    def __init__(self, first_id: int):
        self.ids = count(first_id)
        self.named: dict[str, Any] = {}
        self.open: set[str] = set()  # records being converted: one met again inside itself is recursive

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVE_TYPES and schema != "null":
            found = self.named.get(schema)
            if found is None:
                raise UnsupportedSchema(f"unknown named type {schema}")
            if schema in self.open:
                raise UnsupportedSchema(f"the record {schema} is recursive")
            return found
        if isinstance(schema, dict) and isinstance(schema.get("type"), str) and "name" in schema:
            self.named.setdefault(schema["name"], schema)
        return schema

    def iceberg_type(self, schema: Any, path: str) -> Any:
        from pyiceberg import types as t

        schema = self.resolve(schema)
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) != 1:
                raise UnsupportedSchema(f"{path}: a union of several non-null types has no Iceberg type")
            return self.iceberg_type(branches[0], path)
        if isinstance(schema, str):
            kind, logical = schema, None
        else:
            kind, logical = schema["type"], schema.get("logicalType")
            if isinstance(kind, (dict, list)):
                return self.iceberg_type(kind, path)
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return t.DecimalType(int(schema["precision"]), int(schema.get("scale", 0)))
        if logical == "uuid" and kind in ("string", "fixed"):
            return t.StringType()  # not UUIDType: Spark's Parquet reader refuses it (module docstring)
        if logical == "date" and kind == "int":
            return t.DateType()
        if logical in ("time-millis", "time-micros"):
            return t.TimeType()
        if logical in ("timestamp-millis", "timestamp-micros"):
            return t.TimestamptzType()
        if logical in ("local-timestamp-millis", "local-timestamp-micros"):
            return t.TimestampType()
        simple = {
            "boolean": t.BooleanType(),
            "int": t.IntegerType(),
            "long": t.LongType(),
            "float": t.FloatType(),
            "double": t.DoubleType(),
            "bytes": t.BinaryType(),
            "string": t.StringType(),
            "enum": t.StringType(),
        }
        if kind in simple:
            return simple[kind]
        if kind == "fixed":
            return t.FixedType(int(schema["size"]))
        if kind == "array":
            element_id = next(self.ids)
            return t.ListType(element_id, self.iceberg_type(schema["items"], f"{path}[]"), element_required=False)
        if kind == "map":
            key_id, value_id = next(self.ids), next(self.ids)
            return t.MapType(
                key_id,
                t.StringType(),
                value_id,
                self.iceberg_type(schema["values"], f"{path}{{}}"),
                value_required=False,
            )
        if kind in ("record", "error"):
            return t.StructType(*self.fields(schema, path))
        raise UnsupportedSchema(f"{path}: the Avro type {kind} has no Iceberg type")

    def fields(self, record: dict[str, Any], path: str) -> list[Any]:
        from pyiceberg.types import NestedField

        name = record["name"]
        self.open.add(name)
        try:
            out = []
            for field in record["fields"]:
                field_id = next(self.ids)
                where = f"{path}.{field['name']}" if path else field["name"]
                out.append(
                    NestedField(field_id, field["name"], self.iceberg_type(field["type"], where), required=False)
                )
            return out
        finally:
            self.open.discard(name)


def is_record(parsed: Any) -> bool:
    return isinstance(parsed, dict) and parsed.get("type") in ("record", "error")


def value_fields(parsed: Any, first_id: int) -> list[Any]:
    """The value columns of a schema: a record's fields, or one column ``value`` for any other type.
    Field ids are numbered from ``first_id`` (a new table's; pyiceberg renumbers evolved columns)."""
    from pyiceberg.types import NestedField

    walk = _Walk(first_id)
    if is_record(parsed):
        walk.resolve(parsed)
        fields = walk.fields(parsed, "")
        clash = [f.name for f in fields if f.name in RESERVED]
        if clash:
            raise UnsupportedSchema(f"the field {clash[0]} has the name of a column strom writes itself")
        return fields
    field_id = next(walk.ids)
    return [NestedField(field_id, "value", walk.iceberg_type(parsed, "value"), required=False)]


Convert = Callable[[Any], Any]


def converter(parsed: Any) -> Convert | None:
    """A function from fastavro's decoded value to the value pyarrow takes for its column, or None
    when they are the same (the usual case: only uuids, as their text, need converting)."""
    named: dict[str, Any] = {}

    def walk(schema: Any, depth: int) -> Convert | None:
        if depth > 64:
            return None
        if isinstance(schema, str):
            schema = named.get(schema, schema)
            if isinstance(schema, str):
                return None
        if isinstance(schema, list):
            inner = [walk(b, depth + 1) for b in schema if b != "null"]
            one = inner[0] if len(inner) == 1 else None
            return None if one is None else (lambda v: None if v is None else one(v))
        kind = schema.get("type")
        if "name" in schema and isinstance(kind, str):
            named.setdefault(schema["name"], schema)
        if isinstance(kind, (dict, list)):
            return walk(kind, depth + 1)
        if schema.get("logicalType") == "uuid":
            return lambda v: None if v is None else str(v)
        if kind == "array":
            item = walk(schema["items"], depth + 1)
            return None if item is None else (lambda v: None if v is None else [item(x) for x in v])
        if kind == "map":
            value = walk(schema["values"], depth + 1)
            return None if value is None else (lambda v: None if v is None else {k: value(x) for k, x in v.items()})
        if kind in ("record", "error"):
            parts = [(f["name"], walk(f["type"], depth + 1)) for f in schema["fields"]]
            changing = [(name, fn) for name, fn in parts if fn is not None]
            if not changing:
                return None

            def record(v: Any) -> Any:
                if v is None:
                    return None
                v = dict(v)
                for name, fn in changing:
                    v[name] = fn(v.get(name))
                return v

            return record
        return None

    return walk(parsed, 0)
