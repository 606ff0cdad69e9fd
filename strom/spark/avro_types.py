"""Avro schemas as Spark types, and Spark types as Avro schemas: the mapping of Spark's ``from_avro``
and ``to_avro`` (its ``SchemaConverters``), for users who cannot load spark-avro's jar.

Avro to Spark (``spark_type``):

- record → struct (field order kept), array → array, map → map<string, ...>;
- a union of null and one type → that type, nullable; a union of int and long → long, of float
  and double → double; any other union → struct<member0, member1, ...> of its non-null branches,
  one of them set per row (Spark's shape);
- enum → string, bytes and fixed → binary, boolean/int/long/float/double/string as themselves;
- logical types: date → date, timestamp-millis and timestamp-micros → timestamp,
  local-timestamp-millis/-micros → timestamp_ntz, decimal (bytes or fixed) → decimal(p, s),
  uuid → string;
- a record that contains itself is refused, as Spark refuses it: a Spark type is finite.

Spark to Avro (``avro_schema``), for the sink when no schema is given or registered: struct →
record (the top one named ``topLevelRecord`` as Spark names it, nested ones after their field),
nullable → ``["null", T]`` with default null (null first, so that the field can be left out by
a later version), the logical types back as above.

Named types are resolved with their namespaces as the Avro specification says, so references
to a type defined earlier (by full or short name) work; this module only reads schemas, it
does not check them: fastavro parses them first (``strom.spark.avro_columns``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

_PRIMITIVE: dict[str, DataType] = {
    "null": NullType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
_LOGICAL: dict[str, DataType] = {
    "date": DateType(),
    "timestamp-millis": TimestampType(),
    "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(),
    "local-timestamp-micros": TimestampNTZType(),
    "uuid": StringType(),
}
NAMED = ("record", "enum", "fixed", "error")


class AvroTypeError(ValueError):
    """An Avro schema that has no Spark type (a recursive record, an unknown name)."""


def full_name(schema: dict, namespace: str | None) -> tuple[str, str | None]:
    """(full name, namespace for names inside it) of a named type, as the Avro specification defines."""
    name = schema["name"]
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    space = schema.get("namespace", namespace)
    return (f"{space}.{name}" if space else name), space


class Names:
    """The named types of one schema, by full name, filled while walking it in document order."""

    def __init__(self) -> None:
        self.types: dict[str, dict] = {}

    def lookup(self, name: str, namespace: str | None) -> tuple[dict, str | None]:
        for candidate in ((f"{namespace}.{name}" if namespace and "." not in name else name), name):
            if candidate in self.types:
                found = self.types[candidate]
                return found, candidate.rsplit(".", 1)[0] if "." in candidate else None
        raise AvroTypeError(f"the Avro schema names an undefined type {name!r}")


def collect_names(schema: Any, namespace: str | None = None, names: Names | None = None) -> Names:
    """Every named type a schema defines, walked in document order."""
    names = names if names is not None else Names()
    if isinstance(schema, list):
        for branch in schema:
            collect_names(branch, namespace, names)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in NAMED:
            _, space = _define(schema, namespace, names)
            for field in schema.get("fields", []):
                collect_names(field["type"], space, names)
        elif kind == "array":
            collect_names(schema["items"], namespace, names)
        elif kind == "map":
            collect_names(schema["values"], namespace, names)
        elif isinstance(kind, (dict, list)):
            collect_names(kind, namespace, names)
    return names


def non_null_branches(union: list) -> list:
    return [b for b in union if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]


def spark_type(schema: Any) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro schema (parsed JSON)."""
    return _spark(schema, None, Names(), ())


