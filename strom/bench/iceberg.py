"""Iceberg translation benchmark: committed records of one partition to an Iceberg table, per core.

    python -m strom.bench.iceberg [--records 500000] [--value-bytes 100] [--avro] [--dir DIR] [--record]

Writes a partition log of ``--records`` records (100-byte values, short keys, a header on every
tenth, 100 records a batch) with strom's Log, then runs one translation round in this process as a
broker's worker process runs it (strom.iceberg.worker.translate_topic: read the segment files,
decode the records, build the Arrow table, write Parquet through pyiceberg and commit to a SQLite
SQL catalog), and prints records per second of that one core. Then a second round with nothing new,
the cost of a round that finds the table caught up. With ``--avro`` the values are 10-field Avro
records behind a schema id prefix and the topic is in ``value_schema_id_prefix`` mode (each value
decoded with fastavro into typed columns). Asserts nothing (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from strom.bench.results import add_record_argument, record_if_asked
from strom.iceberg.schema_modes import RegisteredSchema, SchemaSet
from strom.iceberg.table import CatalogSettings
from strom.iceberg.worker import PartitionJob, TopicJob, translate_topic
from strom.protocol.records import NewRecord, build_batch
from strom.storage.log import Log
from strom.storage.log_config import LogConfig

PER_BATCH = 100
SCHEMA_ID = 1
# ten fields of the kinds the typed columns map: nested record, array, enum, optional, logical types
AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {
            "name": "customer",
            "type": {"type": "record", "name": "Customer", "fields": [{"name": "name", "type": "string"}]},
        },
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    ],
}


def avro_values(count: int) -> list[bytes]:
    """``count`` Avro values of AVRO_SCHEMA behind the 5-byte prefix of schema id SCHEMA_ID."""
    import datetime
    import decimal
    import io
    import struct

    from fastavro import parse_schema, schemaless_writer

    parsed = parse_schema(AVRO_SCHEMA)
    prefix = struct.pack(">bI", 0, SCHEMA_ID)
    values = []
    for i in range(count):
        buffer = io.BytesIO()
        buffer.write(prefix)
        record = {
            "id": f"order-{i}",
            "quantity": i % 100,
            "price": i * 0.25,
            "tags": ["a", "b"] if i % 2 else ["c"],
            "status": ("NEW", "PAID", "SHIPPED")[i % 3],
            "customer": {"name": f"customer-{i % 1000}"},
            "note": None if i % 5 else "gift",
            "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 365),
            "placed": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=i),
            "amount": decimal.Decimal(i % 100_000) / 100,
        }
        schemaless_writer(buffer, parsed, record)
        values.append(buffer.getvalue())
    return values


def write_log(directory: str, records: int, value_bytes: int, avro: bool = False) -> Log:
    log = Log(os.path.join(directory, "bench-0"), LogConfig())
    now = int(time.time() * 1000)
    value = b"v" * value_bytes
    values = avro_values(min(records, 10_000)) if avro else []
    for start in range(0, records, PER_BATCH):
        batch = [
            NewRecord(
                values[i % len(values)] if avro else value,
                key=b"key-%d" % (i % 1000),
                headers=[("h", b"x")] if i % 10 == 0 else [],
                timestamp=now,
            )
            for i in range(start, min(records, start + PER_BATCH))
        ]
        log.append_as_leader(build_batch(batch), leader_epoch=0)
    log.flush()
    log.update_high_watermark(log.log_end_offset)
    return log


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--avro", action="store_true", help="10-field Avro values, value_schema_id_prefix mode")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="strom-bench-iceberg-", dir=args.dir)
    try:
        log = write_log(root, args.records, args.value_bytes, args.avro)
        catalog = CatalogSettings("sqlite:///" + os.path.join(root, "catalog.db"), "file://" + os.path.join(root, "wh"))
        job = TopicJob(
            "bench",
            catalog,
            (PartitionJob(0, log.directory, 0, log.last_stable_offset, 0, ()),),
            "value_schema_id_prefix" if args.avro else "key_value",
            SchemaSet({SCHEMA_ID: RegisteredSchema("AVRO", json.dumps(AVRO_SCHEMA))}) if args.avro else None,
        )
        import pyiceberg.catalog.sql  # noqa: F401  (a worker process imports these once, at its first round)
        import pyiceberg.io.pyarrow  # noqa: F401

        started, cpu = time.perf_counter(), time.process_time()
        result = translate_topic(job)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert result.rows == args.records, result
        size = log.size_in_bytes
        kind = "10-field Avro records" if args.avro else "records"
        print(
            f"translated {result.rows:,} {kind} ({size / 1e6:.1f} MB of segments) in {elapsed:.2f} s: "
            f"{result.rows / elapsed:,.0f} records/s, {result.rows / cpu:,.0f} records per CPU second"
        )
        started = time.perf_counter()
        again = translate_topic(job)
        idle_s = time.perf_counter() - started
        print(f"a round with nothing new: {idle_s * 1000:.0f} ms ({again.rows} rows)")
        log.close()
        what = "10-field Avro records" if args.avro else f"{args.value_bytes}-byte records"
        figures = {
            f"{what}/s": (result.rows / elapsed, "records/s"),
            f"{what} per CPU second": (result.rows / cpu, "records/s"),
            f"a round with nothing new ({what})": (idle_s * 1000, "ms"),
        }
        record_if_asked(args, "iceberg", figures, argv)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
