"""JSON Schemas as Spark types, and Spark types as JSON Schemas: for ``value.format=json`` in the
``strom`` source and sink, where Spark itself has no mapping (its ``from_json`` takes a Spark type).

JSON Schema to Spark (``spark_type``) is ``strom.iceberg.json_columns``'s mapping (object →
struct, array → array, integer → long, number → double, string with ``format: date-time`` →
timestamp, ``[T, "null"]`` → T, local ``$ref``s followed), shared with the Iceberg schema modes;
a ``$ref`` to another document is followed into the schemas the registered schema's references
name; anything it has no type for is refused with the path to it.

Spark to JSON Schema (``json_schema``), for the sink: struct → object with ``properties`` and the
non-nullable fields ``required``, nullable → ``[T, "null"]`` (``oneOf`` with null for objects and
arrays), timestamp → string with ``format: date-time``, date → string with ``format: date``,
decimal → number, binary → string (base64, as Spark's ``to_json`` writes it).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)


class JsonTypeError(ValueError):
    """A JSON Schema with no Spark type here; the message says where in the schema."""


def spark_type(schema: dict, documents: dict | None = None) -> DataType:
    """The Spark type of a JSON Schema document (parsed JSON): the Spark form of
    ``strom.iceberg.json_columns``'s Arrow type, the one mapping the Iceberg schema modes use too;
    ``documents``: the schemas its references name, by reference name (``$ref``s to other documents)."""
    from pyspark.sql.pandas.types import from_arrow_type

    from strom.iceberg.json_columns import UnsupportedJsonSchema, arrow_type

    try:
        return from_arrow_type(arrow_type(schema, documents))
    except UnsupportedJsonSchema as exc:
        raise JsonTypeError(str(exc).replace("no column type", "no Spark type")) from None


# -- Spark to JSON Schema (the sink) -------------------------------------------------------------


def json_schema(struct: StructType, title: str = "topLevelRecord") -> dict:
    """A JSON Schema (draft-07) for rows of ``struct``."""
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **_object(struct)}


def _object(struct: StructType) -> dict:
    return {
        "type": "object",
        "properties": {f.name: _nullable(_json(f.dataType, f.name), f.nullable) for f in struct.fields},
        "required": [f.name for f in struct.fields if not f.nullable],
    }


def _nullable(schema: dict, nullable: bool) -> dict:
    if not nullable:
        return schema
    if isinstance(schema.get("type"), str) and set(schema) <= {"type", "format"}:
        return {**schema, "type": [schema["type"], "null"]}
    return {"oneOf": [{"type": "null"}, schema]}


def _json(data_type: DataType, field: str) -> dict:
    if isinstance(data_type, (LongType, IntegerType, ShortType, ByteType)):
        return {"type": "integer"}
    if isinstance(data_type, (DoubleType, FloatType, DecimalType)):
        return {"type": "number"}
    if isinstance(data_type, BooleanType):
        return {"type": "boolean"}
    if isinstance(data_type, (StringType, BinaryType)):
        return {"type": "string"}
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return {"type": "string", "format": "date-time"}
    if isinstance(data_type, DateType):
        return {"type": "string", "format": "date"}
    if isinstance(data_type, StructType):
        return _object(data_type)
    if isinstance(data_type, ArrayType):
        return {"type": "array", "items": _nullable(_json(data_type.elementType, field), data_type.containsNull)}
    if isinstance(data_type, MapType) and isinstance(data_type.keyType, StringType):
        return {
            "type": "object",
            "additionalProperties": _nullable(_json(data_type.valueType, field), data_type.valueContainsNull),
        }
    raise JsonTypeError(f"no JSON Schema for Spark type {data_type.simpleString()} (column {field!r})")
