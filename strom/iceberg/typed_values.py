"""JSON Schema and Protobuf values in the Iceberg schema modes: a schema's columns, and one
record's value as those columns take it (Avro is ``strom.iceberg.avro_columns``).

Both go through Arrow types, the mappings the Spark source uses too
(``strom.iceberg.json_columns``, ``strom.iceberg.protobuf_columns``), turned here into Iceberg
columns, every one optional (a column a newer version adds has no value in older records):

- JSON Schema: an object's properties are the columns; a document is read by property name
  (properties the schema lacks are ignored, missing ones are null), a ``date-time`` string as an
  instant. A body that is not JSON, not an object, or holds a value of another type than its
  column is a dead letter with the reason.
- Protobuf: a value's message indexes (Confluent's wire format) name the message it holds, and
  that message's fields are its columns (``ProtobufReader.message``: one reader per message, as
  Redpanda resolves a record's type from its schema id and message indexes); the value is parsed
  with the reader's descriptor (by field number, whatever version wrote it). In
  ``value_schema_latest`` the reader is the latest version's message of the same full name
  (``ProtobufReader.named``). The schema comes as descriptors (``RegisteredSchema.descriptors``),
  made by the broker from the ``.proto`` text: ``.proto`` parsing lives in ``strom.schemas``, above
  this layer.

Schema evolution is the table's: a new version's new fields become new nullable columns by name
(``_evolve`` in the worker); what the registry's compatibility check allowed is what reaches it.
"""

from __future__ import annotations

import json
from itertools import count
from typing import Any

import pyarrow as pa

from strom.iceberg import json_columns, protobuf_columns
from strom.iceberg.avro_columns import RESERVED, UnsupportedSchema

PREFIX_SIZE = 5


class TypedReader:
    """The columns of one registered JSON or Protobuf schema and how a value is read into them."""

    schema_type = ""
    value_type: pa.DataType

    def fields(self, first_id: int) -> list[Any]:
        """The schema's value columns (an object's or message's fields; one ``value`` column for
        any other JSON type), numbered from ``first_id``."""
        from pyiceberg.types import NestedField

        ids = count(first_id)
        if pa.types.is_struct(self.value_type):
            clash = [f.name for f in self.value_type if f.name in RESERVED]
            if clash:
                raise UnsupportedSchema(f"the field {clash[0]} has the name of a column strom writes itself")
            return [NestedField(next(ids), f.name, _iceberg(f.type, ids), required=False) for f in self.value_type]
        return [NestedField(next(ids), "value", _iceberg(self.value_type, ids), required=False)]

    def read(self, value: bytes, at: int = PREFIX_SIZE) -> dict:
        """The value (its body from ``at``, past the prefix) as its columns take it; ValueError
        saying why it cannot be."""
        raise NotImplementedError


class JsonReader(TypedReader):
    schema_type = "JSON"

    def __init__(self, text: str):
        try:
            self.value_type = json_columns.arrow_type(json.loads(text))
        except json_columns.UnsupportedJsonSchema as exc:
            raise UnsupportedSchema(str(exc)) from None
        self.convert = json_columns.converter(self.value_type)
        self.is_object = pa.types.is_struct(self.value_type)

    def read(self, value: bytes, at: int = PREFIX_SIZE) -> dict:
        try:
            document = json.loads(value[at:])
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if self.is_object and not isinstance(document, dict):
            raise ValueError(f"not a JSON object but {type(document).__name__}")
        if self.convert is not None:
            document = self.convert(document)
        return document if self.is_object else {"value": document}


class ProtobufMessage(TypedReader):
    """One message of a Protobuf schema: its columns, and a value's message bytes read into them."""

    schema_type = "PROTOBUF"

    def __init__(self, descriptor: Any, path: tuple[int, ...]):
        try:
            self.value_type = protobuf_columns.arrow_type(descriptor)
        except protobuf_columns.UnsupportedMessage as exc:
            raise UnsupportedSchema(str(exc)) from None
        self.cls = protobuf_columns.message_class(descriptor)
        self.name, self.path = descriptor.full_name, path

    def read(self, value: bytes, at: int = PREFIX_SIZE) -> dict:
        """``at``: where the message's bytes start, past the prefix and the message indexes."""
        from google.protobuf.message import DecodeError

        message = self.cls()
        try:
            message.ParseFromString(value[at:])
        except (DecodeError, RuntimeError) as exc:
            raise ValueError(f"not a {self.name}: {exc}") from None
        return protobuf_columns.as_dict(message)


class ProtobufReader:
    """A registered Protobuf schema: the messages its values may name, each read once."""

    schema_type = "PROTOBUF"

    def __init__(self, descriptors: tuple[bytes, ...]):
        if not descriptors:
            raise UnsupportedSchema("no descriptor of the schema was given")
        self.schema = protobuf_columns.ProtobufSchema(descriptors)
        self._messages: dict[tuple[int, ...], ProtobufMessage | str] = {}

    def message(self, path: tuple[int, ...]) -> ProtobufMessage | str:
        """The message that message indexes ``path`` name, or why none can be read."""
        found = self._messages.get(path)
        if found is None:
            try:
                descriptor = self.schema.message(path)
            except IndexError:
                found = f"message indexes {list(path)} name no message of the schema"
            else:
                try:
                    found = ProtobufMessage(descriptor, path)
                except UnsupportedSchema as exc:
                    found = f"message {descriptor.full_name}: {exc}"
            self._messages[path] = found
        return found

    def named(self, full_name: str) -> ProtobufMessage | str:
        """The message of this schema called ``full_name``, or why there is none."""
        try:
            descriptor = self.schema.named(full_name)
        except KeyError as exc:
            return str(exc.args[0]) if exc.args else f"the schema has no message {full_name}"
        if descriptor.full_name != full_name:  # named() also takes names relative to the package
            return f"the schema has no message {full_name!r}"
        return self.message(self.schema.path_of(descriptor))


def _iceberg(type_: pa.DataType, ids: Any) -> Any:
    """The Iceberg type of an Arrow type of the two mappings (nested fields optional, ids from ``ids``)."""
    from pyiceberg import types as t

    simple = {
        pa.bool_(): t.BooleanType(),
        pa.int32(): t.IntegerType(),
        pa.int64(): t.LongType(),
        pa.float32(): t.FloatType(),
        pa.float64(): t.DoubleType(),
        pa.string(): t.StringType(),
        pa.binary(): t.BinaryType(),
    }
    if type_ in simple:
        return simple[type_]
    if pa.types.is_timestamp(type_):
        return t.TimestamptzType() if type_.tz else t.TimestampType()
    if pa.types.is_decimal(type_):
        return t.DecimalType(type_.precision, type_.scale)
    if pa.types.is_list(type_):
        return t.ListType(next(ids), _iceberg(type_.value_type, ids), element_required=False)
    if pa.types.is_map(type_):
        key_id, value_id = next(ids), next(ids)
        return t.MapType(key_id, _iceberg(type_.key_type, ids), value_id, _iceberg(type_.item_type, ids), False)
    if pa.types.is_struct(type_):
        return t.StructType(*(t.NestedField(next(ids), f.name, _iceberg(f.type, ids), required=False) for f in type_))
    raise UnsupportedSchema(f"the column type {type_} has no Iceberg type")
