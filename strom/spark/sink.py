"""``df.write`` / ``df.writeStream`` ``.format("strom")``: Spark's Kafka sink over a Python data source.

Columns as in Spark's Kafka sink: ``value`` (string or binary, required), ``key`` (string or
binary), ``headers`` (array<struct<key:string,value:binary>>), ``topic`` (string) and
``partition`` (int), all optional; the ``topic`` option, when given, wins over the column.
``kafka.*`` options go to the producer. Batch writes need ``.mode("append")``: Spark refuses its
default ErrorIfExists mode for Python data sources, and Overwrite is rejected (a topic only grows).

Delivery is **at least once**. Each task produces its rows with acks=all (unless ``kafka.acks``
says otherwise) and flushes before it returns its commit message; a record the broker did not
acknowledge fails the task, so Spark retries the task or fails the batch, and a retried task or
a micro-batch replayed after a crash may write some records twice. Readers that need exactly
once deduplicate on a key or an id in the value.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from strom.spark.options import StromOptionError, client_config_from_options
from strom.spark.source import HEADERS_TYPE

log = logging.getLogger("strom.spark")

FLUSH_TIMEOUT_S = 300.0
_DEFAULT_PRODUCER = {
    "acks": "all",
    "linger.ms": 5,
    "message.timeout.ms": 120_000,  # the Java client's delivery.timeout.ms default, not librdkafka's 300 s
}


@dataclass
class ProducedCommitMessage(WriterCommitMessage):
    records: int
    seconds: float


class _Producing:
    def __init__(self, options: dict, schema: StructType, overwrite: bool):
        opts = {str(k).lower(): v for k, v in options.items()}
        if overwrite:
            raise StromOptionError("the strom sink only appends; use mode('append')")
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise StromOptionError("option 'kafka.bootstrap.servers' is required")
        self.topic = opts.get("topic")
        fields = {f.name.lower(): f.dataType for f in schema.fields}
        _check(fields, "value", (StringType(), BinaryType()), required=True)
        _check(fields, "key", (StringType(), BinaryType()))
        _check(fields, "topic", (StringType(),), required=self.topic is None,
               why="(or set the 'topic' option)")
        _check(fields, "partition", (IntegerType(),))
        _check(fields, "headers", (HEADERS_TYPE,))
        self.columns = set(fields)
        self.config = {"bootstrap.servers": str(bootstrap), **_DEFAULT_PRODUCER,
                       **client_config_from_options(opts)}

    def write(self, iterator: Iterator) -> ProducedCommitMessage:
        from confluent_kafka import Producer

        started = time.monotonic()
        producer = Producer(self.config)
        failures: list[str] = []

        def delivered(err, msg):
            if err is not None and len(failures) < 5:
                failures.append(f"{msg.topic()}[{msg.partition()}]: {err}")

        count = 0
        for batch in iterator:
            for topic, value, key, partition, headers in self._rows(batch):
                kwargs = {"key": key, "partition": partition, "on_delivery": delivered}
                if headers:
                    kwargs["headers"] = headers
                while True:
                    try:
                        producer.produce(topic, value, **kwargs)
                        break
                    except BufferError:  # local queue full: serve delivery reports, then retry
                        producer.poll(0.05)
                count += 1
                if failures:
                    break
            producer.poll(0)
            if failures:
                break
        remaining = producer.flush(FLUSH_TIMEOUT_S)
        if failures:
            raise RuntimeError(f"strom sink: delivery failed for {failures[0]} "
                               f"({len(failures)} failure(s) seen, task fails)")
        if remaining:
            raise RuntimeError(f"strom sink: {remaining} record(s) not acknowledged within {FLUSH_TIMEOUT_S:.0f}s")
        return ProducedCommitMessage(records=count, seconds=time.monotonic() - started)

    def _rows(self, batch):
        import pyarrow as pa

        n = batch.num_rows
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name):
            if name not in names:
                return None
            col = batch.column(names[name])
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                col = col.cast(pa.binary())
            return col.to_pylist()

        values = column("value")
        keys = column("key") or [None] * n
        if self.topic is not None:
            topics = [self.topic] * n
        else:
            topics = [t.decode() if t is not None else None for t in column("topic")]
        partitions = [-1 if p is None else p for p in (column("partition") or [None] * n)]
        headers = batch.column(names["headers"]).to_pylist() if "headers" in names else [None] * n
        for i in range(n):
            if topics[i] is None:
                raise RuntimeError("strom sink: a row has a null topic and no 'topic' option is set")
            h = headers[i]
            yield (topics[i], values[i], keys[i], partitions[i],
                   [(e["key"], e["value"]) for e in h] if h else None)


def _check(fields: dict, name: str, allowed: tuple, required: bool = False, why: str = "") -> None:
    if name not in fields:
        if required:
            raise StromOptionError(f"the strom sink needs a {name!r} column {why}".rstrip())
        return
    if fields[name].simpleString() not in {t.simpleString() for t in allowed}:  # nullability aside
        names = " or ".join(t.simpleString() for t in allowed)
        raise StromOptionError(f"column {name!r} must be {names}, got {fields[name].simpleString()}")


class StromBatchWriter(_Producing, DataSourceArrowWriter):
    def commit(self, messages: list) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("strom sink: %d records acknowledged", total)

    def abort(self, messages: list) -> None:
        log.warning("strom sink: job aborted; records already acknowledged stay in the topic "
                    "(at-least-once)")


class StromStreamWriter(_Producing, DataSourceStreamArrowWriter):
    def commit(self, messages: list, batchId: int) -> None:
        total = sum(m.records for m in messages if m is not None)
        log.info("strom sink: batch %d, %d records acknowledged", batchId, total)

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("strom sink: batch %d aborted; acknowledged records stay (at-least-once)", batchId)
