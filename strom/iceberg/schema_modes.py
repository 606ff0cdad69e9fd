"""The schema modes: which schema each record's value was written with, and its decoded value.

``value_schema_id_prefix``: a value starts with Confluent's wire format prefix (magic byte 0, a
4-byte big-endian schema id) and the rest is Avro, JSON or Protobuf written with that schema; the
table's columns are the union of every schema its records used (new columns added, types widened
as Iceberg allows). ``value_schema_latest``: the same prefix names the writer's schema, and the
value is read as the latest version of ``<topic>-value`` (Avro's schema resolution, by fastavro;
JSON by property name; Protobuf by field number), so the columns are the latest version's.
Avro is read by ``strom.iceberg.avro_columns``, JSON Schema and Protobuf by
``strom.iceberg.typed_values``.

A Protobuf schema holds several messages, and a value's message indexes name the one it holds
(Confluent's serializer writes them; Redpanda resolves a record's type from its schema id and
message indexes the same way). The columns are therefore keyed by (schema id, message indexes),
``Key``: a record fills the columns of the message it names, and a table whose records name
different messages has the union of their columns by name, as it has for the versions of one
schema; a message whose columns clash with the table's (the same name, a type Iceberg cannot
widen to) cannot join it and its records are dead letters. In ``value_schema_latest`` a record
is read as the latest version's message of the same full name (a message the latest version
lacks: a dead letter).

The broker hands the worker the registry as it knows it (``SchemaSet``: the schema texts by id,
the subject's latest id, and whether its view of ``_schemas`` has read everything its replica
holds). A record that cannot be translated gets a reason and goes to the dead-letter table; one
whose id the view does not know *yet* (``settled`` false) is waited for: translation of that
partition stops before it until the next round.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Any

from strom.iceberg import avro_columns, protobuf_columns, typed_values
from strom.storage.iceberg_mode import parse_mode

MAGIC = 0
PREFIX = struct.Struct(">bI")
MODES = ("value_schema_id_prefix", "value_schema_latest")


@dataclass(frozen=True)
class RegisteredSchema:
    schema_type: str  # AVRO, JSON or PROTOBUF
    text: str
    referenced: tuple[str, ...] = ()  # the texts of the schemas it references, referenced ones first
    # PROTOBUF: the serialized FileDescriptorProtos of the schema, the files it imports first (the
    # broker parses .proto text; this layer is below strom.schemas)
    descriptors: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class SchemaSet:
    """What the broker's view of ``_schemas`` says, for one topic's round."""

    by_id: dict[int, RegisteredSchema] = field(default_factory=dict)
    latest_id: int | None = None  # the latest live version of ``<topic>-value``
    subject: str = ""
    settled: bool = True  # the view has read all its replica of _schemas holds: an unknown id is unknown


class Wait:
    """The record's schema id is not in the broker's view yet: translate it in a later round."""


WAIT = Wait()


Key = tuple[int, tuple[int, ...]]  # (schema id, the Protobuf message indexes; () for Avro and JSON)


class Decoded:
    """A decoded value: ``value`` fills the columns of ``columns`` (its writer's schema and
    message, or the latest version's in ``value_schema_latest``)."""

    __slots__ = ("columns", "schema_id", "value")

    def __init__(self, schema_id: int, value: Any, columns: Key | None = None):
        self.schema_id, self.value = schema_id, value
        self.columns: Key = columns if columns is not None else (schema_id, ())


class Decoder:
    """Decodes values for one round; each schema is parsed (and each of its messages mapped to
    columns) once."""

    def __init__(self, mode: str, schemas: SchemaSet, protobuf_name: str = ""):
        """``mode`` may carry value_schema_latest's options (strom.storage.iceberg_mode): its
        protobuf_name is the message records are read as, unless ``protobuf_name`` is given."""
        parsed = parse_mode(mode)
        self.mode, self.schemas = parsed.name, schemas
        self.protobuf_name = protobuf_name or parsed.protobuf_name
        self._parsed: dict[int, Any] = {}  # id -> fastavro's parsed schema, a reader, or why it has none
        self._fields: dict[Key, list[Any] | str] = {}
        self._routes: dict[Key, tuple[Any, Any, Any, Key] | str] = {}
        self.reader_id = schemas.latest_id if self.mode == "value_schema_latest" else None
        from fastavro import schemaless_reader  # imported once a round, not once a record

        self._read = schemaless_reader

    def parsed(self, schema_id: int) -> Any:
        """The parsed schema of an id, or a str saying why there is none; WAIT for an id not known yet."""
        if schema_id in self._parsed:
            return self._parsed[schema_id]
        registered = self.schemas.by_id.get(schema_id)
        if registered is None:
            if not self.schemas.settled:
                return WAIT
            found: Any = f"unknown schema id {schema_id}"
        elif registered.schema_type in ("JSON", "PROTOBUF"):
            try:
                found = (
                    typed_values.JsonReader(registered.text)
                    if registered.schema_type == "JSON"
                    else typed_values.ProtobufReader(registered.descriptors)
                )
            except Exception as exc:  # UnsupportedSchema, a descriptor the pool refuses, JSON that does not parse
                found = f"schema id {schema_id}: {exc}"
        elif registered.schema_type != "AVRO":
            found = (
                f"schema id {schema_id} is a {registered.schema_type} schema; strom translates Avro, JSON and Protobuf"
            )
        else:
            try:
                found = avro_columns.parse(registered.text, registered.referenced)
            except Exception as exc:  # fastavro's parse errors are no ValueError
                found = f"schema id {schema_id} does not parse: {exc}"
        self._parsed[schema_id] = found
        return found

    def base(self) -> Key | None:
        """The columns a ``value_schema_latest`` table starts with, before any record: the latest
        version's (None in the other mode, and for a Protobuf schema, whose columns are those of
        the messages its records name, unless the mode's protobuf_name names the one)."""
        if self.reader_id is None:
            return None
        reader = self.parsed(self.reader_id)
        if isinstance(reader, typed_values.ProtobufReader):
            message = reader.named(self.protobuf_name) if self.protobuf_name else None
            return (self.reader_id, message.path) if isinstance(message, typed_values.ProtobufMessage) else None
        return (self.reader_id, ())

    def label(self, key: Key) -> str:
        """How reasons name the columns of ``key``: its schema id, and its message if Protobuf."""
        parsed = self._parsed.get(key[0])
        if isinstance(parsed, typed_values.ProtobufReader):
            message = parsed.message(key[1])
            if isinstance(message, typed_values.ProtobufMessage):
                return f"schema id {key[0]} message {message.name}"
        return f"schema id {key[0]}"

    def fields(self, key: Key | int) -> list[Any] | str:
        """The value columns of a schema (and message), or why it has none."""
        if isinstance(key, int):
            key = (key, ())
        if key not in self._fields:
            parsed = self.parsed(key[0])
            if isinstance(parsed, typed_values.ProtobufReader):
                parsed = parsed.message(key[1] or (0,))
            if isinstance(parsed, (str, Wait)):
                self._fields[key] = parsed if isinstance(parsed, str) else f"unknown schema id {key[0]}"
            else:
                try:
                    if isinstance(parsed, typed_values.TypedReader):
                        self._fields[key] = parsed.fields(11)
                    else:
                        self._fields[key] = avro_columns.value_fields(parsed, 11)
                except avro_columns.UnsupportedSchema as exc:
                    self._fields[key] = f"{self.label(key)}: {exc}"
        return self._fields[key]

    def _route(self, schema_id: int, path: tuple[int, ...]) -> tuple[Any, Any, Any, Key] | str | Wait:
        """How a value of ``schema_id`` (and Protobuf message ``path``) is read: (writer, reader or
        None, converter, the key of the columns it fills), or why it cannot be; worked out once a
        key (a batch mostly repeats one or two)."""
        key = (schema_id, path)
        found = self._routes.get(key)
        if found is not None:
            return found
        writer = self.parsed(schema_id)
        if isinstance(writer, (str, Wait)):
            return writer  # not kept: a Wait ends the partition's round anyway
        if isinstance(writer, typed_values.ProtobufReader):
            writer = writer.message(path)
            if isinstance(writer, str):
                self._routes[key] = f"schema id {schema_id}: {writer}"
                return self._routes[key]
        reader, columns = None, key
        if self.mode == "value_schema_latest":
            reader, columns, found = self._latest(schema_id, writer)
        if found is None:
            fields = self.fields(columns)
            if isinstance(fields, str):
                found = fields
            elif isinstance(writer, typed_values.TypedReader):
                found = (writer, reader, None, columns)
            else:
                found = (writer, reader, self._converter(columns), columns)
        self._routes[key] = found
        return found

    def _latest(self, schema_id: int, writer: Any) -> tuple[Any, Key, str | None]:
        """(the latest version's reader for a value ``writer`` wrote, the key of its columns, or why
        there is none) in ``value_schema_latest``; a Protobuf message is read as the latest
        version's message of the same full name."""
        subject = self.schemas.subject
        if self.reader_id is None:
            return None, (schema_id, ()), f"the subject {subject} has no schema"
        reader = self.parsed(self.reader_id)
        if isinstance(reader, (str, Wait)):
            why = reader if isinstance(reader, str) else "unknown"
            return None, (schema_id, ()), f"the latest schema of {subject}: {why}"
        if _kind(reader) != _kind(writer):
            return (
                None,
                (schema_id, ()),
                f"schema id {schema_id} is {_kind(writer)}, the latest schema of {subject} "
                f"(id {self.reader_id}) is {_kind(reader)}",
            )
        if isinstance(reader, typed_values.ProtobufReader):
            message = reader.named(self.protobuf_name or writer.name)  # the option, else the writer's message
            if isinstance(message, str):
                return None, (schema_id, ()), f"the latest schema of {subject} (id {self.reader_id}): {message}"
            return message, (self.reader_id, message.path), None
        return reader, (self.reader_id, ()), None

    def decode(self, value: bytes | None) -> Decoded | str | Wait:
        """The record's schema id and its value as its columns take it, or why it cannot be translated."""
        if value is None:
            return "null value: no schema id prefix"
        if len(value) < PREFIX.size or value[0] != MAGIC:
            return "no schema id prefix (magic byte 0 and a 4-byte schema id)"
        schema_id = PREFIX.unpack_from(value)[1]
        path: tuple[int, ...] = ()
        at = PREFIX.size
        if isinstance(self.parsed(schema_id), typed_values.ProtobufReader):
            try:
                path, at = protobuf_columns.message_indexes(value, PREFIX.size)
            except (IndexError, ValueError) as exc:
                return f"schema id {schema_id}: message indexes do not decode: {exc}"
        route = self._route(schema_id, path)
        if isinstance(route, (str, Wait)):
            return route
        writer, reader, convert, columns = route
        if isinstance(writer, typed_values.TypedReader):
            try:
                return Decoded(schema_id, (reader or writer).read(value, at), columns)
            except ValueError as exc:
                as_latest = f" as {self.label(columns)}" if reader is not None else ""
                return f"bytes do not decode with {self.label((schema_id, path))}{as_latest}: {exc}"
        buffer = io.BytesIO(value)
        buffer.seek(PREFIX.size)
        try:
            decoded = self._read(buffer, writer, reader)
        except Exception as exc:  # EOFError, fastavro's SchemaResolutionError, UnicodeDecodeError...
            as_latest = f" as schema id {self.reader_id}" if reader is not None else ""
            return f"bytes do not decode with schema id {schema_id}{as_latest}: {type(exc).__name__}: {exc}"
        left = len(value) - buffer.tell()
        if left:
            return f"{left} bytes left over after decoding with schema id {schema_id}"
        return Decoded(schema_id, convert(decoded) if convert is not None else decoded, columns)

    def _converter(self, columns: Key) -> Any:
        """From fastavro's value to the columns' (None: the same), for the schema whose columns it fills."""
        parsed = self.parsed(columns[0])
        convert = avro_columns.converter(parsed)
        if avro_columns.is_record(parsed):
            return convert
        return lambda v: {"value": convert(v) if convert else v}


def _kind(parsed: Any) -> str:
    typed = (typed_values.TypedReader, typed_values.ProtobufReader)
    return parsed.schema_type if isinstance(parsed, typed) else "AVRO"


def value_names(arrow_schema: Any) -> list[str]:
    """The value's columns of a schema-mode table: all but ``kafka`` and ``key``."""
    return [f.name for f in arrow_schema if f.name not in ("kafka", "key")]


def value_arrays(arrow_schema: Any, values: list[Any]) -> list[Any]:
    """One Arrow array per value column of ``arrow_schema`` from decoded values (dicts by column;
    a column a value lacks is null). Raises pyarrow's errors for a value that does not fit."""
    import pyarrow as pa

    return [
        pa.array([v.get(name) for v in values], arrow_schema.field(name).type) for name in value_names(arrow_schema)
    ]
