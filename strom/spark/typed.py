"""Typed keys and values in the ``strom`` source and sink: Avro and JSON Schema with a
Confluent-compatible Schema Registry.

Source options (``value.`` shown; ``key.`` alike):

- ``value.format``: ``binary`` (the default: Spark's Kafka columns), ``avro``, ``json`` or
  ``protobuf``: the ``value`` column is the decoded record, its Spark type derived from the reader
  schema (``strom.spark.avro_types``, ``strom.spark.json_types``, ``strom.spark.protobuf_types``:
  a Protobuf schema's first message); JSON documents are read by property name whatever version
  wrote them (JSON Schema has no resolution rules), Protobuf messages by field number;
- ``schema.registry.url`` (required for a typed format), and any other ``schema.registry.*`` key of
  confluent-kafka's ``SchemaRegistryClient`` (``schema.registry.basic.auth.user.info``,
  ``schema.registry.ssl.ca.location`` ...);
- ``value.subject`` (default ``<topic>-value``, so one topic must be subscribed), and
  ``value.schema.id`` or ``value.schema.version`` to pin the reader schema; by default it is the
  subject's latest version when the query starts. Records written with other (compatible)
  versions are read with it as Avro resolution says;
- ``value.protobuf.message`` (``value.format=protobuf``): the message read (and written by the
  sink), by full name or relative to the schema's package; by default the schema's first message.
  Values name their message by Confluent's message indexes; one naming another message is corrupt;
- ``mode``: ``FAILFAST`` (default: a record that does not decode fails the query, naming its
  topic, partition and offset) or ``PERMISSIVE`` (its ``value`` is null and its bytes are in a
  ``_corrupt_value`` column, ``_corrupt_key`` for keys).

The reader schema is chosen once, on the driver, and travels to the executors as its schema id
in the column's metadata, so every task of a query decodes with the same schema even if a new
version is registered meanwhile. Executors fetch schemas by id through one client per Python
worker (confluent-kafka's, which caches them).

Sink options: ``value.format=avro`` (``json``, ``protobuf``) makes the ``value`` column (a
struct) Confluent-framed Avro (JSON, Protobuf). Its schema is ``value.schema`` (``.proto`` text
for Protobuf) or, without it, derived from the column's Spark type (for Avro as Spark's
``to_avro`` does). With ``auto.register.schemas=true``
(the default, as Confluent's serializers) it is registered under ``value.subject`` (default
``<topic>-value``) when the write starts (an identical schema keeps its id); with ``false`` the
subject's latest version is used and nothing is registered.

A ``.proto`` ``value.schema`` may import other schemas (``import "common.proto";``): each import is
a schema reference, as confluent-kafka's ``ProtobufSerializer`` registers it: named by the import,
under the subject of that name (its default ``reference.subject.name.strategy``), here its latest
version, which must be registered already. ``value.schema.references`` names them otherwise: a JSON
list of ``{"name": import, "subject": ..., "version": ...}`` as the registry's REST API takes them
(``subject`` defaults to the name, ``version`` to the latest). Well-known types
(``google/protobuf/...``) need none.

An Avro or JSON ``value.schema`` that uses what other subjects define (an Avro named type, a JSON
``$ref`` to another document) is registered with the references ``value.schema.references`` names,
as confluent-kafka's ``AvroSerializer`` and ``JSONSerializer`` register the ``Schema`` they are
given: for Avro the name is the type's full name, for JSON the URI the ``$ref`` resolves to. The
source reads schemas with references of all three formats (``strom.spark.schema_references``).
"""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from strom.spark.options import StromOptionError, _bool, _positive_int

BINARY = "binary"
AVRO = "avro"
JSON = "json"
PROTOBUF = "protobuf"
FORMATS = (BINARY, AVRO, JSON, PROTOBUF)
_SCHEMA_TYPES = {AVRO: "AVRO", JSON: "JSON", PROTOBUF: "PROTOBUF"}  # the registry's schemaType of each format
FAILFAST = "FAILFAST"
PERMISSIVE = "PERMISSIVE"
SCHEMA_ID_KEY = "strom.avro.schema.id"
SIDES = ("key", "value")
_REGISTRY_PREFIX = "schema.registry."


@dataclass(frozen=True)
class SideFormat:
    """How one of key and value is read or written."""

    side: str
    format: str = BINARY
    subject: str | None = None
    schema_id: int | None = None
    schema_version: int | None = None
    schema_text: str | None = None  # the sink's value.schema
    message: str | None = None  # value.protobuf.message: the Protobuf message read or written (default the first)
    # value.schema.references: (import name, subject, version or None for the latest); None: from the imports
    references: tuple[tuple[str, str, int | None], ...] | None = None

    @property
    def typed(self) -> bool:
        return self.format != BINARY


