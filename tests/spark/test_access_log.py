"""The access-log pipeline: its windowed results against the same numbers computed in plain Python."""

from __future__ import annotations

import collections
import datetime as dt
import json
import re
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.cli.gen_access_log import AccessLogGenerator
from strom.console.schemas import SchemaBrowser
from strom.spark.pipelines import access_log
from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import registry_url
from tests.spark.conftest import create_topic, produce, strom_reader

LINE = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "\S+ (\S+)[^"]*" (\d{3}) ')
BASE = 1_790_000_040  # a whole minute (UTC)


def python_counts(lines):
    minutes = collections.defaultdict(lambda: {"requests": 0, "page_views": 0, "ips": set()})
    statuses = collections.Counter()
    urls = collections.defaultdict(collections.Counter)
    for line in lines:
        ip, stamp, url, status = LINE.match(line).groups()
        epoch = dt.datetime.strptime(stamp, "%d/%b/%Y:%H:%M:%S %z").timestamp()
        minute = int(epoch) // 60 * 60
        m = minutes[minute]
        m["requests"] += 1
        m["page_views"] += not url.startswith(("/static/", "/favicon.ico"))
        m["ips"].add(ip)
        statuses[(minute, int(status))] += 1
        urls[minute][url] += 1
    top = {
        minute: [(u, n) for u, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
        for minute, c in urls.items()
    }
    return minutes, statuses, top


def run_pipeline(spark, bootstrap: str, tmp_path, schema_registry_url: str | None = None):
    """(input lines, minute rows, status rows, top rows) of one AvailableNow run over five minutes."""
    create_topic(bootstrap, "access", 2)
    create_topic(bootstrap, "stats", 1)
    gen = AccessLogGenerator(seed=7, n_ips=300)
    lines = gen.lines(1500, BASE, per_second=5.0)  # five full minutes
    late_closer = gen.line(BASE + 900)  # moves the watermark past every window above
    produce(bootstrap, "access", [(line.encode(), None, None, None) for line in lines + [late_closer]])

    parquet = tmp_path / "parquet"
    queries = access_log.start(
        spark,
        bootstrap=bootstrap,
        topic="access",
        output_topic="stats",
        parquet_dir=str(parquet),
        checkpoint_dir=str(tmp_path / "ckpt"),
        available_now=True,
        schema_registry_url=schema_registry_url,
    )
    for query in queries:
        assert query.awaitTermination(180), f"{query.name} did not finish"
        assert query.exception() is None, query.exception()

    assert len(python_counts(lines)[0]) == 5

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        read = spark.read.parquet
        minute_rows = [
            (epoch(r.window_start), r.requests, r.page_views, r.unique_visitors)
            for r in read(str(parquet / "minute_stats")).collect()
        ]
        status_rows = [
            (epoch(r.window_start), r.status, r.requests) for r in read(str(parquet / "status_counts")).collect()
        ]
        top_rows = [
            (epoch(r.window_start), r.rank, r.url, r.requests) for r in read(str(parquet / "top_urls")).collect()
        ]
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    return lines, minute_rows, status_rows, top_rows


def test_windowed_counts_match_plain_python(spark, broker, tmp_path):
    lines, minute_rows, status_rows, top_rows = run_pipeline(spark, broker.bootstrap, tmp_path)
    out = [json.loads(r.value) for r in strom_reader(spark, broker.bootstrap, subscribe="stats").collect()]
    check_windows(lines, minute_rows, status_rows, top_rows, out)


@pytest.fixture
def registry_broker(tmp_path):
    with BrokerProcess(tmp_path / "broker", {"schema.registry.listeners": "http://127.0.0.1:0"}) as process:
        yield process


def test_avro_results_under_access_stats_value(spark, registry_broker, tmp_path):
    """With a registry the results are Avro records of STATS_SCHEMA under ``stats-value``, which
    confluent-kafka's AvroDeserializer reads (read_committed) to the same numbers."""
    url = registry_url(registry_broker)
    lines, minute_rows, status_rows, top_rows = run_pipeline(spark, registry_broker.bootstrap, tmp_path, url)
    client = SchemaRegistryClient({"url": url})
    latest = client.get_latest_version("stats-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str)["name"] == "AccessStat"
    deserialize = AvroDeserializer(client)
    context = SerializationContext("stats", MessageField.VALUE)
    console = SchemaBrowser(url, 10.0)  # what the web console's message browser shows of each record
    out = []
    for value in committed_values(registry_broker.bootstrap, "stats"):
        assert value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
        row = deserialize(value, context)
        out.append(row)
        shown = console.decode(value)
        assert shown is not None and (shown.kind, shown.schema_id) == ("avro", latest.schema_id)
        assert json.loads(shown.text)["kind"] == row["kind"] and json.loads(shown.text)["requests"] == row["requests"]
    check_windows(lines, minute_rows, status_rows, top_rows, out)
    for row in out:  # one schema for three kinds: each leaves the others' fields null
        assert isinstance(row["window_start"], dt.datetime)
        filled = {k for k in ("page_views", "unique_visitors", "status", "url", "rank") if row[k] is not None}
        assert (
            filled
            == {"minute": {"page_views", "unique_visitors"}, "status": {"status"}, "top_url": {"url", "rank"}}[
                row["kind"]
            ]
        )


def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of partition 0 of ``topic``, read_committed, up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "stats-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(msg.error())
            values.append(msg.value())
        raise AssertionError(f"{topic} not read to its end in 60 s")
    finally:
        consumer.close()


def epoch(ts: dt.datetime) -> int:
    """A window start in epoch seconds; a naive timestamp (Spark's session time zone, or Parquet
    INT96 read by pyarrow) is UTC."""
    return int(ts.replace(tzinfo=dt.UTC).timestamp()) if ts.tzinfo is None else int(ts.timestamp())


def check_windows(lines, minute_rows, status_rows, top_rows, output) -> None:
    """The pipeline's three tables and its output topic against the numbers plain Python computes
    from the input ``lines`` (the late line that closes the windows left out).

    Rows are plain tuples, window starts in epoch seconds, so that a test whose driver is another
    process (spark-submit) checks its Parquet files the same way: minute_rows (start, requests,
    page_views, unique_visitors), status_rows (start, status, requests), top_rows (start, rank,
    url, requests); ``output`` is the output topic's records as dicts (JSON or decoded Avro).
    """
    minutes, statuses, top = python_counts(lines)
    got = {start: row for start, *row in minute_rows}
    assert len(got) == len(minute_rows), "a window was written twice"
    assert sorted(got) == sorted(minutes)
    for minute, m in minutes.items():
        requests, page_views, unique_visitors = got[minute]
        assert requests == m["requests"]
        assert page_views == m["page_views"]
        exact = len(m["ips"])
        assert abs(unique_visitors - exact) <= max(2, 0.04 * exact)  # 4 standard deviations, (got, exact)
    got_status = {(start, status): requests for start, status, requests in status_rows}
    assert len(got_status) == len(status_rows), "a status count was written twice"
    assert got_status == dict(statuses)
    got_top = collections.defaultdict(list)
    for start, _rank, url, requests in sorted(top_rows, key=lambda r: (r[0], r[1])):
        got_top[start].append((url, requests))
    assert dict(got_top) == top

    # the same results went to the output topic
    kinds = collections.Counter(o["kind"] for o in output)
    assert kinds == {"minute": len(minutes), "status": len(statuses), "top_url": sum(len(v) for v in top.values())}
    assert sum(o["requests"] for o in output if o["kind"] == "minute") == len(lines)
