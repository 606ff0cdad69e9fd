"""A real ZooKeeper and real broker processes for the cluster tests.

One ZooKeeper server serves the whole session; every cluster gets its own chroot, so clusters of
different tests never see each other's znodes. Brokers listen on fixed free ports on 127.0.0.1
so that a restarted broker comes back at the same address, as a Kafka broker does.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from strom.cli.dump_log import scan_log
from strom.cluster import model, zookeeper_server
from strom.cluster.model import PartitionState
from strom.protocol.records import batch_crc
from tests.broker_process import BrokerProcess

SESSION_TIMEOUT_MS = 6000
LAG_TIME_MAX_MS = 2000


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.05):
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """host:port of a ZooKeeper server started from Debian's package for this test session."""
    directory = tmp_path_factory.mktemp("zookeeper")
    process, port = zookeeper_server.start(str(directory))
    try:
        yield f"127.0.0.1:{port}"
    finally:
        zookeeper_server.stop(process)


class Cluster:
    """N broker processes sharing one ZooKeeper chroot, plus a kazoo client to look inside it."""

    def __init__(
        self, root: Path, zookeeper: str, size: int = 3, overrides: dict[str, str] | None = None, first_id: int = 0
    ):
        self.root = Path(root)
        self.chroot = f"/strom-{uuid.uuid4().hex[:8]}"
        self.zookeeper = zookeeper
        self.connect = zookeeper + self.chroot
        base = {
            "zookeeper.connect": self.connect,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
            "offsets.topic.replication.factor": str(size),
            "offsets.topic.num.partitions": "3",
            **(overrides or {}),
        }
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id in range(first_id, first_id + size):
            port = zookeeper_server.free_port()
            self.brokers[broker_id] = BrokerProcess(
                self.root / f"broker-{broker_id}",
                {**base, "listeners": f"PLAINTEXT://127.0.0.1:{port}"},
                broker_id=broker_id,
            )
        self.zk = KazooClient(hosts=self.connect, timeout=10)

    # -- processes ---------------------------------------------------------------------------------
    def start(self) -> Cluster:
        root = KazooClient(hosts=self.zookeeper, timeout=10)
        root.start(timeout=30)
        root.ensure_path(self.chroot)
        root.stop()
        root.close()
        self.zk.start(timeout=30)
        errors: list[BaseException] = []

        def start_one(process: BrokerProcess) -> None:
            try:
                process.start()
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=start_one, args=(b,)) for b in self.brokers.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        try:
            if errors:
                raise errors[0]
            self.wait_registered(set(self.brokers))
        except BaseException:  # ``with`` does not call __exit__ when __enter__ raises
            self.close()
            raise
        return self

    def close(self) -> None:
        for process in self.brokers.values():
            if process.process is not None and process.process.poll() is None:
                try:
                    os.kill(process.process.pid, 18)  # SIGCONT, in case a test left it stopped
                except ProcessLookupError:
                    pass
            process.kill()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            pass

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def alive(self, broker_id: int) -> bool:
        process = self.brokers[broker_id].process
        return process is not None and process.poll() is None

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id].start()

    def logs(self) -> str:
        return "\n".join(f"--- broker {i}\n{b.read_log()}" for i, b in self.brokers.items())

    # -- ZooKeeper state ---------------------------------------------------------------------------
    def registered(self) -> set[int]:
        try:
            return (
                {int(c) for c in self.zk.get_children(model.BROKERS_IDS)}
                if self.zk.exists(model.BROKERS_IDS)
                else set()
            )
        except KazooException:  # the test's own session expired (ZooKeeper paused): none seen yet
            return set()

    def wait_registered(self, wanted: set[int], timeout_s: float = 20) -> None:
        wait_until(lambda: self.registered() == wanted, timeout_s, f"registered brokers == {sorted(wanted)}")

    def controller(self) -> int:
        try:
            return json.loads(self.zk.get(model.CONTROLLER)[0])["brokerid"]
        except Exception:
            return -1

    def controller_epoch(self) -> int:
        try:
            return int(self.zk.get(model.CONTROLLER_EPOCH)[0])
        except Exception:
            return 0

    def state(self, topic: str, partition: int) -> PartitionState | None:
        path = model.partition_state_path(topic, partition)
        if not self.zk.exists(path):
            return None
        return PartitionState.from_json(self.zk.get(path)[0])

    def replicas(self, topic: str) -> dict[int, list[int]]:
        data = self.zk.get(model.topic_path(topic))[0]
        return model.TopicAssignment.from_json(topic, data).partitions

    def leader(self, topic: str, partition: int) -> int:
        state = self.state(topic, partition)
        return state.leader if state else -1

    def wait_full_isr(self, topic: str, timeout_s: float = 30) -> None:
        """Every partition led by a live broker with all its replicas in sync, and their logs equal."""
        assignment = self.replicas(topic)

        def settled():
            for partition, replicas in assignment.items():
                state = self.state(topic, partition)
                if state is None or state.leader not in self.registered() or sorted(state.isr) != sorted(replicas):
                    return False
            return True

        wait_until(settled, timeout_s, f"full ISR for every partition of {topic}")

    def wait_logs_equal(self, topic: str, timeout_s: float = 20) -> dict[int, list[tuple[int, int, int]]]:
        """Wait until every replica of every partition holds the same batches; returns them."""
        assignment = self.replicas(topic)

        def equal():
            result = {}
            for partition, replicas in assignment.items():
                logs = {b: self.batches(b, topic, partition) for b in replicas}
                first = logs[replicas[0]]
                if any(other != first for other in logs.values()):
                    return None
                result[partition] = first
            return result

        return wait_until(equal, timeout_s, f"identical replica logs of {topic}", interval_s=0.2)

    # -- files -------------------------------------------------------------------------------------
    def partition_dir(self, broker_id: int, topic: str, partition: int) -> Path:
        return self.brokers[broker_id].data_dir / f"{topic}-{partition}"

    def batches(self, broker_id: int, topic: str, partition: int) -> list[tuple[int, int, int]]:
        """(base offset, last offset, CRC) of every batch in the replica's .log files, in order."""
        directory = self.partition_dir(broker_id, topic, partition)
        if not directory.exists():
            return []
        found = []
        for name in sorted(os.listdir(directory)):
            if not name.endswith(".log"):
                continue
            batches, _ = scan_log(str(directory / name))
            for header, data in batches:
                assert batch_crc(data, 0, header.size) == header.crc, f"corrupt batch in {directory / name}"
                found.append((header.base_offset, header.last_offset, header.crc))
        return found

    def log_end(self, broker_id: int, topic: str, partition: int) -> int:
        batches = self.batches(broker_id, topic, partition)
        return batches[-1][1] + 1 if batches else 0


