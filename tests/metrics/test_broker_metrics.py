"""One broker with metrics.listener: per-API request counts, latency histograms, connections, process metrics."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from strom.metrics.stats import FETCH_CONSUMER, FETCH_FOLLOWER, RequestMetrics
from strom.protocol.frame import RequestHeader
from strom.server.config import BrokerConfig
from strom.storage.log_config import ConfigError
from tests.broker_process import BrokerProcess
from tests.integration.clients import kcat
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

TOPIC = "requests-counted"


def test_request_counts_histograms_connections_and_process_metrics(tmp_path):
    with BrokerProcess(tmp_path / "data", METRICS_ON) as broker:
        url = metrics_url(tmp_path / "data")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        assert f"metrics on {url}" in broker.read_log()  # the ready line names it too
        before = scrape(url)

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for _ in range(5):
            admin.list_topics(timeout=10)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0})
        sends = 7
        for i in range(sends):  # flush after each message: exactly one Produce request apiece
            producer.produce(TOPIC, key=b"k%d" % i, value=b"v" * 50)
            assert producer.flush(15) == 0
        after = scrape(url)

        requests = "kafka_network_requestmetrics_requests_total"
        assert after.value(requests, request="Produce") - before.value(requests, request="Produce") == sends
        assert after.value(requests, request="Metadata") - before.value(requests, request="Metadata") >= 5
        assert after.value(requests, request="ApiVersions") >= 2  # one per client connection at least
        # the histogram counts what the rate counts, and its buckets are cumulative up to +Inf
        produce_count = after.value("kafka_network_requestmetrics_totaltimems_count", request="Produce")
        assert produce_count == after.value(requests, request="Produce")
        buckets = [
            (float(labels["le"]), v)
            for labels, v in after.samples["kafka_network_requestmetrics_totaltimems_bucket"]
            if labels["request"] == "Produce"
        ]
        assert [v for _, v in sorted(buckets)] == sorted(v for _, v in buckets)
        assert max(buckets)[1] == produce_count and max(buckets)[0] == float("inf")
        assert after.value("kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
        for phase in ("queue", "local", "remote", "responsesend"):
            assert after.value(f"kafka_network_requestmetrics_{phase}timems_count", request="Produce") == produce_count
        assert after.types["kafka_network_requestmetrics_totaltimems"] == "histogram"

        # the messages themselves
        assert after.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == sends
        assert after.value("kafka_server_brokertopicmetrics_messagesin_total") == sends  # all topics
        assert after.value("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=TOPIC) == sends
        assert after.value("kafka_server_brokertopicmetrics_failedproducerequests_total", topic=TOPIC) == 0
        assert after.value("kafka_log_log_logendoffset", topic=TOPIC, partition="0") == sends
        assert after.value("kafka_cluster_partition_highwatermark", topic=TOPIC, partition="0") == sends
        assert after.value("kafka_log_log_size", topic=TOPIC, partition="0") == after.value(
            "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC
        )
        assert after.value("kafka_server_replicamanager_leadercount") >= 1
        assert after.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert after.value("kafka_server_replicamanager_underreplicatedpartitions") == 0

        # connections: the admin client's and the producer's are open now
        assert after.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 2
        created = after.value("kafka_server_socket_server_metrics_connection_creation_total", listener="PLAINTEXT")
        closed = after.value("kafka_server_socket_server_metrics_connection_close_total", listener="PLAINTEXT")
        assert created - closed == after.value(
            "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT"
        )

        # the process: CPU, memory, open files, and the event loop's lag
        assert after.value("process_cpu_seconds_total") > 0
        assert after.value("process_resident_memory_bytes") > 10 * 2**20
        assert after.value("process_open_fds") > 5
        assert "strom_eventloop_lag_seconds" in after.samples
        assert after.value("strom_eventloop_lag_max_seconds") >= after.value("strom_eventloop_lag_seconds") >= 0


def test_under_load_every_request_is_counted_and_the_timed_ones_agree(tmp_path):
    """One message per Produce request from kcat, as fast as it sends: well above the rate at which
    every request is timed (RequestMetrics), so the histogram may hold a sample; the request
    counter must still count each one."""
    sends = 20_000
    with BrokerProcess(tmp_path / "data", METRICS_ON) as broker:
        url = metrics_url(tmp_path / "data")
        kcat(
            ["-P", "-b", broker.bootstrap, "-t", "loaded", "-p", "0", "-X", "linger.ms=0"]
            + ["-X", "batch.num.messages=1", "-X", "acks=1", "-X", "queue.buffering.max.messages=100000"],
            b"".join(b"m%d\n" % i for i in range(sends)),
            timeout=120,
        )
        after = scrape(url)
    appends = after.value("kafka_server_brokertopicmetrics_totalproducerequests_total", topic="loaded")
    assert appends == sends  # one partition, one message per request: one append per request
    assert after.value("kafka_network_requestmetrics_requests_total", request="Produce") == sends
    timed = after.value("kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert 0 < timed <= sends
    for phase in ("queue", "local", "remote", "responsesend"):
        assert after.value(f"kafka_network_requestmetrics_{phase}timems_count", request="Produce") == timed
    assert after.value("kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0


def test_request_timing_follows_the_rate_and_counts_stay_exact():
    metrics = RequestMetrics()
    header = RequestHeader(0, 9, 1, "producer", 2)
    assert metrics.every == 1  # a quiet broker times every request
    for _ in range(100 * RequestMetrics.TIMED_PER_WINDOW):
        metrics.count(header)
    metrics.next_window()
    assert metrics.every == 100 and metrics.countdown == 1
    for _ in range(5):
        metrics.count(header)
    metrics.next_window()
    assert metrics.every == 1
    metrics.record(header, 0.001, 0.002)
    fetch = RequestHeader(1, 12, 2, "strom-replica-fetcher-1", 2)
    metrics.count(fetch)
    metrics.record_awaited(fetch._replace(client_id="consumer"), 0.0, 0.001, 0.5, 0.0001)
    snap = metrics.snapshot()
    count, buckets, sums = snap[0]
    assert count == 100 * RequestMetrics.TIMED_PER_WINDOW + 6 and sum(buckets) == 1
    assert sums[4] == pytest.approx(0.003)
    assert snap[1][0] == 2 and sum(snap[1][1]) == 1
    assert snap[FETCH_FOLLOWER][0] == 1 and sum(snap[FETCH_FOLLOWER][1]) == 0
    assert snap[FETCH_CONSUMER][0] == 1 and snap[FETCH_CONSUMER][2][2] == pytest.approx(0.5)


def test_timing_every_request_when_configured(tmp_path):
    """metrics.request.timing.samples.per.second=0: no sampling, the histogram counts every request."""
    sends = 5_000  # as fast as kcat sends: well above the default 512 timed requests a second
    with BrokerProcess(tmp_path / "data", {**METRICS_ON, "metrics.request.timing.samples.per.second": "0"}) as broker:
        url = metrics_url(tmp_path / "data")
        kcat(
            ["-P", "-b", broker.bootstrap, "-t", "all-timed", "-p", "0", "-X", "linger.ms=0"]
            + ["-X", "batch.num.messages=1", "-X", "acks=1", "-X", "queue.buffering.max.messages=100000"],
            b"".join(b"m%d\n" % i for i in range(sends)),
            timeout=120,
        )
        after = scrape(url)
    assert after.value("kafka_network_requestmetrics_requests_total", request="Produce") == sends
    assert after.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == sends


def test_the_timing_rate_is_configurable():
    header = RequestHeader(0, 9, 1, "producer", 2)
    unlimited, slow = RequestMetrics(0), RequestMetrics(40)  # 40 a second: 10 per 0.25 s window
    for metrics in (unlimited, slow):
        for _ in range(1000):
            metrics.count(header)
        metrics.next_window()
    assert unlimited.every == 1 and slow.every == 100
    for _ in range(1000):
        unlimited.rearm()
        unlimited.record(header, 0.0, 0.001)
    assert unlimited.every == 1  # a burst does not thin it out either
    with pytest.raises(ConfigError, match="metrics.request.timing.samples.per.second"):
        BrokerConfig.from_properties(None, {"metrics.request.timing.samples.per.second": "-1"})


def test_metrics_are_off_unless_configured(tmp_path):
    with BrokerProcess(tmp_path / "data") as broker:
        assert not (tmp_path / "data" / "strom.metrics").exists()
        assert "metrics on" not in broker.read_log()


@pytest.mark.parametrize("value", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1", "http://:9404"])
def test_a_malformed_metrics_listener_is_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match="metrics.listener"):
        BrokerConfig.from_properties(None, {"metrics.listener": value})


def test_a_metrics_port_in_use_stops_the_broker_with_one_line_naming_the_key(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "strom.cli.main",
                "server-start",
                "--override",
                "listeners=PLAINTEXT://127.0.0.1:0",
                "--override",
                f"log.dirs={tmp_path / 'data'}",
                "--override",
                f"metrics.listener=http://127.0.0.1:{port}",
            ],
            capture_output=True,
            check=False,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(
        "strom server-start: cannot start: metrics.listener: "
        f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use (held by pid {os.getpid()}: "
    ), result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stdout
