"""Three strom brokers and a real ZooKeeper for a test: ``with strom.testing.Cluster() as cluster:``.

ZooKeeper comes from Debian's package (``apt-get install zookeeper``), started the way
``strom cluster`` starts it (``strom.cluster.zookeeper_server``). Brokers are child processes
(ids 1, 2, 3, as ``strom cluster start`` numbers them), so ``kill`` is a real kill -9: the
controller notices when the broker's ZooKeeper session expires (``zookeeper.session.timeout.ms``,
6 s here), and a killed broker restarted before that waits for the old session to go, as Kafka's
does (KAFKA-7165).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from strom.testing.client import KafkaHelpers
from strom.testing.nodes import START_TIMEOUT_S, STOP_TIMEOUT_S, ProcessNode, wait_ready

if TYPE_CHECKING:
    import subprocess

SESSION_TIMEOUT_MS = 6000
LAG_TIME_MAX_MS = 3000


def cluster_overrides(size: int, zookeeper: str) -> dict[str, str]:
    """Failures noticed in seconds rather than in Kafka's production timeouts."""
    return {
        "zookeeper.connect": zookeeper,
        "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
        "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
        "offsets.topic.replication.factor": str(min(3, size)),
    }


class Cluster(KafkaHelpers):
    """``size`` brokers sharing one ZooKeeper, data under ``data_dir`` (temporary when not given).

    ``overrides`` apply to every broker. ``ready_s`` is how long the start took, from the call
    to every broker serving and a client seeing all of them.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        overrides: dict[str, str] | None = None,
        *,
        size: int = 3,
        first_id: int = 1,
    ):
        if size < 1:
            raise ValueError(f"a cluster has at least one broker, not {size}")
        self._owns_dir = data_dir is None
        self.dir = Path(tempfile.mkdtemp(prefix="strom-cluster-") if data_dir is None else data_dir)
        self.size = size
        self.first_id = first_id
        self.overrides = dict(overrides or {})
        self.nodes: dict[int, ProcessNode] = {}
        self.zookeeper = ""
        self._zookeeper_process: subprocess.Popen | None = None
        self.ready_s = 0.0

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes.values())

    @property
    def broker_ids(self) -> list[int]:
        return list(self.nodes)

    def log_path(self, broker_id: int) -> Path:
        return self._node(broker_id).log_path

    def start(self, timeout: float = START_TIMEOUT_S) -> Cluster:
        from strom.cluster import zookeeper_server

        began = time.perf_counter()
        zk_dir = self.dir / "zookeeper"
        zk_dir.mkdir(parents=True, exist_ok=True)
        self._zookeeper_process, port = zookeeper_server.start(str(zk_dir), timeout_s=timeout)
        self.zookeeper = f"127.0.0.1:{port}"
        shared = {**cluster_overrides(self.size, self.zookeeper), **self.overrides}
        for broker_id in range(self.first_id, self.first_id + self.size):
            self.nodes[broker_id] = ProcessNode(broker_id, self.dir / f"broker-{broker_id}", shared)
        for node in self.nodes.values():
            node.spawn()
        wait_ready(list(self.nodes.values()), timeout)
        self._wait_all_brokers_seen(timeout)
        self.ready_s = time.perf_counter() - began
        return self

    def _wait_all_brokers_seen(self, timeout: float) -> None:
        """Every broker registers before it serves; wait until a client's metadata lists them all."""
        deadline = time.monotonic() + timeout
        wanted = set(self.nodes)
        seen: set[int] = set()
        while True:
            try:
                meta = self.admin.list_topics(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                seen = set(meta.brokers)
                if seen == wanted and meta.controller_id in wanted:
                    return
            except Exception:  # KafkaException: retried until the deadline
                pass
            if time.monotonic() >= deadline:
                raise RuntimeError(f"brokers {sorted(wanted - seen)} not in the cluster metadata within {timeout}s")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop every broker (all at once, each with its controlled shutdown), then ZooKeeper."""
        self._close_clients()
        for node in self.nodes.values():
            if node.process is not None and node.alive:
                node.process.terminate()
        for node in self.nodes.values():
            node.stop(STOP_TIMEOUT_S)  # waits; SIGKILL past the timeout
        if self._zookeeper_process is not None:
            from strom.cluster import zookeeper_server

            zookeeper_server.stop(self._zookeeper_process)
            self._zookeeper_process = None
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _node(self, broker_id: int) -> ProcessNode:
        try:
            return self.nodes[broker_id]
        except KeyError:
            raise ValueError(f"no broker {broker_id}: the brokers are {self.broker_ids}") from None

    def kill(self, broker_id: int) -> None:
        """kill -9 one broker; its data stays for ``restart``."""
        self._node(broker_id).kill()

    def restart(self, broker_id: int, timeout: float = START_TIMEOUT_S) -> None:
        """Start a broker again on its port and data (stopped cleanly first if it runs).

        After a kill this takes up to the ZooKeeper session timeout: the dead broker's
        registration has to expire first. Use ``wait_for_isr(topic)`` before the next kill.
        """
        node = self._node(broker_id)
        node.stop()
        node.start(timeout + SESSION_TIMEOUT_MS / 1000)

    def alive(self, broker_id: int) -> bool:
        return self._node(broker_id).alive

    def __repr__(self) -> str:
        return f"<strom.testing.Cluster {self.broker_ids} {self.bootstrap_servers} zookeeper {self.zookeeper}>"
