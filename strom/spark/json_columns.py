"""Confluent-framed JSON values to one Arrow column, and rows back to framed JSON (the sink).

A value in Confluent's JSON Schema wire format is the magic byte 0, the schema id (4 bytes,
big-endian) and the JSON document. The source checks the prefix and that the id is a registered
JSON schema, then parses all the documents of a batch at once with Arrow's JSON reader into the
reader schema's struct (``strom.spark.json_types``): properties the Spark type lacks are ignored,
missing ones are null. When the batch does not parse as a whole, each document is parsed alone,
so that the ones that do not (not JSON, not an object, a value of another type than the schema
says) are the rows marked corrupt, with Arrow's reason. JSON has no schema resolution: documents
written with any version are read by property name.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from strom.spark.avro_columns import Decoded


class JsonColumnDecoder:
    """Decodes framed JSON values into ``arrow_type`` (a struct); ``known(id)`` says whether an id
    is a registered JSON schema (asked once an id: ``strom.spark.typed`` caches it)."""

    def __init__(self, arrow_type: pa.DataType, known: Callable[[int], bool]):
        if not pa.types.is_struct(arrow_type):
            raise ValueError(f"value.format=json reads objects into a struct, not {arrow_type}")
        self.arrow_type = arrow_type
        self.schema = pa.schema(list(arrow_type))
        self._is_known = known

    def decode(self, values: pa.Array) -> Decoded:
        raw = values.to_pylist()
        n = len(raw)
        bad = np.zeros(n, bool)
        reasons: dict[int, str] = {}
        rows: list[int] = []
        bodies: list[bytes] = []
        for i, value in enumerate(raw):
            if value is None:
                continue
            if len(value) < 5 or value[0] != 0:
                bad[i] = True
                reasons.setdefault(i, "no Confluent schema id prefix (magic byte 0 and a 4-byte id)")
                continue
            schema_id = int.from_bytes(value[1:5], "big")
            if not self._is_known(schema_id):
                bad[i] = True
                reasons.setdefault(i, f"schema id {schema_id} is not a registered JSON schema")
                continue
            body = value[5:]
            if b"\n" in body or b"\r" in body:  # whitespace between tokens; the reader splits lines
                body = body.replace(b"\r", b" ").replace(b"\n", b" ")
            rows.append(i)
            bodies.append(body)
        index = np.full(n, -1, np.int64)
        if not bodies:
            return Decoded(pa.nulls(n, self.arrow_type), bad, dict(sorted(reasons.items())[:5]))
        try:
            table = self._read(b"\n".join(bodies), len(bodies))
            index[rows] = np.arange(len(rows))
        except ValueError:
            tables = []
            for i, body in zip(rows, bodies):
                try:
                    tables.append(self._read(body, 1))
                    index[i] = len(tables) - 1
                except ValueError as exc:
                    bad[i] = True
                    if len(reasons) < 5:
                        reasons.setdefault(i, str(exc))
            table = pa.concat_tables(tables) if tables else self.schema.empty_table()
        struct = pa.StructArray.from_arrays(
            [table.column(f.name).combine_chunks() for f in self.schema], fields=list(self.arrow_type)
        )
        whole = pa.concat_arrays([struct, pa.nulls(1, self.arrow_type)])
        index[index < 0] = len(struct)
        return Decoded(whole.take(pa.array(index)), bad, dict(sorted(reasons.items())[:5]))

    def _read(self, data: bytes, expected: int) -> pa.Table:
        import pyarrow.json as pj

        try:
            table = pj.read_json(
                io.BytesIO(data),
                read_options=pj.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 20)),
                parse_options=pj.ParseOptions(explicit_schema=self.schema, unexpected_field_behavior="ignore"),
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"not a JSON object of the schema's types: {exc}") from None
        if table.num_rows != expected:
            raise ValueError(f"{table.num_rows} JSON documents where {expected} were expected")
        return table


class JsonRowEncoder:
    """Rows (Python values of a Spark struct) to Confluent-framed JSON of the schema ``schema_id``."""

    def __init__(self, schema_id: int):
        self.prefix = b"\x00" + int(schema_id).to_bytes(4, "big")

    def __call__(self, row: Any) -> bytes | None:
        if row is None:
            return None
        return self.prefix + json.dumps(row, default=_json_value, separators=(",", ":")).encode()


def _json_value(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()  # as Spark's to_json writes binary
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
