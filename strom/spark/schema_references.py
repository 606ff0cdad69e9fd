"""Schema references in the ``strom`` source and sink: a registered schema that uses what other
subjects define, read the way confluent-kafka's deserializers read it.

The registry stores a schema's references as (name, subject, version); what the name means is
the format's:

- **Avro**: the referenced schemas define named types (records, enums, fixed) that the schema
  uses by name. confluent-kafka's ``AvroSerializer``/``AvroDeserializer`` parse them first (its
  ``_resolve_named_schema``: fastavro's ``named_schemas``). strom's Avro code (``avro_types``,
  ``avro_columns``, ``avro_encoding``) reads one schema document, so ``avro_self_contained``
  writes each referenced named type into the schema where it is first used, as if the schema had
  defined it there. Avro's binary encoding does not depend on where a named type is defined, so
  the bytes are the ones Confluent's serializer writes and reads.
- **JSON Schema**: a ``$ref`` to another document names it by the reference's name (a URI,
  resolved against the ``$id`` around it), as confluent-kafka's ``JSONSerializer`` builds its
  ``referencing`` registry; ``json_documents`` gives those documents to
  ``strom.iceberg.json_columns.arrow_type``.
- **Protobuf**: the name is the import's file name (``strom.spark.protobuf_types.load``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from strom.spark.avro_types import NAMED, collect_names, full_name


def referenced(client: Any, references: Sequence[Any] | None) -> list[tuple[str, str]]:
    """(reference name, schema text) of every schema ``references`` (confluent-kafka's
    ``SchemaReference``) name, and of those they name in turn, theirs first, fetched through
    ``client`` (a ``SchemaRegistryClient``, which caches them)."""
    found: dict[str, str] = {}

    def collect(references: Sequence[Any] | None) -> None:
        for reference in references or []:
            if reference.name in found:
                continue
            other = client.get_version(reference.subject, reference.version).schema
            collect(other.references)
            found[reference.name] = other.schema_str

    collect(references)
    return list(found.items())


def json_documents(texts: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The referenced JSON schemas by reference name, parsed."""
    return {name: json.loads(text) for name, text in texts}


_PRIMITIVE = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def avro_self_contained(text: str, texts: Sequence[str]) -> str:
    """``text`` with the named types that the referenced schemas ``texts`` define (theirs first, as
    ``referenced`` lists them) written in where it first uses them; the text as it is when it has
    no references. A name that nothing defines is left for the parser to refuse."""
    if not texts:
        return text
    definitions: dict[str, dict] = {}
    for other in texts:  # each referenced schema made whole with the ones before it, then its types taken
        whole = _Inliner(definitions).walk(json.loads(other), None)
        for key, defined in collect_names(whole).types.items():
            definitions.setdefault(key, _standalone(defined, key))
    return json.dumps(_Inliner(definitions).walk(json.loads(text), None), separators=(",", ":"), ensure_ascii=False)


def _standalone(schema: dict, key: str) -> dict:
    """One of the named types a referenced schema defines (``collect_names``), as a definition that
    means the same wherever it is written: a full (dotted) name, or the null namespace spelt out."""
    out = {k: v for k, v in schema.items() if k != "namespace"}
    if "." in key:
        out["name"] = key
    else:
        out["name"], out["namespace"] = key, ""
    return out


class _Inliner:
    """Walks a schema in document order, writing each referenced named type in at its first use."""

    def __init__(self, definitions: dict[str, dict]):
        self.definitions = definitions
        self.defined: set[str] = set()  # named types defined so far in the document

    def walk(self, schema: Any, namespace: str | None) -> Any:
        if isinstance(schema, str):
            if schema in _PRIMITIVE:
                return schema
            candidates = [f"{namespace}.{schema}" if namespace and "." not in schema else schema, schema]
            if any(c in self.defined for c in candidates):
                return schema
            for candidate in candidates:
                if candidate in self.definitions:
                    return self.walk(self.definitions[candidate], namespace)
            return schema
        if isinstance(schema, list):
            return [self.walk(branch, namespace) for branch in schema]
        if not isinstance(schema, dict):
            return schema
        kind = schema.get("type")
        if kind in NAMED:
            key, space = full_name(schema, namespace)
            self.defined.add(key)
            if "fields" not in schema:
                return schema
            return {**schema, "fields": [{**f, "type": self.walk(f["type"], space)} for f in schema["fields"]]}
        if kind == "array":
            return {**schema, "items": self.walk(schema["items"], namespace)}
        if kind == "map":
            return {**schema, "values": self.walk(schema["values"], namespace)}
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVE):
            return {**schema, "type": self.walk(kind, namespace)}
        return schema