@pytest.fixture
def paused_zookeeper(tmp_path):
    """A ZooKeeper of the test's own, for a test that stops it with SIGSTOP: (process, port)."""
    process, port = zookeeper_server.start(str(tmp_path / "zookeeper"))
    try:
        yield process, port
    finally:
        os.kill(process.pid, 18)  # SIGCONT, in case the test left it stopped
        zookeeper_server.stop(process)


@pytest.fixture
def cluster_factory(tmp_path, zookeeper):
    """Call with (size=3, overrides=None); every cluster made is torn down after the test."""
    made: list[Cluster] = []

    def make(size: int = 3, overrides: dict[str, str] | None = None, first_id: int = 0) -> Cluster:
        cluster = Cluster(tmp_path / f"cluster-{len(made)}", zookeeper, size, overrides, first_id)
        made.append(cluster)
        return cluster.start()

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture
def cluster(cluster_factory):
    """Three brokers (ids 0, 1, 2) on one ZooKeeper chroot."""
    return cluster_factory()


@pytest.fixture
def iceberg_cluster(cluster_factory, tmp_path):
    """Call with (target_lag_ms=500, registry=False, overrides=None): three brokers translating their
    Iceberg topics into one shared SQL catalog (sqlite and a file warehouse under tmp_path), each
    serving the Schema Registry when ``registry``; returns (the cluster, its CatalogSettings)."""
    from strom.iceberg.table import CatalogSettings

    def make(target_lag_ms: int = 500, registry: bool = False, overrides: dict[str, str] | None = None):
        warehouse = tmp_path / "warehouse"
        catalog = CatalogSettings("sqlite:///" + str(tmp_path / "catalog.db"), "file://" + str(warehouse))
        config = {
            "iceberg.enabled": "true",
            "iceberg.target.lag.ms": str(target_lag_ms),
            "iceberg.catalog.uri": catalog.uri,
            "iceberg.warehouse": str(warehouse),
            **({"schema.registry.listeners": "http://127.0.0.1:0"} if registry else {}),
            **(overrides or {}),
        }
        return cluster_factory(overrides=config), catalog

    return make


def internal_sasl_ssl(certs, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    """Overrides for brokers that replicate over an INTERNAL SASL_SSL listener (``mechanism``) while
    clients may use CLIENT (PLAINTEXT); ``split_listeners`` gives each broker the two."""
    return {
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": mechanism,
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
    }


def split_listeners(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """Each broker's CLIENT listener on its own port and an INTERNAL one on a free port, before it
    starts; broker id -> (CLIENT port, INTERNAL port)."""
    ports = {}
    for broker_id, process in cluster.brokers.items():
        client_port = int(process.overrides["listeners"].rsplit(":", 1)[1])
        ports[broker_id] = (client_port, zookeeper_server.free_port())
        process.overrides["listeners"] = f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{ports[broker_id][1]}"
    return ports


def add_scram_user(cluster: Cluster, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    """Write ``user``'s SCRAM credential into the cluster's chroot before its brokers start, in Kafka's
    /config/users layout (as kafka-configs.sh --zookeeper does)."""
    from strom.security.scram import ScramCredential

    credential = ScramCredential.from_password(mechanism, password)
    root = KazooClient(hosts=cluster.zookeeper, timeout=10)
    root.start(timeout=30)
    try:
        root.create(
            cluster.chroot + model.user_config_path(user),
            json.dumps({"version": 1, "config": {mechanism: credential.to_text()}}).encode(),
            makepath=True,
        )
    finally:
        root.stop()
        root.close()


def create_topic(
    cluster: Cluster, name: str, partitions: int = 3, replication_factor: int = 3, configs: dict[str, str] | None = None
) -> None:
    """Create through a real AdminClient, then wait until every partition has a leader and a full ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication_factor, config=configs or {})], operation_timeout=10, request_timeout=15
    )
    for future in futures.values():
        future.result(timeout=20)
    wait_until(lambda: cluster.zk.exists(model.topic_path(name)), 10, f"topic {name} in ZooKeeper")
    cluster.wait_full_isr(name, 20)
