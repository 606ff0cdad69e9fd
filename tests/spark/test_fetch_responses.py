"""The Fetch reader across several Fetch responses, each read into the one buffer of its connection.

A range larger than a Fetch response (PARTITION_MAX_BYTES) takes several; each response is read
into the buffer the previous one was in, so what the reader keeps of a response (keys and values
waiting for the next RecordBatch) must be copied out before the next fetch. Stretches of records
of one size (decoded as runs) alternate with records of varying size (decoded one by one), with
keys on some of them.
"""

from __future__ import annotations

from strom.spark.fetch_reader import PARTITION_MAX_BYTES
from tests.spark.conftest import create_topic, produce

RECORDS = 240_000


def record(i: int) -> tuple[bytes, bytes | None]:
    size = 90 if (i // 7_000) % 2 == 0 else 40 + i % 97
    return (b"%07d" % i).ljust(size, b"x"), b"key-%d" % i if i % 10 == 0 else None


def read(bootstrap: str, topic: str, start: int, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from strom.spark.kafka_io import read_range
    from strom.spark.options import OffsetRange, SourceOptions
    from strom.spark.source import kafka_schema

    opts = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
    rows = []
    for batch in read_range(opts, OffsetRange(topic, 0, start, end), schema):
        rows += zip(
            batch.column("offset").to_pylist(), batch.column("key").to_pylist(), batch.column("value").to_pylist()
        )
    return rows


def test_a_range_of_several_fetch_responses_reads_every_record(broker):
    create_topic(broker.bootstrap, "big", 1)
    records = [record(i) for i in range(RECORDS)]
    assert sum(len(v) for v, _ in records) > 1.2 * PARTITION_MAX_BYTES  # more than one response
    placed = produce(
        broker.bootstrap,
        "big",
        [(v, k, 0, None) for v, k in records],
        **{"linger.ms": 20, "batch.size": 1_000_000},
    )
    assert [o for _, o in placed] == list(range(RECORDS))
    assert read(broker.bootstrap, "big", 0, RECORDS) == [(i, k, v) for i, (v, k) in enumerate(records)]
    # a range that starts and ends inside batches, far into the log
    start, end = 123_457, RECORDS - 3
    assert read(broker.bootstrap, "big", start, end) == [(i, records[i][1], records[i][0]) for i in range(start, end)]
