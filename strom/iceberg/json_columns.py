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
  definition that contains itself is refused: an Arrow type is finite);
- a ``$ref`` to another document (``"address.json"``, ``"https://example.com/address.json#/$defs/City"``)
  → what it points at in the documents the schema's references name (Confluent's schema
  references: the reference's name is the URI, as confluent-kafka's JSONSerializer resolves it),
  resolved against the ``$id`` around it with the ``referencing`` library, as ``jsonschema`` does.

Anything else (several non-null types, an object without properties or with only
``additionalProperties``, a ``$ref`` to a document that is not given) has no type here and is
refused with the path to it (``UnsupportedJsonSchema``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT7

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
_SIMPLE: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}


class UnsupportedJsonSchema(ValueError):
    """A JSON Schema with no Arrow type here; the message says where in the schema."""


def arrow_type(schema: Any, documents: Mapping[str, Any] | None = None) -> pa.DataType:
    """The Arrow type of a JSON Schema document (parsed JSON); ``documents`` are the schemas its
    references name (reference name → parsed JSON), where a ``$ref`` to another document leads."""
    root = Resource.from_contents(schema, default_specification=DRAFT7)  # Confluent's default draft
    base = root.id() or ""
    resources = [
        (name, Resource.from_contents(doc, default_specification=DRAFT7)) for name, doc in (documents or {}).items()
    ]
    registry: Registry = Registry().with_resources([*resources, (base, root)]).crawl()
    return _arrow(schema, registry.resolver(base_uri=base), "#", ())


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null"


def _arrow(schema: Any, resolver: Any, path: str, refs: tuple[int, ...]) -> pa.DataType:
    """``resolver`` resolves ``$ref``s where ``schema`` is (the base URI of the document around it);
    ``refs`` are the ids of the schemas that ``$ref``s have led into on the way here."""
    if schema is True or schema == {}:
        raise UnsupportedJsonSchema(f"{path}: a schema that allows any value has no column type")
    if not isinstance(schema, dict):
        raise UnsupportedJsonSchema(f"{path}: not a schema: {schema!r}")
    if "$id" in schema:
        resolver = resolver.in_subresource(DRAFT7.create_resource(schema))
    if "$ref" in schema:
        ref = schema["$ref"]
        resolved = _resolve(ref, resolver, path)
        if id(resolved.contents) in refs:
            raise UnsupportedJsonSchema(f"{path}: {ref} contains itself, which no column type can hold")
        return _arrow(resolved.contents, resolved.resolver, ref, (*refs, id(resolved.contents)))
    for key in ("oneOf", "anyOf"):
        if key in schema:
            branches = [b for b in schema[key] if not _is_null(b)]
            if len(branches) != 1:
                raise UnsupportedJsonSchema(f"{path}: {key} of several non-null schemas has no column type")
            return _arrow(branches[0], resolver, f"{path}/{key}", refs)
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
        return pa.list_(_arrow(items, resolver, f"{path}/items", refs))
    if kind == "object":
        properties = schema.get("properties")
        if properties:
            return pa.struct(
                [
                    pa.field(name, _arrow(sub, resolver, f"{path}/properties/{name}", refs), nullable=True)
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


def _resolve(ref: Any, resolver: Any, path: str) -> Any:
    """What ``ref`` points at (``referencing``'s Resolved: its contents and the resolver there)."""
    if not isinstance(ref, str):
        raise UnsupportedJsonSchema(f"{path}: $ref {ref!r} is not a string")
    try:
        return resolver.lookup(ref)
    except Unresolvable:
        if ref.startswith("#"):
            raise UnsupportedJsonSchema(f"{path}: {ref} points at nothing") from None
        raise UnsupportedJsonSchema(
            f"{path}: {ref!r} names no schema given: only local references (#/definitions/..., #/$defs/...) "
            "and the schemas of its references (by their names) are read"
        ) from None


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
