"""Web-analytics pipeline: nginx access-log lines from a strom topic, per event-time window.

    python -m strom.spark.pipelines.access_log --bootstrap-server 127.0.0.1:9092 \\
        --topic access-log --output-topic access-stats \\
        --parquet-dir ./out/parquet --checkpoint-dir ./out/checkpoints
    spark-submit strom/spark/pipelines/access_log.py ...   (same arguments)

Two Structured Streaming queries read the topic through the ``strom`` source, parse the
combined-format lines and aggregate over tumbling event-time windows (default 1 minute) with a
watermark (default 10 s), in append mode, so each window is emitted once, when it is final:

* ``minute_stats``: requests, page views (requests for non-static URLs) and unique visitors
  (``approx_count_distinct`` of the client IP, rsd 1%) per window;
* ``url_status``: requests per (window, url, status), from which each batch derives the
  requests per status code and the top 10 URLs per window.

Every finished micro-batch goes to the output topic (``kind`` = minute | status | top_url) and
to Parquet under ``<parquet-dir>/<table>/batch_id=<n>``. A replayed batch (after a
crash or a restart from the checkpoint) has the same id and the same rows: it overwrites its own
Parquet directory, and the topic write is exactly once by default (``--delivery-guarantee``):
the strom sink writes each piece of a batch in a Kafka transaction together with a marker of
the batch id, and a replay finds the marker and writes nothing. Read the topic with
``isolation.level=read_committed`` to see each window once; ``at-least-once`` skips the
transactions and may repeat a batch's rows after a crash.

The output topic's values are JSON objects, or, with ``--schema-registry-url``, Confluent-framed
Avro records of the one schema ``STATS_SCHEMA`` (registered under ``<output-topic>-value`` by the
sink), so that any Avro consumer, the web console and Spark's ``value.format=avro`` read them as
typed records: the three kinds share it, each leaving the fields of the others null.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

LOG_PATTERN = (
    r'^(\S+) \S+ (\S+) \[([^\]]+)\] "(\S+) (\S+)[^"]*" (\d{3}) (\d+|-) '
    r'"([^"]*)" "([^"]*)"'
)
TIME_FORMAT = "dd/MMM/yyyy:HH:mm:ss Z"
STATIC_PREFIXES = ("/static/", "/favicon.ico")
# HyperLogLog++ relative standard deviation of unique visitors: 2^14 registers, ~12 KB of state a window
UNIQUES_RSD = 0.01
TABLES = ("minute_stats", "status_counts", "top_urls")
KINDS = {"minute_stats": "minute", "status_counts": "status", "top_urls": "top_url"}
_TIMESTAMP = {"type": "long", "logicalType": "timestamp-micros"}
STATS_SCHEMA = {
    "type": "record",
    "name": "AccessStat",
    "namespace": "strom.demo",
    "doc": "One result of the access-log pipeline; kind says which fields it fills",
    "fields": [
        {"name": "kind", "type": "string"},
        {"name": "window_start", "type": _TIMESTAMP},
        {"name": "window_end", "type": _TIMESTAMP},
        {"name": "requests", "type": "long"},
        {"name": "page_views", "type": ["null", "long"], "default": None},
        {"name": "unique_visitors", "type": ["null", "long"], "default": None},
        {"name": "status", "type": ["null", "int"], "default": None},
        {"name": "url", "type": ["null", "string"], "default": None},
        {"name": "rank", "type": ["null", "int"], "default": None},
    ],
}
_OPTIONAL = {"page_views": "long", "unique_visitors": "long", "status": "int", "url": "string", "rank": "int"}


def parse_lines(raw):
    """Access-log records from a DataFrame with a binary or string ``value``; unparsable lines dropped."""
    from pyspark.sql import functions as F

    line = F.col("value").cast("string")

    def group(i):
        return F.regexp_extract(line, LOG_PATTERN, i)

    parsed = raw.select(
        group(1).alias("ip"),
        F.to_timestamp(group(3), TIME_FORMAT).alias("event_time"),
        group(4).alias("method"),
        group(5).alias("url"),
        group(6).cast("int").alias("status"),
        F.when(group(7) == "-", 0).otherwise(group(7).cast("long")).alias("bytes"),
        group(8).alias("referrer"),
        group(9).alias("user_agent"),
    )
    return parsed.where((F.col("ip") != "") & F.col("event_time").isNotNull())


def is_page(url_col):
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for prefix in STATIC_PREFIXES:
        cond = cond & ~url_col.startswith(prefix)
    return cond


def minute_stats(events, window: str = "1 minute", watermark: str = "10 seconds"):
    """Requests, page views and unique visitors per event-time window (a streaming aggregation)."""
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window))
        .agg(
            F.count(F.lit(1)).alias("requests"),
            F.count(F.when(is_page(F.col("url")), 1)).alias("page_views"),
            F.approx_count_distinct("ip", rsd=UNIQUES_RSD).alias("unique_visitors"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "requests",
            "page_views",
            "unique_visitors",
        )
    )


def url_status_counts(events, window: str = "1 minute", watermark: str = "10 seconds"):
    """Requests per (window, url, status): the state behind status counts and top URLs."""
    from pyspark.sql import functions as F

    return (
        events.withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", window), "url", "status")
        .agg(F.count(F.lit(1)).alias("requests"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "url",
            "status",
            "requests",
        )
    )


def status_counts(url_status):
    from pyspark.sql import functions as F

    return url_status.groupBy("window_start", "window_end", "status").agg(F.sum("requests").alias("requests"))


def top_urls(url_status, n: int = 10):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_url = url_status.groupBy("window_start", "window_end", "url").agg(F.sum("requests").alias("requests"))
    rank = Window.partitionBy("window_start").orderBy(F.desc("requests"), F.asc("url"))
    return per_url.withColumn("rank", F.row_number().over(rank)).where(F.col("rank") <= n)


class BatchOutput:
    """foreachBatch target: Parquet (idempotent per batch id) and the output topic (exactly once by default)."""

    def __init__(
        self,
        bootstrap: str,
        output_topic: str | None,
        parquet_dir: str | None,
        kind: str,
        delivery_guarantee: str = "exactly-once",
        kafka_options: dict[str, str] | None = None,
        schema_registry_url: str | None = None,
    ):
        self.bootstrap = bootstrap
        self.schema_registry_url = schema_registry_url
        self.kafka_options = dict(kafka_options or {})
        self.output_topic = output_topic
        self.parquet_dir = parquet_dir
        self.kind = kind
        self.delivery_guarantee = delivery_guarantee

    def tables(self, df) -> dict:
        if self.kind == "minute":
            return {"minute_stats": df}
        return {"status_counts": status_counts(df), "top_urls": top_urls(df)}

    def __call__(self, df, batch_id: int) -> None:
        from functools import reduce

        from pyspark.sql import functions as F

        df = df.persist()
        try:
            if df.isEmpty():  # most batches: no window closed yet
                return
            messages = []
            for table, result in self.tables(df).items():
                result = result.coalesce(1)
                if self.parquet_dir:
                    path = os.path.join(self.parquet_dir, table, f"batch_id={batch_id}")
                    result.write.mode("overwrite").parquet(path)
                kind = KINDS[table]
                messages.append(result.select(F.lit(kind).alias("key"), self.value(result, kind).alias("value")))
            if self.output_topic:  # one Spark job for all tables
                writer = (
                    reduce(lambda a, b: a.unionByName(b), messages)
                    .write.format("strom")
                    .mode("append")
                    .option("kafka.bootstrap.servers", self.bootstrap)
                    .options(**self.kafka_options)
                    .option("topic", self.output_topic)
                    .option("deliveryGuarantee", self.delivery_guarantee)
                )
                if self.schema_registry_url:
                    writer = (
                        writer.option("value.format", "avro")
                        .option("schema.registry.url", self.schema_registry_url)
                        .option("value.schema", json.dumps(STATS_SCHEMA))
                    )
                if self.delivery_guarantee == "exactly-once":
                    # the query id and this batch id come from Spark; the write id names this write
                    writer = writer.option("writeId", "stats")
                writer.save()
        finally:
            df.unpersist()

    def value(self, result, kind: str):
        """The output value of one table's rows: a JSON string, or with a registry a struct of
        STATS_SCHEMA's fields (the sink encodes it as Avro), the other kinds' fields null."""
        from pyspark.sql import functions as F

        if not self.schema_registry_url:
            return F.to_json(F.struct(F.lit(kind).alias("kind"), *[F.col(c) for c in result.columns]))
        optional = [
            (F.col(name) if name in result.columns else F.lit(None)).cast(type_).alias(name)
            for name, type_ in _OPTIONAL.items()
        ]
        return F.struct(
            F.lit(kind).alias("kind"),
            F.col("window_start"),
            F.col("window_end"),
            F.col("requests").cast("long").alias("requests"),
            *optional,
        )


def start(spark, **settings) -> list:
    """Start both QUERIES with ``settings`` (``start_query``'s keywords); their StreamingQuery handles.

    ``kafka_options`` (``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``, ...) go to the
    source and the sink alike, so the pipeline runs against a secured cluster.
    """
    return [start_query(spark, name, **settings) for name in QUERIES]


QUERIES = ("minute_stats", "url_status")


def start_query(
    spark,
    name: str,
    *,
    bootstrap: str,
    topic: str,
    output_topic: str | None,
    parquet_dir: str | None,
    checkpoint_dir: str,
    window: str = "1 minute",
    watermark: str = "10 seconds",
    trigger_seconds: float = 5.0,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    starting_offsets: str = "earliest",
    delivery_guarantee: str = "exactly-once",
    kafka_options: dict[str, str] | None = None,
    schema_registry_url: str | None = None,
):
    """Start one of QUERIES (on a source of its own) from its checkpoint; its StreamingQuery."""
    from strom.spark import register

    register(spark)
    reader = (
        spark.readStream.format("strom")
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**(kafka_options or {}))
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    events = parse_lines(reader.load())
    if name == "minute_stats":
        agg, kind = minute_stats(events, window, watermark), "minute"
    elif name == "url_status":
        agg, kind = url_status_counts(events, window, watermark), "url_status"
    else:
        raise ValueError(f"unknown query {name!r}: the pipeline's queries are {', '.join(QUERIES)}")
    writer = (
        agg.writeStream.queryName(name)
        .outputMode("append")
        .option("checkpointLocation", os.path.join(checkpoint_dir, name))
        .foreachBatch(
            BatchOutput(
                bootstrap, output_topic, parquet_dir, kind, delivery_guarantee, kafka_options, schema_registry_url
            )
        )
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=f"{trigger_seconds} seconds")
    )
    return writer.start()


def stop_queries(queries, timeout: float = 60.0) -> None:
    """Stop each query between micro-batches when possible.

    Stopping in the middle of a foreachBatch call interrupts the Python callback; Spark then
    matches the (long) Py4J error text with a regex that can overflow the JVM stack and print a
    StackOverflowError. Waiting for the trigger to go idle avoids that; the wait is bounded.
    """
    import time

    for query in queries:
        deadline = time.monotonic() + timeout
        while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.05)
        query.stop()


def build_session(app_name: str = "strom-access-log", shuffle_partitions: int = 4):
    """A SparkSession for the pipeline: local[*] unless spark-submit chose a master."""
    from strom.spark import use_this_python

    use_this_python()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # under spark-submit: join its JVM first, or SparkConf() is an empty Python dict that
        # never sees --master and --conf, and the job would quietly run local[*]
        SparkContext._ensure_initialized()
    builder = SparkSession.builder.appName(app_name)
    conf = SparkConf()
    if not conf.contains("spark.master"):
        builder = builder.master("local[*]").config("spark.ui.enabled", "false")
    if not conf.contains("spark.sql.shuffle.partitions"):
        # a streaming aggregation keeps one state store per shuffle partition: 200 is far too many here
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if not conf.contains("spark.ui.showConsoleProgress"):
        # a stage bar every few seconds would scroll over the pipeline's own output (the demo's table)
        builder = builder.config("spark.ui.showConsoleProgress", "false")
    return builder.getOrCreate()


def kafka_options_from_properties(path: str | None) -> dict[str, str]:
    """A client properties file (Kafka's keys, as for --command-config) as the source's and sink's
    ``kafka.*`` options; its bootstrap.servers is left to the pipeline's own option."""
    if not path:
        return {}
    from strom.cli.client_props import command_properties

    return {f"kafka.{key}": value for key, value in command_properties(path).items() if key != "bootstrap.servers"}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="strom.spark.pipelines.access_log",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties (security.protocol, sasl.*, ssl.*, ...) for the source and the sink",
    )
    parser.add_argument("--topic", required=True, help="topic of access-log lines")
    parser.add_argument("--output-topic", default=None, help="topic for the aggregated results (JSON, or Avro)")
    parser.add_argument(
        "--schema-registry-url",
        default=None,
        help="write the output topic as Avro records (schema STATS_SCHEMA, subject <output-topic>-value)",
    )
    parser.add_argument("--parquet-dir", default=None, help="directory for the Parquet tables")
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--window", default="1 minute")
    parser.add_argument("--watermark", default="10 seconds")
    parser.add_argument("--trigger-seconds", type=float, default=5.0)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument(
        "--delivery-guarantee",
        choices=("exactly-once", "at-least-once"),
        default="exactly-once",
        help="how the output topic is written (default exactly-once: read it read_committed)",
    )
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what is in the topic now, then stop (Trigger.AvailableNow)",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.output_topic and not args.parquet_dir:
        print("give --output-topic, --parquet-dir or both", file=sys.stderr)
        return 2
    spark = build_session()
    spark.sparkContext.setLogLevel("WARN")
    queries = start(
        spark,
        bootstrap=args.bootstrap_server,
        topic=args.topic,
        output_topic=args.output_topic,
        parquet_dir=args.parquet_dir,
        checkpoint_dir=args.checkpoint_dir,
        window=args.window,
        watermark=args.watermark,
        trigger_seconds=args.trigger_seconds,
        available_now=args.available_now,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
        delivery_guarantee=args.delivery_guarantee,
        kafka_options=kafka_options_from_properties(args.command_config),
        schema_registry_url=args.schema_registry_url,
    )
    try:
        for query in queries:
            query.awaitTermination()
    except KeyboardInterrupt:
        pass
    finally:
        stop_queries(queries)
        spark.stop()
    failed = [q.name for q in queries if q.exception() is not None]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
