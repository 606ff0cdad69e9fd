"""A broker cut off from ZooKeeper or its peers but not from its clients: how long writes stop.

Issue 33's scenario, run on real network namespaces (strom.chaos.netns): ZooKeeper and three
brokers each in its own namespace, one partition with three replicas and min.insync.replicas=2,
led by the broker that is cut off (the *victim*), and an idempotent acks=all confluent-kafka
producer in the root namespace with librdkafka's default settings that bootstraps from the victim
alone and writes only to its partition. That producer has no connection to any other broker
when the cut begins: the client a fenced broker can strand, since librdkafka asks for metadata
only on connections it has (sparse connections) and prefers the busiest one.

The shapes (``SHAPES``):

- ``zookeeper-and-followers``: the leader cut from ZooKeeper and from the other brokers (the issue's);
- ``zookeeper``: the leader cut from ZooKeeper only;
- ``one-way-to-zookeeper``: only the leader's packets to ZooKeeper vanish;
- ``followers``: the leader cut from the other brokers only. It keeps its ZooKeeper session, so it
  stays the leader, drops the followers from the ISR and, below min.insync.replicas, refuses
  acks=all writes (NOT_ENOUGH_REPLICAS) until the cut heals: as Kafka does, and as it must, since
  nobody else may lead while it holds its session. Writes resume once the followers are back;
- ``controller``: the controller, which here also leads the partition, cut from ZooKeeper and
  from the other brokers.

``run`` returns what a user would notice: the longest time without an acknowledgement during the
cut, how soon writes resumed after it healed, and every acknowledged record read back (lost,
duplicated). It asserts nothing; tests/cluster/test_fenced_leader_netns.py and
``python -m strom.bench.fenced_leader`` decide what to make of it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from strom.chaos.netns import BROKER_PORT, NetnsCluster
from strom.chaos.workload import read_everything

TOPIC = "fenced-leader"
SHAPES = ("zookeeper-and-followers", "zookeeper", "one-way-to-zookeeper", "followers", "controller")
INTERVAL_S = 0.004  # about 250 writes a second
SETTLE_S = 30.0  # bound on each wait for the cluster or the client


@dataclass
class Outcome:
    shape: str
    victim: int
    cut_s: float
    longest_silence_s: float  # the longest time without an acknowledgement during the cut
    acked_during_cut: int
    resumed_after_heal_s: float | None  # the first acknowledgement after the heal; None: none came
    leader_during_cut: int  # as the other brokers saw it at the end of the cut
    victim_fenced: bool  # the victim's log says it fenced itself
    acked: int = 0
    failed: int = 0  # delivery reports with an error (their records may or may not be there)
    lost: list[str] = field(default_factory=list)  # acknowledged, not found at the acknowledged offset
    duplicated: list[str] = field(default_factory=list)

    def summary(self) -> str:
        resumed = "never" if self.resumed_after_heal_s is None else f"{self.resumed_after_heal_s:.1f} s"
        return (
            f"{self.shape}: broker {self.victim} cut for {self.cut_s:.0f} s; writes stopped for at most "
            f"{self.longest_silence_s:.1f} s ({self.acked_during_cut} acknowledged during the cut, leader then "
            f"{self.leader_during_cut}); after the heal the first ack came in {resumed}; {self.acked} acknowledged, "
            f"{len(self.lost)} lost, {len(self.duplicated)} duplicated, {self.failed} failed"
        )


class TimedProducer:
    """One idempotent acks=all producer writing ``<sequence>`` to partition 0, timing every ack."""

    def __init__(self, bootstrap: str, client: dict[str, str]):
        from confluent_kafka import Producer

        # librdkafka's defaults but for the idempotence and acks the scenario is about
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "logger": _quiet(), **client}
        )
        self.lock = threading.Lock()
        self.acks: list[tuple[float, int, str]] = []  # (monotonic time, offset, value)
        self.failed: list[tuple[str, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fenced-leader-producer", daemon=True)

    def start(self) -> TimedProducer:
        self._thread.start()
        return self

    def _report(self, err, msg) -> None:  # noqa: ANN001 (librdkafka's callback)
        value = msg.value().decode()
        with self.lock:
            if err is None:
                self.acks.append((time.monotonic(), msg.offset(), value))
            else:
                self.failed.append((value, err.name()))

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(TOPIC, str(sequence).encode(), partition=0, on_delivery=self._report)
                sequence += 1
            except BufferError:
                pass
            self.producer.poll(0)
            time.sleep(INTERVAL_S)

    def ack_times(self, since: float, until: float = float("inf")) -> list[float]:
        with self.lock:
            return [t for t, _, _ in self.acks if since <= t <= until]

    def wait_acks(self, count: int, since: float, timeout_s: float) -> float | None:
        """Seconds from ``since`` to the ``count``-th acknowledgement after it; None if not by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            times = self.ack_times(since)
            if len(times) >= count:
                return times[count - 1] - since
            time.sleep(0.02)
        return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(SETTLE_S)