def _spark(schema: Any, namespace: str | None, names: Names, inside: tuple[str, ...]) -> tuple[DataType, bool]:
    if isinstance(schema, str):
        if schema in _PRIMITIVE:
            return _PRIMITIVE[schema], schema == "null"
        found, space = names.lookup(schema, namespace)
        key = full_name(found, space)[0]
        if key in inside:
            raise AvroTypeError(f"the Avro record {key!r} contains itself, which no Spark type can hold")
        return _spark_named(found, space, names, inside, defined=True)
    if isinstance(schema, list):
        branches = non_null_branches(schema)
        nullable = len(branches) < len(schema)
        if not branches:
            return NullType(), True
        if len(branches) == 1:
            inner, _ = _spark(branches[0], namespace, names, inside)
            return inner, nullable
        types = [_spark(b, namespace, names, inside)[0] for b in branches]
        simple = {t.simpleString() for t in types}
        if simple <= {"int", "bigint"}:
            return LongType(), nullable
        if simple <= {"float", "double"}:
            return DoubleType(), nullable
        return StructType([StructField(f"member{i}", t, True) for i, t in enumerate(types)]), nullable
    if not isinstance(schema, dict):
        raise AvroTypeError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        if kind == "fixed":
            _define(schema, namespace, names)
        return DecimalType(int(schema["precision"]), int(schema.get("scale", 0))), False
    if logical in _LOGICAL and kind in ("int", "long", "string"):
        return _LOGICAL[logical], False
    if kind in NAMED:
        return _spark_named(schema, namespace, names, inside, defined=False)
    if kind == "array":
        items, nullable = _spark(schema["items"], namespace, names, inside)
        return ArrayType(items, nullable), False
    if kind == "map":
        values, nullable = _spark(schema["values"], namespace, names, inside)
        return MapType(StringType(), values, nullable), False
    if isinstance(kind, (dict, list)) or kind in _PRIMITIVE:
        return _spark(kind, namespace, names, inside)
    if isinstance(kind, str):  # {"type": "SomeName"}
        return _spark(kind, namespace, names, inside)
    raise AvroTypeError(f"not an Avro schema: {schema!r}")


def _define(schema: dict, namespace: str | None, names: Names) -> tuple[str, str | None]:
    key, space = full_name(schema, namespace)
    names.types[key] = schema
    return key, space


def _spark_named(
    schema: dict, namespace: str | None, names: Names, inside: tuple[str, ...], defined: bool
) -> tuple[DataType, bool]:
    key, space = full_name(schema, namespace) if defined else _define(schema, namespace, names)
    kind = schema["type"]
    if kind == "enum":
        return StringType(), False
    if kind == "fixed":
        return BinaryType(), False
    fields = []
    for field in schema.get("fields", []):
        data_type, nullable = _spark(field["type"], space, names, (*inside, key))
        fields.append(StructField(field["name"], data_type, nullable))
    return StructType(fields), False


# -- Spark to Avro (the sink) -------------------------------------------------------------------


def avro_schema(struct: StructType, name: str = "topLevelRecord", namespace: str | None = None) -> dict:
    """An Avro record for rows of ``struct``, as Spark's ``to_avro`` would write them."""
    record: dict = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    fields = []
    for field in struct.fields:
        avro = _avro(field.dataType, field.name, f"{namespace}.{name}" if namespace else name)
        if field.nullable:
            fields.append({"name": field.name, "type": ["null", avro], "default": None})
        else:
            fields.append({"name": field.name, "type": avro})
    record["fields"] = fields
    return record


def _avro(data_type: DataType, field: str, space: str) -> Any:
    simple = {
        BooleanType: "boolean",
        IntegerType: "int",
        LongType: "long",
        FloatType: "float",
        DoubleType: "double",
        BinaryType: "bytes",
        StringType: "string",
        NullType: "null",
    }
    for spark_class, avro in simple.items():
        if isinstance(data_type, spark_class):
            return avro
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(data_type, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(data_type, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": data_type.precision, "scale": data_type.scale}
    if isinstance(data_type, StructType):
        return avro_schema(data_type, field, space)
    if isinstance(data_type, ArrayType):
        items = _avro(data_type.elementType, field, space)
        return {"type": "array", "items": ["null", items] if data_type.containsNull else items}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise AvroTypeError(f"Avro maps have string keys; column {field!r} is {data_type.simpleString()}")
        values = _avro(data_type.valueType, field, space)
        return {"type": "map", "values": ["null", values] if data_type.valueContainsNull else values}
    raise AvroTypeError(f"no Avro type for Spark type {data_type.simpleString()} (column {field!r})")