@dataclass(frozen=True)
class TypedOptions:
    key: SideFormat
    value: SideFormat
    registry: dict = field(default_factory=dict)  # confluent-kafka SchemaRegistryClient config
    mode: str = FAILFAST
    auto_register: bool = True

    @property
    def typed(self) -> bool:
        return self.key.typed or self.value.typed

    def sides(self) -> list[SideFormat]:
        return [s for s in (self.key, self.value) if s.typed]

    @classmethod
    def parse(cls, options: dict) -> TypedOptions:
        opts = {str(k).lower(): v for k, v in options.items()}
        sides = {}
        for side in SIDES:
            fmt = str(opts.get(f"{side}.format", BINARY)).strip().lower()
            if fmt not in FORMATS:
                raise StromOptionError(f"option '{side}.format' must be one of {', '.join(FORMATS)}, got {fmt!r}")
            schema_id = _positive_int(opts, f"{side}.schema.id")
            version = _positive_int(opts, f"{side}.schema.version")
            if schema_id is not None and version is not None:
                raise StromOptionError(f"options '{side}.schema.id' and '{side}.schema.version' exclude each other")
            text = opts.get(f"{side}.schema")
            if text is not None and fmt != PROTOBUF:  # a Protobuf schema is .proto text
                try:
                    json.loads(str(text))
                except ValueError as exc:
                    raise StromOptionError(f"option '{side}.schema' is not JSON: {exc}") from None
            subject = opts.get(f"{side}.subject")
            message = opts.get(f"{side}.protobuf.message")
            if message is not None and fmt != PROTOBUF:
                raise StromOptionError(f"option '{side}.protobuf.message' needs option '{side}.format=protobuf'")
            sides[side] = SideFormat(
                side,
                fmt,
                None if subject is None else str(subject),
                schema_id,
                version,
                text and str(text),
                None if message is None else str(message),
                _references(opts, side, fmt),
            )
        mode = str(opts.get("mode", FAILFAST)).strip().upper()
        if mode not in (FAILFAST, PERMISSIVE):
            raise StromOptionError(f"option 'mode' must be FAILFAST or PERMISSIVE, got {opts.get('mode')!r}")
        auto = _bool(opts, "auto.register.schemas", True)
        registry = {key[len(_REGISTRY_PREFIX) :]: str(v) for key, v in opts.items() if key.startswith(_REGISTRY_PREFIX)}
        parsed = cls(sides["key"], sides["value"], registry, mode, auto)
        if parsed.typed and not registry.get("url"):
            first = parsed.sides()[0]
            raise StromOptionError(f"option '{first.side}.format={first.format}' needs option 'schema.registry.url'")
        return parsed


def _references(opts: dict, side: str, fmt: str) -> tuple[tuple[str, str, int | None], ...] | None:
    """Option ``<side>.schema.references``: a JSON list of {"name", "subject", "version"}, as the
    registry's REST API takes references; subject defaults to the name, version to the latest."""
    key = f"{side}.schema.references"
    raw = opts.get(key)
    if raw is None:
        return None
    if fmt == BINARY:
        raise StromOptionError(f"option '{key}' needs option '{side}.format' (avro, json or protobuf)")
    shape = 'a JSON list of {"name": ..., "subject": ..., "version": ...}'
    try:
        listed = json.loads(str(raw))
    except ValueError as exc:
        raise StromOptionError(f"option '{key}' must be {shape}: {exc}") from None
    if not isinstance(listed, list):
        raise StromOptionError(f"option '{key}' must be {shape}, got {raw!r}")
    found = []
    for item in listed:
        name = item.get("name") if isinstance(item, dict) else None
        subject = item.get("subject", name) if isinstance(item, dict) else None
        version = item.get("version") if isinstance(item, dict) else None
        if (
            not isinstance(name, str)
            or not name
            or not isinstance(subject, str)
            or not subject
            or set(item) - {"name", "subject", "version"}
            or not (version is None or (isinstance(version, int) and not isinstance(version, bool) and version > 0))
        ):
            raise StromOptionError(
                f"option '{key}': {json.dumps(item)} is not a reference "
                '({"name": ..., "subject": ..., "version": a positive integer}; subject and version may be left out)'
            )
        found.append((name, subject, version))
    return tuple(found)


# -- the registry ---------------------------------------------------------------------------------

_clients: dict[tuple, object] = {}
_clients_lock = threading.Lock()