def _quiet():  # noqa: ANN202
    import logging

    logger = logging.getLogger("strom.chaos.fenced_leader.librdkafka")
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    return logger


def _admin(bootstrap: str, client: dict[str, str]):  # noqa: ANN202
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "logger": _quiet(), **client})


def _partition_seen_by(cluster: NetnsCluster, broker_id: int, client: dict[str, str]) -> tuple[int, int]:
    """(leader, ISR size) of the partition in ``broker_id``'s Metadata; (-1, 0) if it cannot say."""
    try:
        admin = _admin(f"{cluster.address(broker_id)}:{BROKER_PORT}", client)
        partition = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0]
    except Exception:  # a broker still reloading, a topic not yet known
        return -1, 0
    return partition.leader, len(partition.isrs)


def _wait(condition, what: str, timeout_s: float = SETTLE_S) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def _cut(cluster: NetnsCluster, shape: str, victim: int) -> None:
    if shape in ("zookeeper-and-followers", "controller"):
        cluster.cut_from_zookeeper(victim)
        cluster.isolate(victim)
    elif shape == "zookeeper":
        cluster.cut_from_zookeeper(victim)
    elif shape == "one-way-to-zookeeper":
        cluster.cut_from_zookeeper(victim, "to_target")
    elif shape == "followers":
        cluster.isolate(victim)
    else:
        raise ValueError(f"unknown shape {shape!r} (shapes: {', '.join(SHAPES)})")


def longest_silence(times: list[float], since: float, until: float) -> float:
    edges = [since, *times, until]
    return max(b - a for a, b in zip(edges, edges[1:], strict=False))


def run(
    root: Path,
    shape: str,
    cut_s: float = 15.0,
    listener: str = "PLAINTEXT",
    broker_overrides: dict[str, str] | None = None,
    client: dict[str, str] | None = None,
) -> Outcome:
    """Start the cluster, cut ``shape`` for ``cut_s`` seconds under the producer, heal, read back.

    ``listener`` is the brokers' one listener (clients and brokers use it alike), with what it
    needs in ``broker_overrides`` and what every client needs in ``client`` (SASL_SSL's, say)."""
    from confluent_kafka.admin import NewTopic

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r} (shapes: {', '.join(SHAPES)})")
    client = dict(client or {})
    overrides = {"min.insync.replicas": "2", **(broker_overrides or {})}
    cluster = NetnsCluster(root, overrides=overrides, listener=listener).start()
    producer: TimedProducer | None = None
    try:
        admin = _admin(cluster.bootstrap, client)
        controller = admin.list_topics(timeout=10).controller_id
        victim = controller if shape == "controller" else min(b for b in cluster.nodes if b != controller)
        others = [b for b in cluster.nodes if b != victim]
        # the victim leads the partition: the first replica of the assignment is its preferred leader
        topic = NewTopic(
            TOPIC, num_partitions=1, replica_assignment=[[victim, *others]], config={"min.insync.replicas": "2"}
        )
        admin.create_topics([topic])[TOPIC].result(SETTLE_S)
        _wait(lambda: _partition_seen_by(cluster, victim, client) == (victim, 3), f"broker {victim} leading {TOPIC}-0")
        producer = TimedProducer(f"{cluster.address(victim)}:{BROKER_PORT}", client).start()
        if producer.wait_acks(50, time.monotonic(), SETTLE_S) is None:
            raise RuntimeError(f"the producer got no acknowledgements before the cut: {producer.failed[:3]}")

        _cut(cluster, shape, victim)
        cut_at = time.monotonic()
        time.sleep(cut_s)
        healed_at = time.monotonic()
        leader_during = _partition_seen_by(cluster, others[0], client)[0]
        cluster.heal_all()
        during = producer.ack_times(cut_at, healed_at)
        resumed = producer.wait_acks(1, healed_at, SETTLE_S)

        _wait(
            lambda: all(_partition_seen_by(cluster, b, client)[1] == 3 for b in cluster.nodes), "a full ISR again", 60
        )
        producer.stop()
        outcome = Outcome(
            shape,
            victim,
            cut_s,
            longest_silence(during, cut_at, healed_at),
            len(during),
            resumed,
            leader_during,
            "fenced:" in cluster.log_tail(victim, 1_000_000),
        )
        _check(cluster, producer, outcome, client)
        return outcome
    finally:
        if producer is not None:
            producer._stop.set()
        cluster.stop()


def _check(cluster: NetnsCluster, producer: TimedProducer, outcome: Outcome, client: dict[str, str]) -> None:
    read = read_everything(cluster.bootstrap, TOPIC, 1, 60, extra=client)[0]
    at = dict(read)
    values = [v for _, v in read]
    with producer.lock:
        acks, failed = list(producer.acks), list(producer.failed)
    outcome.acked, outcome.failed = len(acks), len(failed)
    outcome.lost = [f"{value}@{offset}" for _, offset, value in acks if at.get(offset) != value]
    seen: set[str] = set()
    for value in values:
        if value in seen:
            outcome.duplicated.append(value)
        seen.add(value)
