"""The bulk Avro decoder against fastavro: values written by fastavro's writer (records, unions,
logical types, arrays and maps, nested) decode to the same rows through the columnar path and
the per-record path, across writer versions, and corrupt values are found row by row with a
reason."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from strom.spark.avro_columns import AvroColumnDecoder
from strom.spark.avro_encoding import AvroColumnEncoder
from strom.spark.avro_types import avro_schema, spark_type

WRITER = {
    "type": "record",
    "name": "Row",
    "namespace": "t",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "name", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "flag", "type": "boolean"},
        {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "HIGH"]}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "either", "type": ["null", "long", "string"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "cost", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 3}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {
            "name": "inner",
            "type": ["null", {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}],
        },
        {"name": "again", "type": ["null", "Inner"], "default": None},
        {"name": "list", "type": {"type": "array", "items": ["null", "string"]}},
        {
            "name": "pairs",
            "type": {
                "type": "map",
                "values": {"type": "record", "name": "Pair", "fields": [{"name": "a", "type": "int"}]},
            },
        },
        {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
    ],
}
# the reader: promotes small to long, drops blob, adds a field with a default, reads "Level" as is
READER = {
    **WRITER,
    "fields": [
        *[f if f["name"] != "small" else {**f, "type": "long"} for f in WRITER["fields"] if f["name"] != "blob"],
        {"name": "added", "type": "string", "default": "dflt"},
    ],
}


def row(i: int) -> dict:
    return {
        "id": i * 1_000_003 - 2**40,
        "small": -i,
        "name": "x" * (i % 9) + "é",
        "blob": bytes(range(i % 5)),
        "ratio": 0.5 * i,
        "score": -1.25 * i,
        "flag": i % 3 == 0,
        "level": "HIGH" if i % 2 else "LOW",
        "note": None if i % 2 else f"note {i}",
        "either": [None, i, f"s{i}"][i % 3],
        "day": dt.date(1969, 12, 1) + dt.timedelta(days=i),
        "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=i * 999_999),
        "local": dt.datetime(2026, 1, 1) + dt.timedelta(milliseconds=i),
        "cost": decimal.Decimal(i * 12345 - 99999) / 1000,
        "hash": bytes([i % 256]) * 4,
        "inner": None if i % 5 == 0 else {"x": i},
        "again": {"x": -i} if i % 4 == 0 else None,
        "list": [None if j % 3 == 0 else f"l{j}" for j in range(i % 5)],
        "pairs": {f"p{j}": {"a": j * i} for j in range(i % 4)},
        "grid": [list(range(j)) for j in range(i % 3)],
    }


def framed(schema: dict, schema_id: int, value: dict) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + schema_id.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


def decoder(reader: dict, schemas: dict[int, dict]) -> AvroColumnDecoder:
    spark, _ = spark_type(reader)

    def lookup(schema_id: int) -> str:
        if schema_id not in schemas:
            raise LookupError(schema_id)
        return json.dumps(schemas[schema_id])

    return AvroColumnDecoder(json.dumps(reader), to_arrow_type(spark, timezone="UTC"), lookup)


@pytest.mark.parametrize("reader", [WRITER, READER], ids=["same-schema", "resolved"])
def test_columnar_and_per_record_paths_agree(reader):
    values = pa.array([framed(WRITER, 7, row(i)) for i in range(300)] + [None], pa.binary())
    columnar = decoder(reader, {7: WRITER})

    def no_fallback(*args):
        raise AssertionError("the columnar path gave up on this batch")

    columnar._per_record = no_fallback  # type: ignore[method-assign]
    fast = columnar.decode(values)
    per_record = decoder(reader, {7: WRITER})
    per_record._columnar[7] = False
    slow = per_record.decode(values)
    assert not fast.bad.any() and not slow.bad.any()
    assert fast.column.type == slow.column.type
    assert fast.column.to_pylist() == slow.column.to_pylist()
    rows = fast.column.to_pylist()
    assert rows[-1] is None  # a null value (a tombstone) is a null row, not a corrupt one
    assert rows[4]["either"] == {"member0": 4, "member1": None} and rows[5]["either"] == {
        "member0": None,
        "member1": "s5",
    }
    if reader is READER:
        assert rows[3]["added"] == "dflt" and "blob" not in rows[3] and rows[3]["small"] == -3
    assert rows[7]["pairs"] == [("p0", {"a": 0}), ("p1", {"a": 7}), ("p2", {"a": 14})]
    assert rows[5]["grid"] == [[], [0]] and rows[4]["list"] == [None, "l1", "l2", None]


def test_corrupt_values_are_found_row_by_row():
    good = framed(WRITER, 7, row(1))
    values = [
        good,
        b"plain text",  # no prefix
        b"\x00\x00\x00\x00\x08" + good[5:],  # an id nobody registered
        good[:-2],  # cut short
        good + b"\x00",  # a byte left over
        good[:5] + b"\xff" * 12,  # a varint that never ends
        good,
    ]
    decoded = decoder(WRITER, {7: WRITER}).decode(pa.array(values, pa.binary()))
    assert np.flatnonzero(decoded.bad).tolist() == [1, 2, 3, 4, 5]
    assert "prefix" in decoded.reasons[1] and "8 is not registered" in decoded.reasons[2]
    assert "left over" in decoded.reasons[4]
    rows = decoded.column.to_pylist()
    assert rows[0] == rows[6] and rows[0]["id"] == row(1)["id"] and rows[1:6] == [None] * 5


def test_sink_schema_from_a_spark_struct_round_trips():
    from pyspark.sql.types import (
        ArrayType,
        DecimalType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    struct = StructType(
        [
            StructField("id", LongType(), False),
            StructField("name", StringType(), True),
            StructField("at", TimestampType(), True),
            StructField("cost", DecimalType(10, 2), True),
            StructField("tags", ArrayType(StringType(), False), True),
            StructField("counts", MapType(StringType(), LongType(), True), True),
            StructField("inner", StructType([StructField("x", LongType(), True)]), True),
        ]
    )
    schema = avro_schema(struct)
    assert spark_type(schema) == (struct, False)
    value = {
        "id": 1,
        "name": None,
        "at": dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.UTC),
        "cost": decimal.Decimal("12.34"),
        "tags": ["a"],
        "counts": {"k": None},
        "inner": {"x": 2},
    }
    column = pa.array([value], to_arrow_type(struct, timezone="UTC"))
    encoder = AvroColumnEncoder(json.dumps(schema), 3)
    (framed_value,) = encoder.encode(column)  # maps and arrays: row by row with fastavro
    assert not encoder.columnar
    back = decoder(schema, {3: schema}).decode(pa.array([framed_value], pa.binary())).column.to_pylist()[0]
    assert back == {**value, "counts": [("k", None)]}


FLAT = {
    **WRITER,
    "fields": [f for f in WRITER["fields"] if f["name"] not in ("cost", "hash", "either", "list", "pairs", "grid")],
}


@pytest.mark.parametrize("schema", [WRITER, FLAT], ids=["row-by-row", "columnar"])
def test_encoder_writes_the_bytes_it_decoded(schema):
    """Decoded, then encoded again: the same bytes fastavro wrote, through the columnar encoder for a
    schema of records, unions with null, enums, dates and timestamps, and row by row otherwise."""
    names = [f["name"] for f in schema["fields"]]
    values = [framed(schema, 7, {k: v for k, v in row(i).items() if k in names}) for i in range(400)] + [None]
    column = decoder(schema, {7: schema}).decode(pa.array(values, pa.binary())).column
    encoder = AvroColumnEncoder(json.dumps(schema), 7)
    assert encoder.encode(column) == values
    assert encoder.columnar == (schema is FLAT)
    with pytest.raises(ValueError, match="a null where the schema has no null"):
        AvroColumnEncoder(json.dumps(FLAT), 7).encode(pa.array([{"id": None}], column.type))


def test_json_schema_types_and_the_sinks_json_schema():
    from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType, TimestampType

    from strom.spark.json_types import JsonTypeError, json_schema
    from strom.spark.json_types import spark_type as json_spark_type

    nullable_object = {"oneOf": [{"type": "null"}, {"type": "object", "properties": {"x": {"type": "integer"}}}]}
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": ["integer", "null"]},
            "at": {"type": "string", "format": "date-time"},
            "kind": {"enum": ["a", "b"]},
            "inner": nullable_object,
            "list": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
        },
        "$defs": {"Tag": {"type": "string"}},
    }
    assert json_spark_type(schema) == StructType(
        [
            StructField("n", LongType()),
            StructField("at", TimestampType()),
            StructField("kind", StringType()),
            StructField("inner", StructType([StructField("x", LongType())])),
            StructField("list", ArrayType(StringType())),
        ]
    )
    loop = {"type": "object", "properties": {"next": {"$ref": "#"}}}
    for refused, why in [
        (loop, "contains itself"),
        ({"type": ["integer", "string"]}, "several non-null types"),
        ({"type": "object"}, "without properties"),
        ({"type": "object", "properties": {"r": {"$ref": "other.json"}}}, "only local references"),
    ]:
        with pytest.raises(JsonTypeError, match=why):
            json_spark_type(refused)
    struct = StructType([StructField("id", LongType(), False), StructField("tags", ArrayType(StringType()), True)])
    derived = json_schema(struct)
    assert derived["required"] == ["id"] and json_spark_type(derived) == StructType(
        [StructField("id", LongType()), StructField("tags", ArrayType(StringType()))]
    )
