"""``strom cluster start --secure``: the fault tests' kill-the-leader scenario on a SASL_SSL cluster.

The cluster is made by the CLI alone (CA, broker certificates, SCRAM users, ACL authorizer); the
client uses nothing but the properties file it prints, converted to librdkafka's keys as
``--command-config`` does. The brokers replicate over their INTERNAL SASL_SSL listener, so the
restarted leader can only catch up by logging in there as the inter-broker user.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from strom.cli.client_props import from_java_keys, load_properties
from strom.cli.dump_log import scan_log
from strom.cluster import model
from strom.cluster.model import PartitionState
from tests.cluster.conftest import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS, wait_until
from tests.cluster.test_cluster_cli import bootstrap_of, cleanup, pids, strom
from tests.cluster.workload import Workload, verify

TOPIC = "secured"
PARTITIONS = 2
IDS = (1, 2, 3)


def batches(directory: Path, broker_id: int, partition: int, topic: str = TOPIC) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every batch in one replica's .log files."""
    found = []
    path = directory / "data" / f"kafka-logs-{broker_id}" / f"{topic}-{partition}"
    for name in sorted(os.listdir(path)) if path.exists() else []:
        if name.endswith(".log"):
            found += [(h.base_offset, h.last_offset, h.crc) for h, _ in scan_log(str(path / name))[0]]
    return found


def start_secure_cluster(directory: Path, connect: str) -> tuple[str, str, str, dict, dict]:
    """``strom cluster start --secure`` with three brokers on ZooKeeper ``connect``: its output, the
    bootstrap servers, the admin's client properties file, and those properties as written (Java's
    keys) and as librdkafka takes them (without bootstrap.servers)."""
    started = strom(
        "cluster",
        "start",
        "--secure",
        "--brokers",
        "3",
        "--dir",
        str(directory),
        "--zookeeper",
        connect,
        "--override",
        f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        "--override",
        f"replica.lag.time.max.ms={LAG_TIME_MAX_MS}",
    )
    assert started.returncode == 0, started.stderr
    found = re.search(r"^Client properties \(admin, SASL_SSL\): (\S+)$", started.stdout, re.MULTILINE)
    assert found, started.stdout
    java = load_properties(found[1])
    secure = from_java_keys(dict(java))
    secure.pop("bootstrap.servers")
    return started.stdout, bootstrap_of(started.stdout), found[1], java, secure


