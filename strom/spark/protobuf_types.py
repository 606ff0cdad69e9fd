"""``value.format=protobuf`` in the ``strom`` source and sink: registered Protobuf schemas as Spark
types, framed values as Arrow columns, and Spark structs back to framed messages.

The reader's message is the schema's first message (as Confluent's RecordNameStrategy names a
Protobuf schema), or the one option ``value.protobuf.message`` names; its Spark type is ``strom.iceberg.protobuf_columns``'s Arrow type of it. Values
are parsed with the reader's descriptor whatever version wrote them: Protobuf resolves by field
number (a field the reader lacks is skipped, one the writer lacked is unset), which is what the
registry's Protobuf compatibility rules guarantee to be meaningful.

The sink writes the schema given as ``value.schema`` (``.proto`` text; its imports of other
schemas are schema references, resolved in ``strom.spark.typed`` as confluent-kafka's
``ProtobufSerializer`` names them) or, without it, one derived from the column's Spark type (``proto_schema``): a proto3 message whose fields are the
struct's in order, numbered from 1, nullable scalars as ``optional`` (so that null and 0 stay
apart), structs as nested messages, arrays as ``repeated``, maps as ``map<K, V>`` and timestamps
as ``google.protobuf.Timestamp``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from strom.iceberg import protobuf_columns as pc
from strom.spark.avro_columns import Decoded
from strom.spark.schema_references import referenced


class ProtobufTypeError(ValueError):
    """A Spark type with no Protobuf type here, or a schema that does not parse."""


def load(text: str, referenced: Sequence[tuple[str, str]] = ()) -> pc.ProtobufSchema:
    """The message classes of ``.proto`` text (``referenced``: (import name, text) of its references)."""
    from strom.schemas.protobuf import InvalidSchemaError, parse

    try:
        parsed, _ = parse(text, list(referenced))
    except InvalidSchemaError as exc:
        raise ProtobufTypeError(str(exc)) from None
    return pc.ProtobufSchema([*parsed.dependencies.values(), parsed.file])


def registered(client: Any, schema: Any) -> pc.ProtobufSchema:
    """The message classes of a registered schema (confluent-kafka's ``Schema``), its references
    fetched from the registry, theirs first."""
    return load(schema.schema_str, referenced(client, schema.references))


# imports that need no reference: confluent-kafka's ProtobufSerializer registers none for them (its
# _is_builtin), and strom.schemas.protobuf knows the well-known types itself
BUILTIN_IMPORTS = ("google/protobuf/", "google/type/", "confluent/")


def imports(text: str) -> list[str]:
    """The imports of ``.proto`` text that name other schemas, in order (none of ``BUILTIN_IMPORTS``).
    Text that does not parse has none here: ``load`` says what is wrong with it."""
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    def quiet(recognizer: Any) -> None:
        recognizer.removeErrorListeners()  # ANTLR's default prints to stderr

    try:
        tree = Parser(setup_lexer=quiet, setup_parser=quiet).parse(text)
    except Exception:
        return []
    names = [e.name for e in tree.file_elements if isinstance(e, ast.Import)]
    return [name for name in names if not name.startswith(BUILTIN_IMPORTS)]


def reader_message(schema: pc.ProtobufSchema, name: str | None):
    """The message ``value.protobuf.message`` names (the first one without it)."""
    try:
        return schema.named(name)
    except KeyError as exc:
        raise ProtobufTypeError(exc.args[0]) from None


def spark_type(schema: pc.ProtobufSchema, message: str | None = None) -> DataType:
    """The Spark type of the schema's message ``message`` (its first one by default)."""
    from pyspark.sql.pandas.types import from_arrow_type

    try:
        return from_arrow_type(pc.arrow_type(reader_message(schema, message)))
    except pc.UnsupportedMessage as exc:
        raise ProtobufTypeError(str(exc)) from None


class ProtobufColumnDecoder:
    """Framed values to ``arrow_type`` (the source's column type) with ``schema``'s message
    ``message`` (the first by default): values must name it by their message indexes; ``known(id)`` says whether an id is a registered Protobuf schema (cached by ``strom.spark.typed``)."""

    def __init__(
        self,
        schema: pc.ProtobufSchema,
        arrow_type: pa.DataType,
        known: Callable[[int], bool],
        message: str | None = None,
    ):
        self.descriptor = reader_message(schema, message)
        self.path = schema.path_of(self.descriptor)
        self.arrow_type = arrow_type
        self._is_known = known

    def decode(self, values: pa.Array) -> Decoded:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        column, bad, reasons = pc.decode(values, self.descriptor, self.path, self._is_known)
        return Decoded(column.cast(self.arrow_type), bad, reasons)


class ProtobufColumnEncoder:
    """The sink's encoder: an Arrow column of structs to values of message ``message`` (the first
    by default) framed with ``schema_id`` and its message indexes; ``referenced``: (import name,
    text) of the schemas the schema imports."""

    def __init__(
        self,
        schema_text: str,
        schema_id: int,
        message: str | None = None,
        referenced: Sequence[tuple[str, str]] = (),
    ):
        schema = load(schema_text, referenced)
        descriptor = reader_message(schema, message)
        self.cls = pc.message_class(descriptor)
        self.prefix = pc.frame(schema_id, schema.path_of(descriptor))

    def encode(self, column: pa.Array) -> list[bytes | None]:
        cls, prefix = self.cls, self.prefix
        return [
            None if row is None else prefix + pc.to_message(row, cls).SerializeToString() for row in column.to_pylist()
        ]


# -- Spark to Protobuf (the sink) -----------------------------------------------------------------

_SCALARS: list[tuple[type, str]] = [
    (LongType, "int64"),
    (IntegerType, "int32"),
    (ShortType, "int32"),
    (ByteType, "int32"),
    (DoubleType, "double"),
    (FloatType, "float"),
    (BooleanType, "bool"),
    (StringType, "string"),
    (BinaryType, "bytes"),
]
_TIMESTAMP = ".google.protobuf.Timestamp"


def proto_schema(struct: StructType, name: str = "Record") -> str:
    """``.proto`` text (proto3) of a message for rows of ``struct`` (module docstring)."""
    body = _message(struct, name, "")
    imports = 'import "google/protobuf/timestamp.proto";\n' if _TIMESTAMP in body else ""
    return f'syntax = "proto3";\n{imports}{body}'


def _message(struct: StructType, name: str, indent: str) -> str:
    inner = indent + "  "
    lines, nested = [], []
    for number, field in enumerate(struct.fields, 1):
        kind, label, more = _field(field.dataType, field.name, field.nullable, inner)
        nested += more
        lines.append(f"{inner}{label}{kind} {field.name} = {number};")
    return f"{indent}message {name} {{\n" + "".join(line + "\n" for line in lines + nested) + f"{indent}}}\n"


def _field(data_type: DataType, name: str, nullable: bool, indent: str) -> tuple[str, str, list[str]]:
    """(type, label, nested message texts) of one field."""
    if isinstance(data_type, ArrayType):
        if isinstance(data_type.elementType, (ArrayType, MapType)):
            raise ProtobufTypeError(f"column {name!r}: an array of arrays or maps has no Protobuf type")
        kind, _, nested = _field(data_type.elementType, name, False, indent)
        return kind, "repeated ", nested
    if isinstance(data_type, MapType):
        key, _, _ = _field(data_type.keyType, name, False, indent)
        if key not in ("int64", "int32", "bool", "string"):
            raise ProtobufTypeError(f"column {name!r}: a map key of type {data_type.keyType.simpleString()}")
        if isinstance(data_type.valueType, (ArrayType, MapType)):
            raise ProtobufTypeError(f"column {name!r}: a map of arrays or maps has no Protobuf type")
        value, _, nested = _field(data_type.valueType, name, False, indent)
        return f"map<{key}, {value}>", "", nested
    if isinstance(data_type, StructType):
        message = "".join(part.title() for part in name.split("_")) or "Nested"
        return message, "", [_message(data_type, message, indent).rstrip("\n")]
    if isinstance(data_type, (TimestampType, TimestampNTZType)):
        return _TIMESTAMP, "", []
    if isinstance(data_type, DecimalType) and (data_type.precision, data_type.scale) == (20, 0):
        return "uint64", "optional " if nullable else "", []
    for spark, proto in _SCALARS:
        if isinstance(data_type, spark):
            return proto, "optional " if nullable else "", []
    raise ProtobufTypeError(
        f"column {name!r}: Spark type {data_type.simpleString()} has no Protobuf type here; give option 'value.schema'"
    )
