"""Debian's Burrow 1.2.1 (LinkedIn's lag monitor, on the Go client sarama) reads a group's lag from strom.

Burrow with ``kafka-version="0.10.0"`` speaks the versions Kafka 4 removed: Metadata v1,
ListOffsets v0 for the log end offsets, Fetch v2 (message format v1) to consume
``__consumer_offsets``, whose offset commit values it decodes itself. Its own ZooKeeper (for its
leader lock) is Debian's, started for this test. The lag it reports per partition must match what
``strom consumer-groups --describe`` shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.cluster import zookeeper_server
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, Msg, confluent_produce

BURROW = "/usr/bin/Burrow"  # scripts/setup.sh installs Debian's burrow


@pytest.fixture
def zookeeper(tmp_path):
    directory = tmp_path / "zookeeper"
    directory.mkdir()
    process, port = zookeeper_server.start(str(directory))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        zookeeper_server.stop(process)


def burrow_config(directory, zookeeper: str, bootstrap: str, http_port: int) -> str:
    return f"""
[general]
pidfile="{directory}/burrow.pid"
[logging]
filename="{directory}/burrow.log"
level="info"
[zookeeper]
servers=["{zookeeper}"]
timeout=6
root-path="/burrow"
[client-profile.strom]
client-id="burrow"
kafka-version="0.10.0"
[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="strom"
topic-refresh=2
offset-refresh=1
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="strom"
start-latest=false
[httpserver.default]
address="127.0.0.1:{http_port}"
[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
"""


def get_json(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None  # Burrow answers 404 until it has seen the cluster or the group


def cli_lag(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "consumer-groups",
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith(group)]
    return {(row[1], int(row[2])): int(row[5]) for row in rows}


def test_burrow_reports_group_lag_per_partition(tmp_path, zookeeper):
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("lagged", 2, 1)])["lagged"].result(WAIT_S)
        for partition, count in ((0, 10), (1, 3)):
            confluent_produce(
                broker.bootstrap, "lagged", [Msg(None, b"x%d" % i) for i in range(count)], partition=partition
            )
        group = "lagging-group"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(
                offsets=[TopicPartition("lagged", 0, 4), TopicPartition("lagged", 1, 3)], asynchronous=False
            )
        finally:
            consumer.close()
        expected = cli_lag(broker.bootstrap, group)
        assert expected == {("lagged", 0): 6, ("lagged", 1): 0}

        http_port = zookeeper_server.free_port()
        (tmp_path / "burrow.toml").write_text(burrow_config(tmp_path, zookeeper, broker.bootstrap, http_port))
        with open(tmp_path / "burrow.out", "wb") as out:
            burrow = subprocess.Popen(
                [BURROW, "-config-dir", str(tmp_path)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            base = f"http://127.0.0.1:{http_port}/v3/kafka/local"
            lag: dict[tuple[str, int], int] = {}
            topics = None
            deadline = time.monotonic() + 4 * WAIT_S
            while time.monotonic() < deadline and (lag != expected or topics is None):
                time.sleep(0.2)
                topics = (get_json(f"{base}/topic") or {}).get("topics")
                status = (get_json(f"{base}/consumer/{group}/lag") or {}).get("status") or {}
                lag = {(p["topic"], p["partition"]): p["current_lag"] for p in status.get("partitions") or ()}
            assert burrow.poll() is None, (tmp_path / "burrow.out").read_text()[-2000:]
            assert topics is not None and "lagged" in topics
            assert lag == expected, f"Burrow's lag {lag}, strom consumer-groups' {expected}"
            # the log end offsets Burrow got with ListOffsets v0
            offsets = get_json(f"{base}/topic/lagged")
            assert offsets is not None and offsets["offsets"] == [10, 3]
        finally:
            burrow.kill()  # Burrow waits for its ZooKeeper session on SIGTERM; nothing to keep
            burrow.wait(10)
