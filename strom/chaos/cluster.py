"""A 3-broker cluster whose processes and links can be broken on purpose.

Each broker reaches ZooKeeper through its own fault-injecting proxy, so one broker can be cut
off from ZooKeeper (both ways or one way) while clients still reach it: the partition in which
Kafka's ZooKeeper mode keeps a deposed leader answering. Each broker also advertises a proxy in
front of its listener, so every broker-to-broker and client-to-broker connection goes through
one; the proxy names each connection's source (which broker process, or "client"), so a link
can be cut per pair and per direction (``drop``/``partition``/``isolate``). Processes can be
killed (kill -9), paused past their session (SIGSTOP/SIGCONT), restarted cleanly; ZooKeeper
itself can be paused. Each broker's wall clock reads an offset from its own file (strom.clock),
so one broker's clock can be stepped forward or back while it runs.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

from strom.chaos.proxy import TcpProxy, socket_owner
from strom.clock import OFFSET_FILE_ENV, write_offset
from strom.protocol.records import BatchHeader
from strom.testing.cluster import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS
from strom.testing.nodes import ProcessNode, wait_ready

if TYPE_CHECKING:
    import subprocess

START_TIMEOUT_S = 30.0


class ChaosCluster:
    def __init__(self, root: Path, size: int = 3, overrides: dict[str, str] | None = None):
        self.root = Path(root)
        self.size = size
        self.overrides = dict(overrides or {})
        self.nodes: dict[int, ProcessNode] = {}
        self.proxies: dict[int, TcpProxy] = {}  # broker -> ZooKeeper
        self.fronts: dict[int, TcpProxy] = {}  # anyone -> broker: what the broker advertises
        self.paused: set[int] = set()
        self.zookeeper_paused = False
        self.clock_offsets: dict[int, float] = {}  # broker -> seconds its wall clock is off by
        self.zookeeper_address = ""
        self._zookeeper: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(front.address for front in self.fronts.values())

    def start(self) -> ChaosCluster:
        from strom.cluster import zookeeper_server

        (self.root / "zookeeper").mkdir(parents=True, exist_ok=True)
        self._zookeeper, port = zookeeper_server.start(str(self.root / "zookeeper"), timeout_s=START_TIMEOUT_S)
        self.zookeeper_address = f"127.0.0.1:{port}"  # direct, for an observer that no fault should blind
        for broker_id in range(1, self.size + 1):
            proxy = self.proxies[broker_id] = TcpProxy(port)
            front = self.fronts[broker_id] = TcpProxy(0, identify=self._caller)  # its target once it has a port
            self.nodes[broker_id] = ProcessNode(
                broker_id,
                self.root / f"broker-{broker_id}",
                {
                    "zookeeper.connect": proxy.address,
                    "advertised.listeners": f"PLAINTEXT://{front.address}",
                    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                    "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
                    "offsets.topic.replication.factor": str(min(3, self.size)),
                    **self.overrides,
                },
            )
            self.nodes[broker_id].env[OFFSET_FILE_ENV] = str(self._clock_file(broker_id))
            write_offset(str(self._clock_file(broker_id)), 0.0)
        for attempt in (1, 2):
            for node in self.nodes.values():
                node.spawn()
            try:
                wait_ready(list(self.nodes.values()), START_TIMEOUT_S)
                break
            except RuntimeError:
                # on a loaded machine a broker's first ZooKeeper call can outlast its timeout and the
                # broker exits; wait_ready has killed them all: one more try before the run fails
                if attempt == 2:
                    raise
        for broker_id, node in self.nodes.items():
            self.fronts[broker_id].target = ("127.0.0.1", node.port)  # a restarted broker keeps its port
        return self

    def _caller(self, port: int) -> str:
        """Which broker process owns the connection from ``port`` ("broker-<id>"), else "client"."""
        pids = {
            node.process.pid: f"broker-{broker_id}"
            for broker_id, node in self.nodes.items()
            if node.process is not None and node.alive
        }
        return socket_owner(port, pids)

    def stop(self) -> None:
        from strom.cluster import zookeeper_server

        self.heal_all()
        for node in self.nodes.values():
            node.kill()
        for proxy in [*self.proxies.values(), *self.fronts.values()]:
            proxy.close()
        if self._zookeeper is not None:
            zookeeper_server.stop(self._zookeeper)
            self._zookeeper = None

    # -- faults ------------------------------------------------------------------------------------
    def kill(self, broker_id: int) -> None:
        self.resume(broker_id)
        self.nodes[broker_id].kill()

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped or killed broker (waits past an old session's registration, as Kafka)."""
        node = self.nodes[broker_id]
        if not node.alive:
            node.start(START_TIMEOUT_S + SESSION_TIMEOUT_MS / 1000)

    def restart(self, broker_id: int) -> None:
        """A clean restart: SIGTERM (controlled shutdown), then start."""
        self.resume(broker_id)
        self.nodes[broker_id].stop()
        self.start_broker(broker_id)

    def pause(self, broker_id: int) -> None:
        node = self.nodes[broker_id]
        if node.process is not None and node.alive and broker_id not in self.paused:
            os.kill(node.process.pid, signal.SIGSTOP)
            self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        node = self.nodes[broker_id]
        if broker_id in self.paused:
            self.paused.discard(broker_id)
            if node.process is not None and node.alive:
                os.kill(node.process.pid, signal.SIGCONT)

    def pause_zookeeper(self) -> None:
        if self._zookeeper is not None and not self.zookeeper_paused:
            os.kill(self._zookeeper.pid, signal.SIGSTOP)
            self.zookeeper_paused = True

    def resume_zookeeper(self) -> None:
        if self._zookeeper is not None and self.zookeeper_paused:
            os.kill(self._zookeeper.pid, signal.SIGCONT)
            self.zookeeper_paused = False

    def _clock_file(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.clock"

    def jump_clock(self, broker_id: int, seconds: float) -> None:
        """Step one broker's wall clock by ``seconds`` (either way); it reads the file within 50 ms."""
        offset = self.clock_offsets.get(broker_id, 0.0) + seconds
        self.clock_offsets[broker_id] = offset
        write_offset(str(self._clock_file(broker_id)), offset)

    def cut_from_zookeeper(self, broker_id: int, direction: str = "both") -> None:
        self.proxies[broker_id].blackhole(direction)

    def drop(self, source: int | str, target: int | str) -> None:
        """Drop every byte flowing from ``source`` to ``target`` (each a broker id, "client" or "zookeeper").

        The other direction still flows: requests arrive and their answers vanish, or the reverse.
        """
        if source == target:
            raise ValueError("a node cannot be cut off from itself")
        if isinstance(source, int) and target == "zookeeper":
            self.proxies[source].blackhole("to_target")
        elif source == "zookeeper" and isinstance(target, int):
            self.proxies[target].blackhole("from_target")
        elif isinstance(target, int) and source != "zookeeper":
            # the connections source opened to target carry source's bytes to_target ...
            self.fronts[target].blackhole("to_target", _name(source))
            if isinstance(source, int):  # ... and those target opened to source carry them back from_target
                self.fronts[source].blackhole("from_target", _name(target))
        elif isinstance(source, int) and target == "client":
            self.fronts[source].blackhole("from_target", "client")
        else:
            raise ValueError(f"no link from {source!r} to {target!r}")

    def partition(self, a: int | str, b: int | str) -> None:
        """Cut the link between ``a`` and ``b`` both ways."""
        self.drop(a, b)
        self.drop(b, a)

    def isolate(self, broker_id: int) -> None:
        """Cut a broker off from every other broker (ZooKeeper and clients still reach it)."""
        for other in self.nodes:
            if other != broker_id:
                self.partition(broker_id, other)

    def heal_all(self) -> None:
        """End every fault: links healed, processes resumed, dead brokers started again."""
        self.resume_zookeeper()
        for proxy in [*self.proxies.values(), *self.fronts.values()]:
            if proxy.cut:
                proxy.heal()
        for broker_id in list(self.paused):
            self.resume(broker_id)
        for broker_id, offset in list(self.clock_offsets.items()):  # as NTP would: a step back to the right time
            if offset:
                self.jump_clock(broker_id, -offset)

    def start_all(self) -> None:
        for broker_id, node in self.nodes.items():
            if not node.alive:
                self.start_broker(broker_id)

    # -- what the replicas hold --------------------------------------------------------------------
    def partition_batches(self, broker_id: int, topic: str, partition: int) -> list[tuple[int, int, int]]:
        """(base offset, last offset, crc) of every batch of one replica, read from its files."""
        from strom.cli.dump_log import scan_log

        directory = self.nodes[broker_id].data_dir / f"{topic}-{partition}"
        batches: list[tuple[int, int, int]] = []
        for path in sorted(directory.glob("*.log")):
            found, _ = scan_log(str(path))
            batches.extend((h.base_offset, h.last_offset, h.crc) for h, _ in found if isinstance(h, BatchHeader))
        return batches

    def replicas_identical(self, topic: str, partitions: int, timeout_s: float) -> list[str]:
        """Wait (bounded) until every replica of every partition holds the same batches; the differences left."""
        deadline = time.monotonic() + timeout_s
        while True:
            differences = []
            for p in range(partitions):
                held = {b: self.partition_batches(b, topic, p) for b in self.nodes}
                distinct = {tuple(v) for v in held.values()}
                if len(distinct) > 1:
                    ends = {b: (v[-1][1] if v else -1) for b, v in held.items()}
                    differences.append(f"{topic}-{p}: replicas differ (last offsets {ends})")
            if not differences or time.monotonic() >= deadline:
                return differences
            time.sleep(0.5)


def _name(node: int | str) -> str:
    """A node as the proxies name connection sources."""
    return f"broker-{node}" if isinstance(node, int) else node