def registry_client(config: dict):
    """One confluent-kafka SchemaRegistryClient per configuration and process (it caches schemas)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key = tuple(sorted(config.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            try:
                client = SchemaRegistryClient(dict(config))
            except (ValueError, TypeError) as exc:
                raise StromOptionError(f"schema.registry.* options: {exc}") from None
            _clients[key] = client
        return client


def _registry_error(exc: Exception, what: str) -> StromOptionError:
    return StromOptionError(f"Schema Registry: {what}: {exc}")


def subject_of(side: SideFormat, topics: list[str]) -> str:
    if side.subject:
        return side.subject
    if len(topics) != 1:
        raise StromOptionError(
            f"{side.side}.format={side.format} with {len(topics)} topics: name the schema's subject with option '{side.side}.subject'"
        )
    return f"{topics[0]}-{side.side}"


def reader_schema(opts: TypedOptions, side: SideFormat, topics: list[str]) -> tuple[int, Any]:
    """(schema id, confluent-kafka's ``Schema``) the source reads ``side`` with: pinned by id or
    version, else the latest."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client = registry_client(opts.registry)
    try:
        if side.schema_id is not None:
            schema_id, schema = side.schema_id, client.get_schema(side.schema_id)
        else:
            subject = subject_of(side, topics)
            registered = (
                client.get_version(subject, side.schema_version)
                if side.schema_version is not None
                else client.get_latest_version(subject)
            )
            schema_id, schema = registered.schema_id, registered.schema
    except SchemaRegistryError as exc:
        raise _registry_error(exc, f"the {side.side} schema") from None
    except OSError as exc:
        raise _registry_error(exc, f"cannot reach {opts.registry.get('url')}") from None
    kind = schema.schema_type
    if (kind or "AVRO") != _SCHEMA_TYPES[side.format]:
        raise StromOptionError(f"{side.side}.format={side.format}, but schema {schema_id} is of type {kind}")
    return schema_id, schema


def avro_text(client, schema) -> str:
    """An Avro schema's text with what its references define written in (one self-contained schema)."""
    from strom.spark.schema_references import avro_self_contained, referenced

    return avro_self_contained(schema.schema_str, [text for _, text in referenced(client, schema.references)])


def writer_schema_text(opts: TypedOptions, schema_id: int, schema_type: str = "AVRO") -> str:
    """The text of a writer schema by id; LookupError when the registry does not know the id
    or it is not of ``schema_type``."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        schema = registry_client(opts.registry).get_schema(schema_id)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            raise LookupError(schema_id) from None
        raise
    if (schema.schema_type or "AVRO") != schema_type:
        raise LookupError(schema_id)
    return avro_text(registry_client(opts.registry), schema) if schema_type == "AVRO" else schema.schema_str


# -- the source -----------------------------------------------------------------------------------


def source_schema(base, opts: TypedOptions, topics: list[str]):
    """Spark's Kafka columns with typed key/value columns (schema id in their metadata) and, in
    PERMISSIVE mode, the corrupt-bytes columns."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from strom.spark import avro_types, json_types, protobuf_types
    from strom.spark.schema_references import json_documents, referenced

    fields = list(base.fields)
    client = registry_client(opts.registry)
    for side in opts.sides():
        schema_id, schema = reader_schema(opts, side, topics)
        try:
            if side.format == AVRO:
                data_type, _ = avro_types.spark_type(json.loads(avro_text(client, schema)))
            elif side.format == PROTOBUF:
                data_type = protobuf_types.spark_type(protobuf_schema(opts, schema_id), side.message)
            else:
                documents = json_documents(referenced(client, schema.references))
                data_type = json_types.spark_type(json.loads(schema.schema_str), documents)
        except (ValueError, KeyError) as exc:  # AvroTypeError, JsonTypeError, ProtobufTypeError are ValueErrors
            raise StromOptionError(f"the {side.side} schema (id {schema_id}) has no Spark type: {exc}") from None
        at = [f.name for f in fields].index(side.side)
        fields[at] = StructField(side.side, data_type, True, {SCHEMA_ID_KEY: schema_id})
    if opts.mode == PERMISSIVE:
        fields += [StructField(f"_corrupt_{side.side}", BinaryType(), True) for side in opts.sides()]
    return StructType(fields)


def protobuf_schema(opts: TypedOptions, schema_id: int):
    """The message classes of a registered Protobuf schema, its references fetched too."""
    from strom.spark.protobuf_types import registered

    client = registry_client(opts.registry)
    return registered(client, client.get_schema(schema_id))


def schema_ids(schema) -> dict[str, int]:
    """{side: reader schema id} from the metadata of a source schema's typed columns."""
    return {f.name: int(f.metadata[SCHEMA_ID_KEY]) for f in schema.fields if SCHEMA_ID_KEY in (f.metadata or {})}


class DecodeError(RuntimeError):
    """A record that does not decode, in FAILFAST mode."""


_decoders: dict[tuple, object] = {}


def _decoder(opts: TypedOptions, side: SideFormat, schema_id: int, arrow_type):
    from strom.spark.avro_columns import AvroColumnDecoder
    from strom.spark.json_columns import JsonColumnDecoder
    from strom.spark.protobuf_types import ProtobufColumnDecoder

    key = (tuple(sorted(opts.registry.items())), side.format, side.message, schema_id, str(arrow_type))
    with _clients_lock:
        found = _decoders.get(key)
    if found is None:

        @functools.cache
        def known(i: int) -> bool:
            """JSON and Protobuf values are read with the reader's schema: the writer's id need only be registered."""
            try:
                writer_schema_text(opts, i, _SCHEMA_TYPES[side.format])
                return True
            except LookupError:
                return False

        if side.format == JSON:
            found = JsonColumnDecoder(arrow_type, known)
        elif side.format == PROTOBUF:
            found = ProtobufColumnDecoder(protobuf_schema(opts, schema_id), arrow_type, known, side.message)
        else:
            text = writer_schema_text(opts, schema_id)
            found = AvroColumnDecoder(text, arrow_type, lambda i: writer_schema_text(opts, i))
        with _clients_lock:
            _decoders[key] = found
    return found


class TypedBatches:
    """Executor side: Kafka-column RecordBatches (binary key and value) to the typed source schema."""

    def __init__(self, opts: TypedOptions, ids: dict[str, int], arrow_schema):
        self.opts = opts
        self.ids = ids
        self.arrow_schema = arrow_schema

    def __call__(self, batch, topic: str, partition: int):
        import pyarrow as pa

        columns = {name: batch.column(name) for name in batch.schema.names}
        for side, schema_id in self.ids.items():
            raw = columns[side]
            form = self.opts.key if side == "key" else self.opts.value
            decoded = _decoder(self.opts, form, schema_id, self.arrow_schema.field(side).type).decode(raw)
            if decoded.bad.any():
                if self.opts.mode == FAILFAST:
                    offsets = batch.column("offset").to_numpy()
                    row = int(decoded.bad.argmax())
                    why = decoded.reasons.get(row, "does not decode")
                    raise DecodeError(
                        f"the {side} at topic {topic} partition {partition} offset {int(offsets[row])} "
                        f"does not decode as {_SCHEMA_TYPES[form.format]} (reader schema id {schema_id}): {why}. "
                        f"{int(decoded.bad.sum())} such record(s) in this batch; option mode=PERMISSIVE "
                        f"reads them as a null {side} with the bytes in _corrupt_{side}"
                    )
                columns[f"_corrupt_{side}"] = (
                    pa.array(raw)
                    .filter(pa.array(decoded.bad))
                    .take(pa.array(_positions(decoded.bad), mask=~decoded.bad))
                )
            elif self.opts.mode == PERMISSIVE:
                columns[f"_corrupt_{side}"] = pa.nulls(len(raw), pa.binary())
            columns[side] = decoded.column
        return pa.RecordBatch.from_arrays([columns[f.name] for f in self.arrow_schema], schema=self.arrow_schema)


def _positions(mask):
    import numpy as np

    out = np.zeros(len(mask), np.int64)
    out[mask] = np.arange(int(mask.sum()))
    return out


# -- the sink -------------------------------------------------------------------------------------


class WriterSchema(NamedTuple):
    """The schema the sink writes one side with, as its tasks need it."""

    schema_id: int
    text: str  # Avro: with what its references define written in (schema_references.avro_self_contained)
    referenced: tuple[tuple[str, str], ...] = ()  # Protobuf: (import name, text) of what it imports


def writer_schema(opts: TypedOptions, side: SideFormat, data_type, topic: str | None) -> WriterSchema:
    """The schema the sink writes ``side`` with: registered now if auto.register.schemas."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    from pyspark.sql.types import StructType

    from strom.spark import avro_types, json_types, protobuf_types
    from strom.spark.schema_references import avro_self_contained, referenced

    if side.subject is None and topic is None:
        raise StromOptionError(
            f"{side.side}.format={side.format} needs the 'topic' option or option '{side.side}.subject'"
        )
    subject = side.subject or f"{topic}-{side.side}"
    schema_type = _SCHEMA_TYPES[side.format]
    client = registry_client(opts.registry)
    try:
        if not opts.auto_register and side.schema_text is None:
            latest = client.get_latest_version(subject)
            if (latest.schema.schema_type or "AVRO") != schema_type:
                raise StromOptionError(
                    f"{side.side}.format={side.format}, but the latest {subject} is of type {latest.schema.schema_type}"
                )
            if side.format == AVRO:
                return WriterSchema(latest.schema_id, avro_text(client, latest.schema))
            imported = referenced(client, latest.schema.references) if side.format == PROTOBUF else []
            return WriterSchema(latest.schema_id, latest.schema.schema_str, tuple(imported))
        text = side.schema_text
        if text is None:
            if not isinstance(data_type, StructType):
                raise StromOptionError(
                    f"column {side.side!r} must be a struct for {side.side}.format={side.format}, "
                    f"or give option '{side.side}.schema'"
                )
            if side.format == PROTOBUF:
                text = protobuf_types.proto_schema(data_type)
            else:
                derived = (
                    avro_types.avro_schema(data_type) if side.format == AVRO else json_types.json_schema(data_type)
                )
                text = json.dumps(derived)
        references = _references_of(client, side, text)
        imported = referenced(client, references)
        written = text
        if side.format == PROTOBUF:
            try:
                parsed = protobuf_types.load(text, imported)
            except protobuf_types.ProtobufTypeError as exc:
                raise StromOptionError(f"option '{side.side}.schema' is not a Protobuf schema: {exc}") from None
            protobuf_types.reader_message(parsed, side.message)  # a ProtobufTypeError names the choices
        if side.format == AVRO:
            from strom.spark.avro_columns import parse

            written = avro_self_contained(text, [other for _, other in imported])
            try:
                parse(written)
            except (ValueError, TypeError, KeyError) as exc:
                hint = (
                    ""
                    if references
                    else f" (a type another subject defines needs option '{side.side}.schema.references')"
                )
                raise StromOptionError(f"option '{side.side}.schema' is not an Avro schema: {exc}{hint}") from None
        carried = tuple(imported) if side.format == PROTOBUF else ()
        schema = Schema(text, schema_type, references)
        if opts.auto_register:
            return WriterSchema(client.register_schema(subject, schema), written, carried)
        return WriterSchema(client.lookup_schema(subject, schema).schema_id, written, carried)
    except (avro_types.AvroTypeError, json_types.JsonTypeError, protobuf_types.ProtobufTypeError) as exc:
        raise StromOptionError(f"column {side.side!r}: {exc}") from None
    except SchemaRegistryError as exc:
        raise _registry_error(exc, f"subject {subject}") from None
    except OSError as exc:
        raise _registry_error(exc, f"cannot reach {opts.registry.get('url')}") from None


def _references_of(client, side: SideFormat, text: str) -> list:
    """The references (confluent-kafka's ``SchemaReference``) a sink schema is registered with:
    option ``<side>.schema.references``; without it, for a ``.proto`` schema each import under the
    subject of its name at its latest version, as confluent-kafka's ProtobufSerializer names them
    (reference_subject_name_strategy), and none for Avro and JSON (their serializers register the
    references they are given)."""
    from confluent_kafka.schema_registry import SchemaReference
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from strom.spark import protobuf_types

    wanted = side.references
    if wanted is None:
        wanted = tuple((name, name, None) for name in protobuf_types.imports(text)) if side.format == PROTOBUF else ()
    found = []
    for name, subject, version in wanted:
        try:
            registered = client.get_version(subject, version) if version else client.get_latest_version(subject)
        except SchemaRegistryError as exc:
            if exc.http_status_code != 404:
                raise
            named = "is named" if side.references is not None else "is imported"
            raise StromOptionError(
                f"{side.side}.schema: reference {name!r} {named} as subject {subject}"
                f"{'' if version is None else f' version {version}'}, which the registry does not have ({exc}); "
                f"register it first, or name it with option '{side.side}.schema.references'"
            ) from None
        found.append(SchemaReference(name, subject, registered.version))
    return found


def column_encoder(side: SideFormat, written: WriterSchema):
    """The sink's encoder of one side: an Arrow column of Spark rows to a list of framed bytes."""
    schema_text, schema_id = written.text, written.schema_id
    if side.format == JSON:
        from strom.spark.json_columns import JsonRowEncoder

        encode = JsonRowEncoder(schema_id)
        return lambda column: [encode(row) for row in column.to_pylist()]
    if side.format == PROTOBUF:
        from strom.spark.protobuf_types import ProtobufColumnEncoder

        return ProtobufColumnEncoder(schema_text, schema_id, side.message, written.referenced).encode
    from strom.spark.avro_encoding import AvroColumnEncoder

    return AvroColumnEncoder(schema_text, schema_id).encode
