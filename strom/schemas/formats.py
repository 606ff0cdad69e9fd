"""The three schema types behind one interface: what the registry asks of a schema, whatever
its type (Avro in strom.schemas.avro, JSON Schema in .json_schema, Protobuf in .protobuf).

References reach each type as (name, text) pairs of the referenced versions: Avro needs only
their texts (their named types), Protobuf their names too (an import names a reference).
"""

from __future__ import annotations

from typing import Any

from strom.schemas import avro, json_schema, protobuf

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
_ERRORS = (avro.InvalidSchemaError, json_schema.InvalidSchemaError, protobuf.InvalidSchemaError)


class InvalidSchemaError(ValueError):
    pass


class Parsed:
    """A parsed schema of one type: ``value`` is that type's own parsed form."""

    def __init__(self, schema_type: str, value: Any, canonical: str):
        self.schema_type = schema_type
        self.value = value
        self.canonical = canonical  # the text the registry stores


def parse(schema_type: str, text: str, referenced: list[tuple[str, str]]) -> tuple[Parsed, str]:
    """(the parsed schema, its canonical text), or InvalidSchemaError saying why."""
    try:
        if schema_type == "AVRO":
            value: Any
            value, canonical = avro.parse(text, [t for _, t in referenced])
        elif schema_type == "JSON":
            value, canonical = json_schema.parse(text, referenced)
        elif schema_type == "PROTOBUF":
            value, canonical = protobuf.parse(text, referenced)
        else:
            raise InvalidSchemaError(f"Invalid schema: schemaType {schema_type} is not one of {list(SCHEMA_TYPES)}")
    except _ERRORS as exc:
        raise InvalidSchemaError(str(exc)) from None
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None
    return Parsed(schema_type, value, canonical), canonical


def normalized(schema_type: str, canonical: str, value: Any = None) -> str:
    """``normalize=true``'s form of a canonical text; a Protobuf schema's is printed from its
    parsed ``value`` (its names are resolved against the files it imports)."""
    if schema_type == "AVRO":
        return avro.normalized(canonical)
    if schema_type == "JSON":
        return json_schema.normalized(canonical)
    try:
        return str(value.normalized()) if value is not None else canonical
    except protobuf.InvalidSchemaError as exc:
        raise InvalidSchemaError(str(exc)) from None


def compatibility_problems(level: str, new: Parsed, previous: list[Parsed]) -> list[str]:
    """The problems of registering ``new`` under ``level`` given the live versions ``previous``
    (oldest first): a version of another type is one (as Confluent: a subject keeps one type)."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    other = [p.schema_type for p in against if p.schema_type != new.schema_type]
    if other:
        return [f"the schema type changed from {other[-1]} to {new.schema_type}"]
    values = [p.value for p in previous]
    if new.schema_type == "AVRO":
        return avro.compatibility_problems(level, new.value, values)
    if new.schema_type == "JSON":
        return json_schema.compatibility_problems(level, new.value, values)
    return protobuf.compatibility_problems(level, new.value, values)


def record_name(schema_type: str, text: str) -> str | None:
    """RecordNameStrategy's subject name of a schema: an Avro record's full name, a JSON
    schema's title, a Protobuf schema's first message; None when it has none."""
    if schema_type == "JSON":
        return json_schema.record_name(text)
    if schema_type == "PROTOBUF":
        return protobuf.record_name(text)
    return avro.record_name(text)
