"""The access-log pipeline: its windowed results against the same numbers computed in plain Python."""

from __future__ import annotations

import collections
import datetime as dt
import json
import re

from strom.cli.gen_access_log import AccessLogGenerator
from strom.spark.pipelines import access_log
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


def test_windowed_counts_match_plain_python(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "access", 2)
    create_topic(broker.bootstrap, "stats", 1)
    gen = AccessLogGenerator(seed=7, n_ips=300)
    lines = gen.lines(1500, BASE, per_second=5.0)  # five full minutes
    late_closer = gen.line(BASE + 900)  # moves the watermark past every window above
    produce(broker.bootstrap, "access", [(line.encode(), None, None, None) for line in lines + [late_closer]])

    parquet = tmp_path / "parquet"
    queries = access_log.start(
        spark,
        bootstrap=broker.bootstrap,
        topic="access",
        output_topic="stats",
        parquet_dir=str(parquet),
        checkpoint_dir=str(tmp_path / "ckpt"),
        available_now=True,
    )
    for query in queries:
        assert query.awaitTermination(180), f"{query.name} did not finish"
        assert query.exception() is None, query.exception()

    minutes, statuses, top = python_counts(lines)
    assert len(minutes) == 5

    def epoch(ts):
        return int(ts.replace(tzinfo=dt.UTC).timestamp()) if ts.tzinfo is None else int(ts.timestamp())

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        got = {epoch(r.window_start): r for r in spark.read.parquet(str(parquet / "minute_stats")).collect()}
        assert sorted(got) == sorted(minutes)
        for minute, m in minutes.items():
            assert got[minute].requests == m["requests"]
            assert got[minute].page_views == m["page_views"]
            exact = len(m["ips"])
            assert abs(got[minute].unique_visitors - exact) <= max(
                2, 0.04 * exact
            )  # 4 standard deviations, (got[minute], exact)
        got_status = {
            (epoch(r.window_start), r.status): r.requests
            for r in spark.read.parquet(str(parquet / "status_counts")).collect()
        }
        assert got_status == dict(statuses)
        got_top = collections.defaultdict(list)
        for r in sorted(spark.read.parquet(str(parquet / "top_urls")).collect(), key=lambda r: r.rank):
            got_top[epoch(r.window_start)].append((r.url, r.requests))
        assert dict(got_top) == top
    finally:
        spark.conf.unset("spark.sql.session.timeZone")

    # the same results went to the output topic as JSON
    out = [json.loads(r.value) for r in strom_reader(spark, broker.bootstrap, subscribe="stats").collect()]
    kinds = collections.Counter(o["kind"] for o in out)
    assert kinds == {"minute": 5, "status": len(statuses), "top_url": sum(len(v) for v in top.values())}
    assert sum(o["requests"] for o in out if o["kind"] == "minute") == 1500
