"""JSON Schemas as Spark types, and Spark types as JSON Schemas: for ``value.format=json`` in the
``strom`` source and sink, where Spark itself has no mapping (its ``from_json`` takes a Spark type).

JSON Schema to Spark (``spark_type``):

- ``object`` with ``properties`` → struct of them, in their order, every field nullable (a
  property that is not required may be absent);
- ``array`` with ``items`` (one schema) → array;
- ``string`` → string, with ``format: date-time`` → timestamp; ``integer`` → long, ``number`` →
  double, ``boolean`` → boolean; ``enum`` and ``const`` take the type of their values;
- ``type: [T, "null"]``, and ``oneOf``/``anyOf`` of ``{"type": "null"}`` and one schema → that
  schema, nullable; ``$ref`` to ``#/definitions/...`` or ``#/$defs/...`` → the definition (a
  definition that contains itself is refused: a Spark type is finite).

Anything else (several non-null types, an object without properties or with only
``additionalProperties``, a remote ``$ref``) has no Spark type here and is refused with the path
to it.

Spark to JSON Schema (``json_schema``), for the sink: struct → object with ``properties`` and the
non-nullable fields ``required``, nullable → ``[T, "null"]`` (``oneOf`` with null for objects and
arrays), timestamp → string with ``format: date-time``, date → string with ``format: date``,
decimal → number, binary → string (base64, as Spark's ``to_json`` writes it).
"""

from __future__ import annotations

from typing import Any

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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

_SIMPLE: dict[str, DataType] = {
    "string": StringType(),
    "integer": LongType(),
    "number": DoubleType(),
    "boolean": BooleanType(),
}


class JsonTypeError(ValueError):
    """A JSON Schema with no Spark type here; the message says where in the schema."""


def spark_type(schema: dict) -> DataType:
    """The Spark type of a JSON Schema document (parsed JSON)."""
    return _spark(schema, schema, "#", ())


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _spark(schema: Any, root: dict, path: str, refs: tuple[str, ...]) -> DataType:
    if schema is True or schema == {}:
        raise JsonTypeError(f"{path}: a schema that allows any value has no Spark type")
    if not isinstance(schema, dict):
        raise JsonTypeError(f"{path}: not a schema: {schema!r}")
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref in refs:
            raise JsonTypeError(f"{path}: {ref} contains itself, which no Spark type can hold")
        return _spark(_resolve(ref, root, path), root, ref, (*refs, ref))
    for key in ("oneOf", "anyOf"):
        if key in schema:
            branches = [b for b in schema[key] if not _is_null(b)]
            if len(branches) != 1:
                raise JsonTypeError(f"{path}: {key} of several non-null schemas has no Spark type")
            return _spark(branches[0], root, f"{path}/{key}", refs)
    kind = schema.get("type")
    if kind is None and "enum" in schema:
        kind = _type_of_values(schema["enum"], path)
    if kind is None and "const" in schema:
        kind = _type_of_values([schema["const"]], path)
    if kind is None and "properties" in schema:
        kind = "object"
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise JsonTypeError(f"{path}: type {kind} (several non-null types) has no Spark type")
        kind = kinds[0]
    if kind == "string" and schema.get("format") == "date-time":
        return TimestampType()
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise JsonTypeError(f"{path}: an array needs one 'items' schema")
        return ArrayType(_spark(items, root, f"{path}/items", refs), True)
    if kind == "object":
        properties = schema.get("properties")
        if properties:
            return StructType(
                [
                    StructField(name, _spark(sub, root, f"{path}/properties/{name}", refs), True)
                    for name, sub in properties.items()
                ]
            )
        raise JsonTypeError(f"{path}: an object without properties has no Spark type")
    raise JsonTypeError(f"{path}: type {kind!r} has no Spark type")


def _type_of_values(values: list, path: str) -> str:
    kinds = {
        "boolean"
        if isinstance(v, bool)
        else "integer"
        if isinstance(v, int)
        else "number"
        if isinstance(v, float)
        else "string"
        if isinstance(v, str)
        else "null"
        if v is None
        else "other"
        for v in values
    }
    kinds.discard("null")
    if kinds == {"integer", "number"}:
        return "number"
    if len(kinds) != 1 or "other" in kinds:
        raise JsonTypeError(f"{path}: enum values of several types have no Spark type")
    return kinds.pop()


def _resolve(ref: str, root: dict, path: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise JsonTypeError(f"{path}: only local references (#/definitions/..., #/$defs/...) are read, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise JsonTypeError(f"{path}: {ref} points at nothing")
        node = node[part]
    return node


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