def test_kill_the_leader_on_a_secure_cluster(tmp_path, zookeeper):
    directory = tmp_path / "cluster"
    chroot = f"/secure-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper + chroot, timeout=10)
    try:
        output, bootstrap, properties, java, secure = start_secure_cluster(directory, zookeeper + chroot)
        assert java["security.protocol"] == "SASL_SSL" and java["sasl.mechanism"] == "SCRAM-SHA-512"
        assert oct(os.stat(properties).st_mode & 0o777) == "0o600"

        # the Schema Registry: https with the cluster's CA, HTTP Basic with the SCRAM users
        registries = re.search(r"^Schema Registry: (\S+)$", output, re.MULTILINE)
        assert registries, output
        urls = registries[1].split(",")
        assert len(urls) == 3 and all(url.startswith("https://127.0.0.1:") for url in urls)
        password = re.search(r'password="([^"]+)"', java["sasl.jaas.config"])[1]
        ca = java["ssl.truststore.location"]
        schemas = [sys.executable, "-m", "strom.cli.main", "schemas", "--registry-url", urls[0], "--ca-file", ca]
        refused = subprocess.run([*schemas, "list"], capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode == 1 and "HTTP 401" in refused.stderr, refused.stderr
        registered = subprocess.run(
            [*schemas, "--user-info", f"admin:{password}", "register", "--subject", "s-value", "--schema", '"string"'],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert registered.returncode == 0 and '"id": 1' in registered.stdout, registered.stderr

        zk.start(timeout=30)
        registration = json.loads(zk.get(model.broker_path(1))[0])
        assert registration["listener_security_protocol_map"] == {"CLIENT": "SASL_SSL", "INTERNAL": "SASL_SSL"}
        assert b"password" not in zk.get(model.user_config_path("broker"))[0]  # salted keys only

        # a client without the properties cannot even list topics
        stranger = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        try:
            stranger.list_topics(timeout=3)
            raise AssertionError("a PLAINTEXT client got metadata from a --secure cluster")
        except KafkaException:
            pass

        admin = AdminClient({"bootstrap.servers": bootstrap, **secure})
        for future in admin.create_topics(
            [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})], request_timeout=20
        ).values():
            future.result(timeout=30)

        def state(partition: int) -> PartitionState | None:
            path = model.partition_state_path(TOPIC, partition)
            return PartitionState.from_json(zk.get(path)[0]) if zk.exists(path) else None

        def full_isr() -> bool:
            states = [state(p) for p in range(PARTITIONS)]
            return all(s is not None and sorted(s.isr) == list(IDS) for s in states)

        wait_until(full_isr, 30, "a full ISR (followers fetching over SASL_SSL)")
        workload = Workload(bootstrap, TOPIC, PARTITIONS, extra=secure).start()
        workload.wait_progress(range(PARTITIONS), 20, 30)

        victim = state(0).leader
        led = [p for p in range(PARTITIONS) if state(p).leader == victim]
        os.kill(pids(directory)[f"server-{victim}"], signal.SIGKILL)
        wait_until(
            lambda: all(state(p).leader not in (victim, -1) for p in led),
            SESSION_TIMEOUT_MS / 1000 + 20,
            f"new leaders away from broker {victim}",
        )
        workload.wait_progress(led, 10, 30)  # acks=all goes on with two of three (min.insync.replicas=2)

        # back, as a supervisor would start it: it catches up over the INTERNAL listener
        with open(directory / "logs" / f"server-{victim}.log", "ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "strom.cli.main",
                    "server-start",
                    str(directory / "config" / f"server-{victim}.properties"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        (directory / "pids" / f"server-{victim}.pid").write_text(f"{process.pid}\n")
        wait_until(full_isr, 60, f"broker {victim} back in the ISR")
        workload.wait_progress(range(PARTITIONS), 5, 30)
        workload.stop()

        verify(bootstrap, workload, extra=secure)  # every acknowledged message, once, at its offset
        assert not workload.failed, workload.failed[:5]

        def replicas_equal() -> bool:
            return all(
                batches(directory, 1, p) == batches(directory, b, p) != [] for p in range(PARTITIONS) for b in IDS
            )

        wait_until(replicas_equal, 30, "identical batches on all three replicas", interval_s=0.2)

        # a fourth broker: its certificate from the same CA, its own INTERNAL listener, the same SASL and ACLs
        added = strom("cluster", "add-broker", "--dir", str(directory))
        assert added.returncode == 0, added.stderr
        assert json.loads(zk.get(model.broker_path(4))[0])["listener_security_protocol_map"] == {
            "CLIENT": "SASL_SSL",
            "INTERNAL": "SASL_SSL",
        }
        for future in admin.create_topics(
            [NewTopic("joined", num_partitions=1, replica_assignment=[[1, 4]])], request_timeout=20
        ).values():
            future.result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, **secure, "acks": "all"})
        for i in range(20):
            producer.produce("joined", value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0
        wait_until(  # broker 4 can only have these batches by fetching from 1 over SASL_SSL as User:broker
            lambda: batches(directory, 4, 0, "joined") == batches(directory, 1, 0, "joined") != [],
            30,
            "the new broker's replica identical to the leader's",
            interval_s=0.2,
        )
        stopped = strom("cluster", "stop", "--dir", str(directory))
        assert stopped.returncode == 0, stopped.stderr
    finally:
        zk.stop()
        zk.close()
        cleanup(directory)
