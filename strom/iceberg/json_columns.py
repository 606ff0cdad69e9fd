"""JSON Schemas as Arrow types, and JSON documents as the values of those columns.

Shared by the Spark source (``value.format=json``: ``strom.spark.json_types`` makes its Spark
type from this Arrow type) and the Iceberg schema modes (the table's columns); it sits in the
iceberg layer so that translation workers can use it.

The mapping:

- ``object`` with ``properties`` → struct of them, in their order, every field nullable (a
  property that is not required may be absent);
- ``array`` with ``items`` (one schema) → list;
- ``string`` → string, with ``format: date-time`` → timestamp (µs, UTC); ``integer`` → int64,
  ``number`` → float64, ``boolean`` → bool; ``enum`` and ``const`` take the type of their values;
- ``type: [T, "null"]``, and ``oneOf``/``anyOf`` of ``{"type": "null"}`` and one schema → that
  schema, nullable; ``$ref`` to ``#/definitions/...`` or ``#/$defs/...`` → the definition (a
  definition that contains itself is refused: an Arrow type is finite).

Anything else (several non-null types, an object without properties or with only
``additionalProperties``, a remote ``$ref``) has no type here and is refused with the path to it
(``UnsupportedJsonSchema``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
_SIMPLE: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}


class UnsupportedJsonSchema(ValueError):
    """A JSON Schema with no Arrow type here; the message says where in the schema."""


def arrow_type(schema: Any) -> pa.DataType:
    """The Arrow type of a JSON Schema document (parsed JSON)."""
    return _arrow(schema, schema, "#", ())


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _arrow(schema: Any, root: dict, path: str, refs: tuple[str, ...]) -> pa.DataType:
    if schema is True or schema == {}:
        raise UnsupportedJsonSchema(f"{path}: a schema that allows any value has no column type")
    if not isinstance(schema, dict):
        raise UnsupportedJsonSchema(f"{path}: not a schema: {schema!r}")
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref in refs:
            raise UnsupportedJsonSchema(f"{path}: {ref} contains itself, which no column type can hold")
        return _arrow(_resolve(ref, root, path), root, ref, (*refs, ref))
    for key in ("oneOf", "anyOf"):
        if key in schema:
            branches = [b for b in schema[key] if not _is_null(b)]
            if len(branches) != 1:
                raise UnsupportedJsonSchema(f"{path}: {key} of several non-null schemas has no column type")
            return _arrow(branches[0], root, f"{path}/{key}", refs)
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
            raise UnsupportedJsonSchema(f"{path}: type {kind} (several non-null types) has no column type")
        kind = kinds[0]
    if kind == "string" and schema.get("format") == "date-time":
        return TIMESTAMP_TYPE
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise UnsupportedJsonSchema(f"{path}: an array needs one 'items' schema")
        return pa.list_(_arrow(items, root, f"{path}/items", refs))
    if kind == "object":
        properties = schema.get("properties")
        if properties:
            return pa.struct(
                [
                    pa.field(name, _arrow(sub, root, f"{path}/properties/{name}", refs), nullable=True)
                    for name, sub in properties.items()
                ]
            )
        raise UnsupportedJsonSchema(f"{path}: an object without properties has no column type")
    raise UnsupportedJsonSchema(f"{path}: type {kind!r} has no column type")


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
        raise UnsupportedJsonSchema(f"{path}: enum values of several types have no column type")
    return kinds.pop()


def _resolve(ref: str, root: dict, path: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise UnsupportedJsonSchema(
            f"{path}: only local references (#/definitions/..., #/$defs/...) are read, got {ref!r}"
        )
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise UnsupportedJsonSchema(f"{path}: {ref} points at nothing")
        node = node[part]
    return node


# -- documents to column values -------------------------------------------------------------------

Convert = Callable[[Any], Any]


def converter(type_: pa.DataType) -> Convert | None:
    """A function from a parsed document (or part of it) to the value pyarrow takes for ``type_``,
    or None when they are the same: only date-time strings need converting. Raises ValueError for
    a date-time that does not parse."""
    if type_ == TIMESTAMP_TYPE:
        return _instant
    if pa.types.is_list(type_):
        item = converter(type_.value_type)
        if item is None:
            return None
        return lambda v: [item(x) for x in v] if isinstance(v, list) else v
    if pa.types.is_struct(type_):
        parts = [(f.name, converter(f.type)) for f in type_]
        changing = [(name, fn) for name, fn in parts if fn is not None]
        if not changing:
            return None

        def struct(v: Any) -> Any:
            if not isinstance(v, dict):
                return v
            out = dict(v)
            for name, fn in changing:
                if out.get(name) is not None:
                    out[name] = fn(out[name])
            return out

        return struct
    return None


def _instant(value: Any) -> Any:
    if not isinstance(value, str):
        return value  # pyarrow says why it does not fit
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
