"""Spark benchmark: rows/s through the strom source against Parquet, in the same Spark session,
and the sink's exactly-once delivery against its at-least-once delivery.

    python -m strom.bench.spark [--records 2000000] [--size 100] [--partitions 4] [--master local[*]]
                                [--sink-records 500000] [--avro-records 1000000] [--only source|sink|avro|protobuf] [--record]

Starts a broker (``strom server-start`` subprocess), produces RECORDS values of SIZE bytes across
PARTITIONS partitions, then times ``groupBy("partition").count()`` over

* the strom source (``spark.read.format("strom")``: every record crosses the wire, librdkafka,
  Python and Arrow), and
* a Parquet file holding the same records (Spark's vectorized reader; column pruning means it
  reads only the partition column),
* and, for scale, the same over Parquet when every value must be read (``sum(length(value))``).

Then the sink: ``df.write.format("strom")`` of SINK_RECORDS cached rows (a key and a SIZE-byte
value) in PARTITIONS tasks, at-least-once and exactly-once (a transaction per task), and the
same for a write of 100 rows, whose time is mostly the fixed cost per write and task.

Then typed records (``value.format=avro``): AVRO_RECORDS records of a 10-field Avro schema
(registered in the broker's Schema Registry, Confluent-framed) read by the source into typed
columns against the same topic read as binary, by ``count`` and by a query that reads a field
(``sum(value.id)``, against ``sum(length(value))`` for binary), with the ready-made Arrow ceiling
for scale; the decoder alone on one batch of 20,000 values, columnar against fastavro per record;
and the sink writing 200,000 of those rows back as typed records against writing their bytes.
The same record as Protobuf (``value.format=protobuf``, ``PROTO``'s BenchEvent, AVRO_RECORDS
of them): reading a field as typed columns against the topic as binary.

Each query runs ``--repeat`` times after one warm-up and the best time counts. Prints rows/s and
ratios; asserts nothing (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from strom.bench.results import add_record_argument, record_if_asked


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"v" * size
    started = time.perf_counter()
    produce_one = producer.produce
    for i in range(records):
        try:
            produce_one(topic, value, partition=i % partitions)
        except BufferError:
            producer.poll(0.05)
            produce_one(topic, value, partition=i % partitions)
    if producer.flush(300) != 0:
        raise RuntimeError("records not acknowledged")
    return time.perf_counter() - started


def replay_source_class():
    """A Python data source that yields ready-made Arrow batches: the ceiling of the API itself."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class ReplayReader(DataSourceReader):
        def __init__(self, options):
            self.partitions_n = int(options["partitions"])
            self.rows = int(options["rows"])
            self.size = int(options["size"])

        def partitions(self):
            return [InputPartition(i) for i in range(self.partitions_n)]

        def read(self, partition):
            import numpy as np
            import pyarrow as pa
            from pyspark.sql.pandas.types import to_arrow_schema

            from strom.spark.source import kafka_schema

            schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
            n = 20_000
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.nulls(n, pa.binary()),
                    pa.array([b"v" * self.size] * n, pa.binary()),
                    pa.repeat(pa.scalar("bench"), n),
                    pa.repeat(pa.scalar(partition.value, pa.int32()), n),
                    pa.array(np.arange(n, dtype=np.int64)),
                    pa.array(np.zeros(n, dtype=np.int64)).cast(schema.field("timestamp").type),
                    pa.repeat(pa.scalar(0, pa.int32()), n),
                ],
                schema=schema,
            )
            for _ in range(self.rows // n):
                yield batch
            if self.rows % n:
                yield batch.slice(0, self.rows % n)

    class ReplaySource(DataSource):
        @classmethod
        def name(cls):
            return "strom_bench_replay"

        def schema(self):
            from strom.spark.source import kafka_schema

            return kafka_schema(False)

        def reader(self, schema):
            return ReplayReader(self.options)

    return ReplaySource


def best_time(run, repeat: int) -> float:
    run()  # warm-up: JIT, Python workers, consumer/file caches
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def best_times(runs: dict, repeat: int) -> dict:
    """The best time of each run, taken round by round (A, B, A, B...) so that the load of a
    shared machine falls on the runs alike and their ratio means something."""
    for run in runs.values():
        run()  # warm-up
    times: dict = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    return {name: min(t) for name, t in times.items()}


def machine_busy_seconds() -> float:
    """CPU-seconds all cores have spent on anything but idle and I/O wait since boot."""
    from strom.bench.requests import CLOCK_TICKS

    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLOCK_TICKS


def with_cpu_totals(run, broker_pid: int, totals: list[float]):
    """``run``, adding the broker's CPU-seconds and the whole machine's to ``totals`` each time:
    the source's broker serves every record on the same cores as Spark, the ceiling has none."""
    from strom.bench.requests import cpu_seconds

    def measured():
        broker, machine = cpu_seconds(broker_pid), machine_busy_seconds()
        run()
        totals[0] += cpu_seconds(broker_pid) - broker
        totals[1] += machine_busy_seconds() - machine

    return measured


def source_figures(spark, bootstrap: str, args, work: str, broker_pid: int) -> dict[str, tuple[float, str]]:
    from pyspark.sql import functions as F

    from strom.cli.demo import create_topics

    create_topics(bootstrap, {"bench": args.partitions})
    seconds = produce(bootstrap, "bench", args.records, args.size, args.partitions)
    print(
        f"produced {args.records:,} records of {args.size} B in {seconds:.1f}s "
        f"({args.records / seconds:,.0f} records/s)",
        flush=True,
    )
    source = spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "bench").load()
    parquet_path = os.path.join(work, "bench.parquet")
    source.write.mode("overwrite").parquet(parquet_path)
    parquet = spark.read.parquet(parquet_path)

    def count(df):
        def run():
            rows = df.groupBy("partition").count().collect()
            total = sum(r["count"] for r in rows)
            if total != args.records:
                raise RuntimeError(f"counted {total} rows, expected {args.records}")

        return run

    def count_bytes(df):
        return lambda: df.groupBy("partition").agg(F.sum(F.length("value"))).collect()

    spark.dataSource.register(replay_source_class())
    replay = (
        spark.read.format("strom_bench_replay")
        .option("partitions", args.partitions)
        .option("rows", args.records // args.partitions)
        .option("size", args.size)
        .load()
    )
    cores = spark.sparkContext.defaultParallelism
    source_cpu, replay_cpu = [0.0, 0.0], [0.0, 0.0]  # broker, whole machine: over the warm-up and every repeat
    paired = best_times(
        {
            "source": with_cpu_totals(count(source), broker_pid, source_cpu),
            "replay": with_cpu_totals(count(replay), broker_pid, replay_cpu),
        },
        args.repeat,
    )
    t_source, t_replay = paired["source"], paired["replay"]
    t_parquet = best_time(count(parquet), args.repeat)
    t_parquet_values = best_time(count_bytes(parquet), args.repeat)
    t_source_values = best_time(count_bytes(source), args.repeat)
    n = args.records
    print(
        f"spark {spark.version}, master {args.master} ({cores} cores), {n:,} records x {args.size} B, "
        f"{args.partitions} partitions, best of {args.repeat}"
    )
    print(f"  strom source  groupBy(partition).count()        {t_source:6.2f}s  {n / t_source:12,.0f} rows/s")
    print(f"  parquet       groupBy(partition).count()        {t_parquet:6.2f}s  {n / t_parquet:12,.0f} rows/s")
    print(
        f"  strom source  groupBy(partition).sum(len(value)) {t_source_values:5.2f}s  "
        f"{n / t_source_values:12,.0f} rows/s"
    )
    print(
        f"  parquet       groupBy(partition).sum(len(value)) {t_parquet_values:5.2f}s  "
        f"{n / t_parquet_values:12,.0f} rows/s"
    )
    print(
        f"  ready-made Arrow batches from a Python data source (no broker, no client): "
        f"{t_replay:5.2f}s  {n / t_replay:12,.0f} rows/s"
    )
    print(f"  ratio source/ready-made Arrow (count, runs interleaved): {t_replay / t_source:.2f}   target >= 0.8")
    runs = args.repeat + 1
    print(
        f"  the machine's CPU-s per count: source {source_cpu[1] / runs:.2f} (the broker's share "
        f"{source_cpu[0] / max(source_cpu[1], 0.01):.0%}), ready-made Arrow {replay_cpu[1] / runs:.2f}"
    )
    print(
        f"  ratio source/parquet (count): {t_parquet / t_source:.2f}   "
        f"(values read): {t_parquet_values / t_source_values:.2f}   target >= 0.5"
    )
    return {
        "source count": (n / t_source, "rows/s"),
        "source sum(len(value))": (n / t_source_values, "rows/s"),
        "source / ready-made Arrow (count)": (t_replay / t_source, "ratio"),
        "source / parquet (count)": (t_parquet / t_source, "ratio"),
    }


def sink_figures(
    spark, bootstrap: str, records: int, size: int, partitions: int, repeat: int
) -> dict[str, tuple[float, str]]:
    """At-least-once against exactly-once, in the same session: rows/s, and the cost of a small write."""
    from strom.cli.demo import create_topics

    create_topics(bootstrap, {"bench-sink": partitions})

    def rows(n):
        df = (
            spark.range(0, n, 1, partitions)
            .selectExpr("CAST(id AS STRING) AS key", f"repeat('v', {size}) AS value")
            .cache()
        )
        df.count()
        return df

    def write(df, guarantee):
        return lambda: (
            df.write.format("strom")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", "bench-sink")
            .option("deliveryGuarantee", guarantee)
            .save()
        )

    big, small = rows(records), rows(100)
    times = {
        g: (best_time(write(big, g), repeat), best_time(write(small, g), repeat))
        for g in ("at-least-once", "exactly-once")
    }
    (alo, alo_small), (eos, eos_small) = times["at-least-once"], times["exactly-once"]
    print(f"sink df.write of {records:,} rows x {size} B in {partitions} tasks, best of {repeat}")
    print(f"  at-least-once  {alo:6.2f}s  {records / alo:12,.0f} rows/s")
    print(f"  exactly-once   {eos:6.2f}s  {records / eos:12,.0f} rows/s   ratio to at-least-once {alo / eos:.2f}")
    print(
        f"  a write of 100 rows: at-least-once {alo_small * 1000:,.0f} ms, exactly-once {eos_small * 1000:,.0f} ms "
        f"(+{(eos_small - alo_small) * 1000:,.0f} ms for {partitions} transactions)"
    )
    return {
        "sink at-least-once": (records / alo, "rows/s"),
        "sink exactly-once": (records / eos, "rows/s"),
        "sink exactly-once / at-least-once": (alo / eos, "ratio"),
    }


AVRO_SCHEMA = {
    "type": "record",
    "name": "BenchEvent",
    "namespace": "strom.bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user_id", "type": "int"},
        {"name": "user", "type": "string"},
        {"name": "url", "type": "string"},
        {"name": "price", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "CART", "BUY"]}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def avro_values(count: int) -> list[bytes]:
    """``count`` distinct BenchEvent bodies (fastavro), without the 5-byte prefix."""
    import datetime as dt
    import io

    import fastavro

    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    bodies = []
    for i in range(count):
        out = io.BytesIO()
        record = {
            "id": i * 7919,
            "user_id": i % 5000,
            "user": f"user-{i % 5000}",
            "url": f"/shop/item/{i % 997}?ref=bench",
            "price": (i % 1000) * 0.99,
            "ratio": (i % 100) / 100,
            "paid": i % 3 == 0,
            "kind": ("VIEW", "CART", "BUY")[i % 3],
            "coupon": None if i % 4 else f"C{i % 100}",
            "at": start + dt.timedelta(milliseconds=37 * i),
        }
        fastavro.schemaless_writer(out, parsed, record)
        bodies.append(out.getvalue())
    return bodies


