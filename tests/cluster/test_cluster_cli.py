"""``strom cluster start/status/stop``: the seeds' three-broker setup in one command."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from strom.cli.client_props import watermark_offsets
from strom.cli.cluster import is_running
from tests.cluster.conftest import wait_until


def strom(*args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=timeout
    )


def pids(directory: Path) -> dict[str, int]:
    found = {}
    for path in (directory / "pids").glob("*.pid"):
        text = path.read_text().strip()
        if text:
            found[path.stem] = int(text)
    return found


def cleanup(directory: Path) -> None:
    """Whatever a failed test left running is stopped, by the pids the command recorded."""
    if (directory / "cluster.json").exists():
        strom("cluster", "stop", "--dir", str(directory))
    for name, pid in pids(directory).items():
        if is_running(pid, "QuorumPeerMain" if name == "zookeeper" else "server-start"):
            os.kill(pid, signal.SIGKILL)


def bootstrap_of(output: str) -> str:
    match = re.search(r"^Bootstrap servers: (\S*)$", output, re.M)
    assert match, output
    return match[1]


def produce_and_count(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors = []
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors, errors


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cli-test", "enable.auto.commit": False})
    try:
        _, high = watermark_offsets(consumer, TopicPartition(topic, 0), 15)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def test_start_status_stop_and_start_again(tmp_path):
    directory = tmp_path / "cluster"
    try:
        started = strom(
            "cluster",
            "start",
            "--brokers",
            "3",
            "--dir",
            str(directory),
            "--override",
            "zookeeper.session.timeout.ms=6000",
        )
        assert started.returncode == 0, started.stderr
        bootstrap = bootstrap_of(started.stdout)
        assert len(bootstrap.split(",")) == 3
        assert re.search(r"^started ZooKeeper on 127\.0\.0\.1:\d+ \(pid \d+\)$", started.stdout, re.M)
        for broker_id in (1, 2, 3):
            properties = (directory / "config" / f"server-{broker_id}.properties").read_text()
            assert f"broker.id={broker_id}\n" in properties
            assert re.search(r"^listeners=PLAINTEXT://127\.0\.0\.1:\d+$", properties, re.M)
            assert f"log.dirs={directory / 'data' / f'kafka-logs-{broker_id}'}\n" in properties
            assert "zookeeper.session.timeout.ms=6000\n" in properties
        ports = {line.split(":")[-1] for line in bootstrap.split(",")}
        assert len(ports) == 3
        # metrics are on, each broker on a port of its own that the next start keeps
        metrics = re.findall(r"^  metrics: (http://127\.0\.0\.1:\d+/metrics)$", started.stdout, re.M)
        assert len(set(metrics)) == 3, started.stdout
        for url in metrics:
            with urllib.request.urlopen(url, timeout=10) as response:
                assert b"kafka_server_replicamanager_partitioncount" in response.read()
        # and so is the Schema Registry, on every broker
        registries = registry_urls_of(started.stdout)
        assert len(set(registries)) == 3 and all(url.startswith("http://127.0.0.1:") for url in registries)

        # detached: the brokers outlive the command, in their own sessions
        for name, pid in pids(directory).items():
            assert is_running(pid, "QuorumPeerMain" if name == "zookeeper" else "server-start"), name
            assert os.getsid(pid) == pid

        status = strom("cluster", "status", "--dir", str(directory))
        assert status.returncode == 0, status.stdout + status.stderr
        for broker_id in (1, 2, 3):
            assert re.search(
                rf"^broker {broker_id}: up \(127\.0\.0\.1:\d+, pid \d+, registered\)$", status.stdout, re.M
            ), status.stdout
        assert re.search(r"^controller: broker [123]$", status.stdout, re.M), status.stdout
        assert bootstrap_of(status.stdout) == bootstrap

        created = strom(
            "topics",
            "--bootstrap-server",
            bootstrap,
            "--create",
            "--topic",
            "replicated",
            "--partitions",
            "1",
            "--replication-factor",
            "3",
        )
        assert created.returncode == 0, created.stderr
        produce_and_count(bootstrap, "replicated", 100)
        schema_id = register_schema(registries[0], "cli-value")
        wait_until(lambda: subjects_of(registries[2]) == ["cli-value"], 20, "the schema to reach broker 3's view")

        # a broker that dies shows as down, and status says something is wrong
        victim = pids(directory)["server-2"]
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: not is_running(victim, "server-start"), 10, "broker 2 to die")
        status = strom("cluster", "status", "--dir", str(directory))
        assert status.returncode == 1
        assert re.search(r"^broker 2: down \(127\.0\.0\.1:\d+", status.stdout, re.M), status.stdout
        assert "127.0.0.1" in bootstrap_of(status.stdout) and len(bootstrap_of(status.stdout).split(",")) == 2

        stopped = strom("cluster", "stop", "--dir", str(directory))
        assert stopped.returncode == 0, stopped.stderr
        assert "broker 2 is not running" in stopped.stdout
        assert "stopped ZooKeeper" in stopped.stdout
        for name, pid in pids(directory).items():
            assert not is_running(pid, "QuorumPeerMain" if name == "zookeeper" else "server-start"), name
        status = strom("cluster", "status", "--dir", str(directory))
        assert status.returncode == 1 and status.stdout.count(": down") == 4, status.stdout

        # the same directory starts the same cluster: same addresses, same data
        again = strom("cluster", "start", "--brokers", "3", "--dir", str(directory))
        assert again.returncode == 0, again.stderr
        assert bootstrap_of(again.stdout) == bootstrap
        assert re.findall(r"^  metrics: (http://\S+)$", again.stdout, re.M) == metrics
        assert registry_urls_of(again.stdout) == registries
        assert register_schema(registries[1], "cli-value") == schema_id  # kept, under the same id
        assert read_all(bootstrap, "replicated") == [f"m{i}".encode() for i in range(100)]
        twice = strom("cluster", "start", "--brokers", "3", "--dir", str(directory))
        assert twice.returncode == 1 and "are running" in twice.stderr
    finally:
        cleanup(directory)


def registry_urls_of(output: str) -> list[str]:
    match = re.search(r"^Schema Registry: (\S+)$", output, re.M)
    assert match, output
    return match.group(1).split(",")


def register_schema(url: str, subject: str) -> int:
    body = json.dumps({"schema": json.dumps({"type": "record", "name": "R", "fields": []})}).encode()
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=body,
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["id"]


def subjects_of(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/subjects", timeout=10) as response:
        return json.loads(response.read())


def test_start_on_a_given_zookeeper_and_base_port(tmp_path, zookeeper):
    from strom.cluster.zookeeper_server import free_port, port_free

    directory = tmp_path / "cluster"
    chroot = f"{zookeeper}/cli-{os.getpid()}-{int(time.time())}"
    base = None
    for _ in range(20):  # two consecutive free ports
        candidate = free_port()
        if port_free(candidate + 1):
            base = candidate
            break
    assert base is not None
    try:
        started = strom(
            "cluster",
            "start",
            "--brokers",
            "2",
            "--dir",
            str(directory),
            "--zookeeper",
            chroot,
            "--base-port",
            str(base),
        )
        assert started.returncode == 0, started.stderr
        assert "ZooKeeper" not in started.stdout
        assert bootstrap_of(started.stdout) == f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        assert f"zookeeper.connect={chroot}\n" in (directory / "config" / "server-1.properties").read_text()
        status = strom("cluster", "status", "--dir", str(directory))
        assert status.returncode == 0, status.stdout
        assert f"ZooKeeper {chroot}: external" in status.stdout
        stopped = strom("cluster", "stop", "--dir", str(directory))
        assert stopped.returncode == 0 and "ZooKeeper" not in stopped.stdout
        from kazoo.client import KazooClient

        client = KazooClient(hosts=zookeeper)  # the shared ZooKeeper is still serving
        client.start(timeout=10)
        client.stop()
        client.close()
    finally:
        cleanup(directory)
