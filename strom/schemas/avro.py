"""Avro schemas: parsing (fastavro), the canonical text the registry stores, and compatibility.

Compatibility follows the Avro specification's schema resolution ("Schema Resolution"), as
Avro's Java ``SchemaCompatibility`` (which Confluent's registry uses) applies it; fastavro has
no such check, so the rules are written here:

- primitives match themselves; the writer's int is read as long, float or double, long as float
  or double, float as double, string as bytes and bytes as string;
- records match when their full names (or a reader alias) match; every reader field must be in
  the writer (by name or a reader field alias) with a type the reader can read, or have a default;
  writer fields the reader lacks are skipped;
- enums match by name, and every writer symbol must be a reader symbol unless the reader has a
  default symbol; fixed types match by name and size;
- arrays by their items, maps by their values;
- a writer union is readable when every branch is; a reader union reads a writer that one of its
  branches reads;
- logical types are ignored (as Avro's Java check does).

Which direction is checked against which versions is strom.schemas.compatibility's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fastavro.schema import parse_schema

from strom.schemas import compatibility
from strom.schemas.compatibility import LEVELS as LEVELS

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class InvalidSchemaError(ValueError):
    pass


class ParsedAvro:
    """A parsed schema: the fastavro form (full names, named types kept in ``named``)."""

    def __init__(self, parsed: Any, named: dict[str, Any]):
        self.parsed = parsed
        self.named = named


def parse(text: str, referenced: Iterable[str] = ()) -> tuple[ParsedAvro, str]:
    """(the parsed schema, its canonical text), or InvalidSchemaError saying why.

    ``referenced`` are the texts of the schemas it references (Confluent's references), parsed
    first so that their named types are known. The canonical text is the schema's JSON without
    insignificant whitespace, field order kept (as Confluent stores Avro's ``toString``).
    """
    named: dict[str, Any] = {}
    try:
        for other in referenced:
            parse_schema(json.loads(other), named_schemas=named, _write_hint=False)
        raw = json.loads(text)
        parsed = parse_schema(raw, named_schemas=named, _write_hint=False)
    except Exception as exc:  # fastavro's SchemaParseException is no ValueError; json's is
        raise InvalidSchemaError(f"Invalid schema: {exc}") from None
    return ParsedAvro(parsed, named), json.dumps(raw, separators=(",", ":"), ensure_ascii=False)


def normalized(text: str) -> str:
    """``normalize=true``: keys sorted and ``{"type": "int"}`` written as ``"int"``, so that
    schemas that differ only in such spelling are one schema."""

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"type"} and node["type"] in PRIMITIVES:
                return node["type"]
            return {key: walk(node[key]) if key in ("type", "items", "values", "fields") else node[key] for key in node}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return json.dumps(walk(json.loads(text)), separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _type(schema: Any, named: dict[str, Any]) -> tuple[str, Any]:
    """(type name, definition) with named references resolved and logical types dropped."""
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema, schema
        found = named.get(schema)
        if found is None:
            raise InvalidSchemaError(f"unknown type {schema}")
        return _type(found, named)
    if isinstance(schema, list):
        return "union", schema
    kind = schema["type"]
    if kind in PRIMITIVES:
        return kind, kind
    if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind in named):
        return _type(kind, named)
    return kind, schema


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    if reader["name"] == writer["name"] or _simple(reader["name"]) == _simple(writer["name"]):
        return True  # Avro's Java check compares unqualified names
    aliases = reader.get("aliases") or []
    return writer["name"] in aliases or _simple(writer["name"]) in [_simple(a) for a in aliases]


class _Checker:
    def __init__(self, reader: ParsedAvro, writer: ParsedAvro):
        self.reader_named = reader.named
        self.writer_named = writer.named
        self.seen: set[tuple[str, str]] = set()

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        r_kind, r_def = _type(reader, self.reader_named)
        w_kind, w_def = _type(writer, self.writer_named)
        if w_kind == "union":
            problems: list[str] = []
            for index, branch in enumerate(w_def):
                problems += self.check(reader, branch, f"{path}/{index}")
            return problems
        if r_kind == "union":
            for branch in r_def:
                if not self.check(branch, writer, path):
                    return []
            return [f"{path}: the reader's union has no branch that reads the writer's {w_kind}"]
        if r_kind != w_kind:
            if r_kind in _PROMOTIONS.get(w_kind, ()):
                return []
            return [f"{path}: the reader's type {r_kind} does not read the writer's type {w_kind}"]
        if r_kind in PRIMITIVES:
            return []
        if r_kind in ("record", "error", "enum", "fixed") and not _names_match(r_def, w_def):
            return [f"{path}: the reader's name {r_def['name']} does not match the writer's {w_def['name']}"]
        if r_kind == "array":
            return self.check(r_def["items"], w_def["items"], f"{path}/items")
        if r_kind == "map":
            return self.check(r_def["values"], w_def["values"], f"{path}/values")
        if r_kind == "fixed":
            if r_def["size"] != w_def["size"]:
                return [f"{path}: fixed size {w_def['size']} read as {r_def['size']}"]
            return []
        if r_kind == "enum":
            if r_def.get("default") is not None:
                return []
            missing = [s for s in w_def["symbols"] if s not in r_def["symbols"]]
            return [f"{path}: the reader's enum lacks the writer's symbols {missing}"] if missing else []
        return self._record(r_def, w_def, path)

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        pair = (reader["name"], writer["name"])
        if pair in self.seen:  # a recursive type: assumed compatible where it recurs
            return []
        self.seen.add(pair)
        writer_fields = {f["name"]: f for f in writer["fields"]}
        problems: list[str] = []
        for field in reader["fields"]:
            found = writer_fields.get(field["name"])
            if found is None:
                found = next((writer_fields[a] for a in field.get("aliases") or () if a in writer_fields), None)
            where = f"{path}/fields/{field['name']}"
            if found is None:
                if "default" not in field:
                    problems.append(
                        f"{where}: the reader's field {field['name']} has no default and the writer lacks it"
                    )
                continue
            problems += self.check(field["type"], found["type"], where)
        return problems


def read_problems(reader: ParsedAvro, writer: ParsedAvro) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader``; empty if it can."""
    return _Checker(reader, writer).check(reader.parsed, writer.parsed, "")


def compatibility_problems(level: str, new: ParsedAvro, previous: list[ParsedAvro]) -> list[str]:
    """The problems of registering ``new`` under ``level``, given the live versions ``previous``
    (oldest first); empty when it may be registered."""
    return compatibility.problems(level, new, previous, read_problems)


def record_name(schema: str) -> str | None:
    """RecordNameStrategy's name of an Avro schema: its record's full name; None if not a record."""
    try:
        parsed = json.loads(schema)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or parsed.get("type") not in ("record", "error"):
        return None
    name = parsed.get("name")
    if not isinstance(name, str):
        return None
    namespace = parsed.get("namespace")
    if "." in name or not namespace or not isinstance(namespace, str):
        return name
    return f"{namespace}.{name}"