def avro_figures(spark, bootstrap: str, registry: str, args) -> dict[str, tuple[float, str]]:
    """The source reading 10-field Avro records as typed columns against reading them as binary."""
    import json

    import pyarrow as pa
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_type

    from strom.cli.demo import create_topics
    from strom.spark.avro_columns import AvroColumnDecoder
    from strom.spark.avro_types import spark_type

    topic, n, partitions = "bench-avro", args.avro_records, args.partitions
    create_topics(bootstrap, {topic: partitions})
    schema_id = SchemaRegistryClient({"url": registry}).register_schema(
        f"{topic}-value", Schema(json.dumps(AVRO_SCHEMA), "AVRO")
    )
    prefix = b"\x00" + schema_id.to_bytes(4, "big")
    values = [prefix + body for body in avro_values(10_000)]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    started = time.perf_counter()
    for i in range(n):
        value = values[i % len(values)]
        try:
            producer.produce(topic, value, partition=i % partitions)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, value, partition=i % partitions)
    if producer.flush(300) != 0:
        raise RuntimeError("records not acknowledged")
    size = sum(map(len, values)) / len(values)
    print(
        f"produced {n:,} Avro records of 10 fields (~{size:.0f} B) in {time.perf_counter() - started:.1f}s",
        flush=True,
    )

    def reader(**options):
        df = spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        for key, value in options.items():
            df = df.option(key, value)
        return df.load()

    binary = reader()
    typed = reader(**{"value.format": "avro", "schema.registry.url": registry})

    def count(df):
        def run():
            total = sum(r["count"] for r in df.groupBy("partition").count().collect())
            if total != n:
                raise RuntimeError(f"counted {total} rows, expected {n}")

        return run

    def field_sum(df, column):
        return lambda: df.groupBy("partition").agg(F.sum(column)).collect()

    spark.dataSource.register(replay_source_class())
    replay = (
        spark.read.format("strom_bench_replay")
        .option("partitions", partitions)
        .option("rows", n // partitions)
        .option("size", int(size))
        .load()
    )
    counts = best_times({"binary": count(binary), "typed": count(typed), "replay": count(replay)}, args.repeat)
    sums = best_times(
        {"binary": field_sum(binary, F.length("value")), "typed": field_sum(typed, F.col("value.id"))}, args.repeat
    )
    cores = spark.sparkContext.defaultParallelism
    print(f"typed source: {n:,} Avro records, {partitions} partitions, {cores} cores, best of {args.repeat}")
    for name, label in (("binary", "as binary"), ("typed", "as typed columns (value.format=avro)")):
        print(f"  count  {label:40s} {counts[name]:6.2f}s  {n / counts[name]:12,.0f} rows/s")
    print(
        f"  count  ready-made Arrow batches (no broker)   {counts['replay']:6.2f}s  {n / counts['replay']:12,.0f} rows/s"
    )
    print(f"  sum(length(value)) as binary                  {sums['binary']:6.2f}s  {n / sums['binary']:12,.0f} rows/s")
    print(f"  sum(value.id) as typed columns                {sums['typed']:6.2f}s  {n / sums['typed']:12,.0f} rows/s")
    print(
        f"  ratio typed/binary: count {counts['binary'] / counts['typed']:.2f}, "
        f"reading a field {sums['binary'] / sums['typed']:.2f}   target >= 0.5; "
        f"typed/ready-made Arrow (count) {counts['replay'] / counts['typed']:.2f}"
    )

    # the decoder alone, in this process: one source batch of 20,000 values
    data_type, _ = spark_type(AVRO_SCHEMA)
    batch = pa.array([values[i % len(values)] for i in range(20_000)], pa.binary())
    per_path = {}
    for path in ("columnar", "fastavro per record"):
        decoder = AvroColumnDecoder(
            json.dumps(AVRO_SCHEMA), to_arrow_type(data_type, timezone="UTC"), lambda _: json.dumps(AVRO_SCHEMA)
        )
        if path != "columnar":
            decoder._columnar[schema_id] = False
        per_path[path] = best_time(lambda d=decoder: d.decode(batch), args.repeat)
    print(
        "  decoding 20,000 values in one process: "
        + ", ".join(f"{path} {t / 20_000 * 1e6:.2f} µs/record" for path, t in per_path.items())
    )

    # the sink: the same rows written back as typed records (encoded, registered) and as bytes
    create_topics(bootstrap, {f"{topic}-out": partitions})
    sink_rows = min(n, 200_000)
    typed_rows = typed.select("value").limit(sink_rows).repartition(partitions).cache()
    binary_rows = binary.select("value").limit(sink_rows).repartition(partitions).cache()
    typed_rows.count(), binary_rows.count()

    def write(df, **options):
        def run():
            writer = (
                df.write.format("strom")
                .mode("append")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", f"{topic}-out")
            )
            for key, value in options.items():
                writer = writer.option(key, value)
            writer.save()

        return run

    writes = best_times(
        {
            "binary": write(binary_rows),
            "typed": write(typed_rows, **{"value.format": "avro", "schema.registry.url": registry}),
        },
        args.repeat,
    )
    print(
        f"  sink df.write of {sink_rows:,} rows: binary {sink_rows / writes['binary']:,.0f} rows/s, "
        f"typed (value.format=avro) {sink_rows / writes['typed']:,.0f} rows/s, "
        f"ratio {writes['binary'] / writes['typed']:.2f}"
    )
    return {
        "typed source count": (n / counts["typed"], "rows/s"),
        "typed / binary (count)": (counts["binary"] / counts["typed"], "ratio"),
        "typed / binary (reading a field)": (sums["binary"] / sums["typed"], "ratio"),
        "typed sink / binary sink": (writes["binary"] / writes["typed"], "ratio"),
    }


PROTO = """
syntax = "proto3";
package strom.bench;
import "google/protobuf/timestamp.proto";
message BenchEvent {
  int64 id = 1;
  int32 user_id = 2;
  string user = 3;
  string url = 4;
  double price = 5;
  float ratio = 6;
  bool paid = 7;
  Kind kind = 8;
  optional string coupon = 9;
  google.protobuf.Timestamp at = 10;
  enum Kind { VIEW = 0; CART = 1; BUY = 2; }
}
"""


def protobuf_values(cls, count: int, prefix: bytes) -> list[bytes]:
    """``count`` framed BenchEvent messages (of ``PROTO``) holding what ``avro_values`` writes."""
    import datetime as dt

    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    values = []
    for i in range(count):
        message = cls(
            id=i * 7919,
            user_id=i % 5000,
            user=f"user-{i % 5000}",
            url=f"/shop/item/{i % 997}?ref=bench",
            price=(i % 1000) * 0.99,
            ratio=(i % 100) / 100,
            paid=i % 3 == 0,
            kind=i % 3,
        )
        if i % 4 == 0:
            message.coupon = f"C{i % 100}"
        message.at.FromDatetime(start + dt.timedelta(milliseconds=37 * i))
        values.append(prefix + message.SerializeToString())
    return values


def protobuf_figures(spark, bootstrap: str, registry: str, args) -> dict[str, tuple[float, str]]:
    """The source reading the 10-field record as Protobuf (``PROTO``'s BenchEvent) into typed
    columns against reading the same topic as binary."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from pyspark.sql import functions as F

    from strom.cli.demo import create_topics
    from strom.iceberg.protobuf_columns import frame, message_class
    from strom.spark.protobuf_types import load

    topic, n, partitions = "bench-protobuf", args.avro_records, args.partitions
    create_topics(bootstrap, {topic: partitions})
    schema_id = SchemaRegistryClient({"url": registry}).register_schema(f"{topic}-value", Schema(PROTO, "PROTOBUF"))
    values = protobuf_values(message_class(load(PROTO).message()), 10_000, frame(schema_id))
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 50, "batch.size": 1_000_000})
    for i in range(n):
        try:
            producer.produce(topic, values[i % len(values)], partition=i % partitions)
        except BufferError:
            producer.poll(0.05)
            producer.produce(topic, values[i % len(values)], partition=i % partitions)
    if producer.flush(300) != 0:
        raise RuntimeError("records not acknowledged")

    def reader(**options):
        df = spark.read.format("strom").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
        for key, value in options.items():
            df = df.option(key, value)
        return df.load()

    binary, typed = reader(), reader(**{"value.format": "protobuf", "schema.registry.url": registry})
    sums = best_times(
        {
            "binary": lambda: binary.groupBy("partition").agg(F.sum(F.length("value"))).collect(),
            "typed": lambda: typed.groupBy("partition").agg(F.sum(F.col("value.id"))).collect(),
        },
        args.repeat,
    )
    print(f"typed source: {n:,} Protobuf records of 10 fields, {partitions} partitions, best of {args.repeat}")
    print(f"  sum(length(value)) as binary                  {sums['binary']:6.2f}s  {n / sums['binary']:12,.0f} rows/s")
    print(f"  sum(value.id) as typed columns (protobuf)     {sums['typed']:6.2f}s  {n / sums['typed']:12,.0f} rows/s")
    print(f"  ratio typed/binary reading a field {sums['binary'] / sums['typed']:.2f}   target >= 0.5")
    return {
        "protobuf typed source": (n / sums["typed"], "rows/s"),
        "protobuf typed / binary (reading a field)": (sums["binary"] / sums["typed"], "ratio"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m strom.bench.spark", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sink-records", type=int, default=500_000)
    parser.add_argument("--avro-records", type=int, default=1_000_000)
    parser.add_argument(
        "--only", choices=("source", "sink", "avro", "protobuf"), default=None, help="run one part only"
    )
    parser.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    from strom.cli.demo import EmbeddedBroker
    from strom.spark import register, use_this_python

    work = args.dir or tempfile.mkdtemp(prefix="strom-bench-spark-")
    os.makedirs(work, exist_ok=True)
    use_this_python()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    broker = EmbeddedBroker(os.path.join(work, "data"), {"schema.registry.listeners": "http://127.0.0.1:0"}).start()
    spark = None
    figures: dict[str, tuple[float, str]] = {}
    try:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master(args.master)
            .appName("strom-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(args.partitions))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        if args.only in (None, "source"):
            assert broker.process is not None  # started above
            figures |= source_figures(spark, broker.bootstrap, args, work, broker.process.pid)
        if args.only in (None, "sink"):
            figures |= sink_figures(spark, broker.bootstrap, args.sink_records, args.size, args.partitions, args.repeat)
        if args.only in (None, "avro"):
            registry = (broker.data_dir / "strom.schema-registry").read_text().strip()
            figures |= avro_figures(spark, broker.bootstrap, registry, args)
        if args.only in (None, "protobuf"):
            registry = (broker.data_dir / "strom.schema-registry").read_text().strip()
            figures |= protobuf_figures(spark, broker.bootstrap, registry, args)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    record_if_asked(args, "spark", figures, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
