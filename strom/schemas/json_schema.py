"""JSON Schema schemas (schemaType JSON): parsing, the canonical text, and compatibility.

A schema is checked against its draft's metaschema with the ``jsonschema`` library (the draft
its ``$schema`` names; draft 7 when it names none, as Confluent's registry assumes), so a schema
that ``jsonschema`` cannot validate documents with is refused. The canonical text is the JSON
without insignificant whitespace, key order kept (Confluent stores Jackson's rendering of it);
``normalize=true`` also sorts keys.

Compatibility (Confluent's JSON Schema rules, strom's own for ``format``, ``if``/``then``/``else``
and a bare ``contains``) is in strom.schemas.json_schema_compatibility.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from jsonschema import validators
from jsonschema.exceptions import SchemaError

from strom.schemas import compatibility, json_schema_compatibility

_DRAFT7 = "http://json-schema.org/draft-07/schema#"


class InvalidSchemaError(ValueError):
    pass


class ParsedJson:
    """A parsed schema: the decoded JSON (a dict, or a boolean schema), and the documents its
    references name (reference name -> decoded JSON), where a ``$ref`` to another document leads."""

    def __init__(self, schema: Any, documents: dict[str, Any] | None = None):
        self.schema = schema
        self.documents = documents or {}


def parse(text: str, referenced: Iterable[tuple[str, str]] = ()) -> tuple[ParsedJson, str]:
    """(the parsed schema, its canonical text), or InvalidSchemaError saying why; ``referenced``
    are (name, text) of the schemas its references name."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidSchemaError(f"Invalid schema: not JSON: {exc}") from None
    if not isinstance(raw, (dict, bool)):
        raise InvalidSchemaError("Invalid schema: a JSON Schema is an object or a boolean")
    documents = {}
    for name, other in referenced:
        try:
            documents[name] = json.loads(other)
        except ValueError as exc:
            raise InvalidSchemaError(f"Invalid schema: the referenced schema {name} is not JSON: {exc}") from None
    try:
        default = validators.validator_for({"$schema": _DRAFT7})
        cls = validators.validator_for(raw, default=default) if isinstance(raw, dict) else default
        cls.check_schema(raw)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise InvalidSchemaError(f"Invalid schema: at {where}: {exc.message}") from None
    except Exception as exc:  # a malformed $schema, a metaschema that cannot be built
        raise InvalidSchemaError(f"Invalid schema: {exc}") from None
    return ParsedJson(raw, documents), json.dumps(raw, separators=(",", ":"), ensure_ascii=False)


def normalized(text: str) -> str:
    """``normalize=true``: keys sorted, so that schemas that differ only in key order are one."""
    return json.dumps(json.loads(text), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def compatibility_problems(level: str, new: ParsedJson, previous: list[ParsedJson]) -> list[str]:
    """The problems of registering ``new`` under ``level`` given the live versions ``previous``
    (oldest first); empty when it may be registered."""
    return compatibility.problems(level, new, previous, json_schema_compatibility.read_problems)


def record_name(schema: str) -> str | None:
    """RecordNameStrategy's name of a JSON schema: its ``title``, as Confluent's serializer uses."""
    try:
        raw = json.loads(schema)
    except ValueError:
        return None
    title = raw.get("title") if isinstance(raw, dict) else None
    return title if isinstance(title, str) and title else None
