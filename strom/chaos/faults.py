"""The campaign's network and overlapping faults, aimed at the roles that make them matter.

A partition is only interesting against the right broker: the Jepsen case cuts the *leader* off
from ZooKeeper while clients still reach it; a follower is cut off from its *leader* but not
from ZooKeeper. So these faults look up the current leader and followers of partition 0 in
ZooKeeper when they are injected (the fault's ``broker`` number only picks among followers),
and an ``Observer`` records what strom did while each fault was held: partition states (leader,
ISR, epoch) as ZooKeeper holds them, acknowledged writes per partition during the fault, and the
brokers' own log lines about fencing, ISR changes, elections and truncation.

``unclean-election`` is a staged scenario rather than a single cut: the leader's followers are
cut off from it until the ISR is the leader alone, the leader goes on acknowledging writes
(the run uses min.insync.replicas=1 for it), then the leader is killed while the stale
followers can still reach ZooKeeper. With unclean.leader.election.enable a stale follower takes
over and the writes acknowledged in between are lost (Kafka documents this); without it the
partition has no leader until the old leader returns, and nothing may be lost.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.chaos.workload import _quiet_logger
from strom.cluster.model import PartitionState, partition_state_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from strom.chaos.cluster import ChaosCluster
    from strom.chaos.workload import History

NETWORK_FAULTS = (
    "leader-zookeeper-cut",
    "follower-leader-cut",
    "broker-isolated",
    "broker-one-way",
    "client-leader-cut",
)
OVERLAPPING_FAULTS = ("kill+partition", "pause+partition")
UNCLEAN_FAULT = "unclean-election"
ISR_SHRINK_TIMEOUT_S = 15.0
ALL_PARTITIONS = -1  # the key of a count that is not per partition

_NOTABLE = re.compile(r"fenced|unfenced|UNCLEAN|offline until|ISR .* -> |electing \d+|truncating|leader at epoch")


@dataclass
class Observation:
    kind: str
    target: str
    before: dict[int, PartitionState | None]
    during: dict[int, PartitionState | None]
    acked_during: dict[int, int]
    events: list[str] = field(default_factory=list)

    def describe(self) -> str:
        def states(view: dict[int, PartitionState | None]) -> str:
            return " ".join(
                f"p{p}:" + (f"L{s.leader}/isr{s.isr}/e{s.leader_epoch}" if s else "?") for p, s in sorted(view.items())
            )

        acks = " ".join(
            f"{'all' if p == ALL_PARTITIONS else f'p{p}'}:{n}" for p, n in sorted(self.acked_during.items())
        )
        return f"{self.target}; before {states(self.before)}; during {states(self.during)}; acked during {acks}"


class Observer:
    """Reads partition states from ZooKeeper (bounded: ZooKeeper may be the thing paused) and broker logs."""

    def __init__(self, cluster: ChaosCluster, topic: str, partitions: int):
        from kazoo.client import KazooClient

        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        # its connection drops when the machine is loaded; what it reads says so (None), not its log
        self.zk = KazooClient(
            hosts=cluster.zookeeper_address,
            timeout=5,
            connection_retry={"max_tries": -1},
            logger=_quiet_logger("strom.chaos.observer"),
        )
        self.zk.start(timeout=10)
        self._log_offsets: dict[int, int] = {}

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    def state(self, partition: int) -> PartitionState | None:
        from kazoo.exceptions import KazooException

        try:
            data, _ = self.zk.get_async(partition_state_path(self.topic, partition)).get(timeout=2)
            return PartitionState.from_json(data)
        except (KazooException, self.zk.handler.timeout_exception):  # ZooKeeper paused or unreachable: unknown
            return None

    def states(self) -> dict[int, PartitionState | None]:
        return {p: self.state(p) for p in range(self.partitions)}

    def wait_for(
        self, partition: int, condition: Callable[[PartitionState], bool], timeout_s: float
    ) -> PartitionState | None:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.state(partition)
            if state is not None and condition(state):
                return state
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)

    def mark_logs(self) -> None:
        for broker_id, node in self.cluster.nodes.items():
            try:
                self._log_offsets[broker_id] = node.log_path.stat().st_size
            except FileNotFoundError:
                self._log_offsets[broker_id] = 0

    def log_events(self) -> list[str]:
        """The notable lines the brokers logged since ``mark_logs`` (their message part only)."""
        events = []
        for broker_id, node in self.cluster.nodes.items():
            try:
                with open(node.log_path, "rb") as log:
                    log.seek(self._log_offsets.get(broker_id, 0))
                    text = log.read().decode(errors="replace")
            except FileNotFoundError:
                continue
            for line in text.splitlines():
                if _NOTABLE.search(line) and (self.topic in line or "fenced" in line):
                    events.append(f"b{broker_id}: {line.split(' - ', 1)[-1].strip()[:160]}")
        return events


def acked_per_partition(history: History, partitions: int) -> dict[int, int]:
    while True:  # the producers' callbacks add to it without a lock
        try:
            acked = list(history.acked.values())
            break
        except RuntimeError:  # changed size while copied
            continue
    counts = dict.fromkeys(range(partitions), 0)
    for partition, _offset in acked:
        counts[partition] = counts.get(partition, 0) + 1
    return counts


def roles(observer: Observer, pick: int) -> tuple[int, list[int]]:
    """The leader of partition 0 and its followers, the ``pick``-th follower first."""
    cluster = observer.cluster
    state = observer.wait_for(0, lambda s: s.leader > 0, 10)
    leader = state.leader if state is not None else 1
    followers = [b for b in sorted(cluster.nodes) if b != leader]
    k = pick % len(followers)
    return leader, followers[k:] + followers[:k]


def inject(cluster: ChaosCluster, observer: Observer, kind: str, pick: int, log: Callable[[str], None]) -> str:
    """Inject one network or overlapping fault; what it targeted."""
    leader, followers = roles(observer, pick)
    if kind == "leader-zookeeper-cut":
        cluster.partition(leader, "zookeeper")
        return f"leader {leader} cut off from ZooKeeper (clients and brokers still reach it)"
    if kind == "follower-leader-cut":
        cluster.partition(followers[0], leader)
        return f"follower {followers[0]} cut off from leader {leader} (both still reach ZooKeeper)"
    if kind == "broker-isolated":
        target = leader if pick % 2 else followers[0]
        cluster.isolate(target)
        return f"{'leader' if target == leader else 'follower'} {target} cut off from every other broker"
    if kind == "broker-one-way":
        if pick % 2:
            cluster.drop(leader, followers[0])
            return f"bytes from leader {leader} to follower {followers[0]} dropped (the other way flows)"
        cluster.drop(followers[0], leader)
        return f"bytes from follower {followers[0]} to leader {leader} dropped (the other way flows)"
    if kind == "client-leader-cut":
        cluster.partition("client", leader)
        return f"clients cut off from leader {leader}"
    if kind == "kill+partition":
        cluster.kill(leader)
        cluster.isolate(followers[0])
        return f"leader {leader} killed and follower {followers[0]} cut off from the other brokers"
    if kind == "pause+partition":
        cluster.pause(followers[0])
        cluster.partition(leader, "zookeeper")
        return f"follower {followers[0]} paused and leader {leader} cut off from ZooKeeper"
    if kind == UNCLEAN_FAULT:
        return _unclean_scenario(cluster, observer, leader, followers, log)
    raise ValueError(f"unknown fault {kind!r}")


def _unclean_scenario(
    cluster: ChaosCluster, observer: Observer, leader: int, followers: list[int], log: Callable[[str], None]
) -> str:
    for follower in followers:
        cluster.partition(leader, follower)
    shrunk = observer.wait_for(0, lambda s: s.isr == [leader], ISR_SHRINK_TIMEOUT_S)
    if shrunk is None:
        log(f"    ISR of partition 0 did not shrink to [{leader}] within {ISR_SHRINK_TIMEOUT_S}s: {observer.state(0)}")
        return f"followers {followers} cut off from leader {leader}; the ISR did not shrink, leader not killed"
    log(f"    ISR of partition 0 is [{leader}] (epoch {shrunk.leader_epoch}); leader takes writes alone for 3 s")
    time.sleep(3)
    cluster.kill(leader)
    for follower in followers:  # the dead leader's links no longer matter; the followers see each other
        cluster.fronts[follower].heal()
    after = observer.wait_for(0, lambda s: s.leader != leader, 15) or observer.state(0)
    log(f"    leader {leader} killed; partition 0 now {after}")
    return (
        f"followers {followers} cut off from leader {leader} until the ISR was [{leader}], then leader {leader} killed"
    )
