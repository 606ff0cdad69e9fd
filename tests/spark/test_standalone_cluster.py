"""The access-log pipeline on a Spark standalone cluster (a master and two workers on this machine),
submitted with spark-submit against a 3-broker strom cluster on a real ZooKeeper.

The windows are checked against the input as the local[*] test checks them. Which executor ran
which task comes from Spark's event log: every successful task of a stage that scans the source
(its RDDs include a DataSourceRDD) reports the records it read, and each executor's log URL
names the web UI of the worker it ran on.
"""

from __future__ import annotations

import collections
import glob
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from strom.cli.gen_access_log import AccessLogGenerator
from strom.cluster import zookeeper_server
from strom.spark.pipelines import access_log
from strom.spark.standalone import StandaloneCluster
from tests.cluster.conftest import Cluster, create_topic
from tests.spark.conftest import consume_all, produce
from tests.spark.test_access_log import BASE, check_windows, epoch

PARTITIONS = 4
SUBMIT_TIMEOUT_S = 360  # about a minute on a quiet 2-core machine; the bound is for a loaded one

pytestmark = pytest.mark.timeout(SUBMIT_TIMEOUT_S + 180)


@pytest.fixture
def spark_and_strom(tmp_path):
    """A Spark standalone cluster and a 3-broker strom cluster, their JVMs starting side by side."""
    spark_cluster = StandaloneCluster(tmp_path / "spark", workers=2, cores=1, memory="1g")
    zk_process = None
    cluster = None
    try:
        spark_cluster.launch_master()
        zk_process, zk_port = zookeeper_server.start(str(tmp_path / "zookeeper"))
        spark_cluster.wait_master()
        spark_cluster.launch_workers()
        cluster = Cluster(tmp_path / "strom", f"127.0.0.1:{zk_port}", size=3).start()
        yield spark_cluster, cluster
    finally:
        spark_cluster.stop()
        if cluster is not None:
            cluster.close()
        if zk_process is not None:
            zookeeper_server.stop(zk_process)


def read_table(directory: Path) -> list[dict]:
    return pq.read_table(directory).to_pylist()


def parquet_rows(parquet: Path):
    """The pipeline's three tables as check_windows takes them, read with pyarrow (the driver was
    another process; no Spark session here)."""
    minute_rows = [
        (epoch(r["window_start"]), r["requests"], r["page_views"], r["unique_visitors"])
        for r in read_table(parquet / "minute_stats")
    ]
    status_rows = [
        (epoch(r["window_start"]), r["status"], r["requests"]) for r in read_table(parquet / "status_counts")
    ]
    top_rows = [
        (epoch(r["window_start"]), r["rank"], r["url"], r["requests"]) for r in read_table(parquet / "top_urls")
    ]
    return minute_rows, status_rows, top_rows


def event_log(directory: Path) -> list[dict]:
    events = []
    for path in sorted(glob.glob(str(directory / "**" / "events_*"), recursive=True)):
        with open(path) as f:
            events += [json.loads(line) for line in f if line.strip()]
    return events


def test_pipeline_on_standalone_cluster_reads_on_both_workers(spark_and_strom, tmp_path):
    spark_cluster, cluster = spark_and_strom
    create_topic(cluster, "access", partitions=PARTITIONS, replication_factor=3)
    create_topic(cluster, "stats", partitions=1, replication_factor=3)
    gen = AccessLogGenerator(seed=11, n_ips=300)
    lines = gen.lines(1500, BASE, per_second=5.0)  # five full minutes
    late_closer = gen.line(BASE + 900)  # moves the watermark past every window above
    records = lines + [late_closer]
    # round robin, so that every partition (and so every executor) has lines to read
    produce(
        cluster.bootstrap, "access", [(line.encode(), None, i % PARTITIONS, None) for i, line in enumerate(records)]
    )
    spark_cluster.wait_ready()

    parquet, events = tmp_path / "parquet", tmp_path / "events"
    events.mkdir()
    code = spark_cluster.submit(
        os.path.abspath(access_log.__file__),
        ["--bootstrap-server", cluster.bootstrap, "--topic", "access", "--output-topic", "stats"]
        + ["--parquet-dir", str(parquet), "--checkpoint-dir", str(tmp_path / "checkpoints"), "--available-now"],
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": str(events),
            "spark.eventLog.compress": "false",
            # schedule the first micro-batch only once both executors are there
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
        },
        log_path=tmp_path / "driver.log",
        timeout=SUBMIT_TIMEOUT_S,
    )
    driver_log = (tmp_path / "driver.log").read_text(errors="replace")
    assert code == 0, driver_log[-5000:]

    minute_rows, status_rows, top_rows = parquet_rows(parquet)
    output = [json.loads(value) for _, _, value in consume_all(cluster.bootstrap, "stats", 1, "read_committed")]
    check_windows(lines, minute_rows, status_rows, top_rows, output)

    # executors on both workers read the topic, side by side in the same micro-batch
    log = event_log(events)
    worker_ui = {w["webuiaddress"].rsplit(":", 1)[1]: w["id"] for w in spark_cluster.status()["workers"]}
    assert len(worker_ui) == 2
    worker_of = {
        e["Executor ID"]: worker_ui[e["Executor Info"]["Log Urls"]["stderr"].split("/")[2].rsplit(":", 1)[1]]
        for e in log
        if e["Event"] == "SparkListenerExecutorAdded"
    }
    # a stage that scans the source has a DataSourceRDD (other stages' input metrics count cached rows)
    scan_stages = {
        e["Stage Info"]["Stage ID"]
        for e in log
        if e["Event"] == "SparkListenerStageSubmitted"
        and any(rdd["Name"] == "DataSourceRDD" for rdd in e["Stage Info"]["RDD Info"])
    }
    read_by_worker: dict[str, int] = collections.Counter()
    workers_of_stage = collections.defaultdict(set)
    for e in log:
        if (
            e["Event"] == "SparkListenerTaskEnd"
            and e["Stage ID"] in scan_stages
            and e["Task End Reason"]["Reason"] == "Success"
        ):
            worker = worker_of[e["Task Info"]["Executor ID"]]
            read_by_worker[worker] += e["Task Metrics"]["Input Metrics"]["Records Read"]
            workers_of_stage[e["Stage ID"]].add(worker)
    assert set(read_by_worker) == set(worker_ui.values()), read_by_worker
    # both queries read every record once
    assert sum(read_by_worker.values()) == 2 * len(records), read_by_worker
    assert any(len(w) == 2 for w in workers_of_stage.values()), workers_of_stage
