"""One broker with metrics.listener: per-API request counts, latency histograms, connections, process metrics."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from strom.server.config import BrokerConfig
from strom.storage.log_config import ConfigError
from tests.broker_process import BrokerProcess
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
    assert result.returncode == 2, result.stderr
    assert "metrics.listener" in result.stderr and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
