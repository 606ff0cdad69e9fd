"""Followers replicate through incremental fetch sessions (KIP-227): on a real three-broker
cluster with an acks=all idempotent producer running, every replica ends byte-identical and
every acknowledged message is read back, across a leader change."""

from __future__ import annotations

import re
import time

from tests.cluster.conftest import SESSION_TIMEOUT_MS, create_topic, wait_until
from tests.cluster.workload import Workload, verify

TOPIC = "sessions"
PARTITIONS = 6
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10
SESSION_LINE = re.compile(r"fetcher (\d+)->(\d+): incremental fetch session \d+")


def _leaders(cluster) -> dict[int, int]:
    return {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}


def _opened(cluster) -> list[tuple[int, int]]:
    """(follower, leader) of every session a fetcher has opened, from the brokers' logs."""
    found = []
    for broker in cluster.brokers.values():
        text = broker.log_path.read_text(errors="replace") if broker.log_path.exists() else ""
        found += [(int(a), int(b)) for a, b in SESSION_LINE.findall(text)]
    return found


def _sessions(cluster) -> set[tuple[int, int]]:
    return set(_opened(cluster))


def test_incremental_follower_sessions_keep_replicas_identical_across_a_leader_change(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        workload.wait_progress(range(PARTITIONS), 20, 30)
        leaders = set(_leaders(cluster).values())
        # every follower fetches from every leader through a session
        wanted = {(f, leader) for leader in leaders for f in cluster.brokers if f != leader}
        wait_until(lambda: wanted <= _sessions(cluster), 20, f"fetch sessions {sorted(wanted)}")

        victim = cluster.leader(TOPIC, 0)
        led = [p for p, leader in _leaders(cluster).items() if leader == victim]
        before = sum(1 for f, _ in _opened(cluster) if f == victim)
        cluster.kill(victim)
        wait_until(
            lambda: all(cluster.leader(TOPIC, p) not in (victim, -1) for p in led), FAILOVER_S, f"new leaders for {led}"
        )
        workload.wait_progress(led, 10, 30)  # acks=all on the survivors, replicated through sessions
        cluster.restart(victim)
        cluster.wait_full_isr(TOPIC, 30)
        workload.wait_progress(range(PARTITIONS), 10, 30)
        # the restarted broker follows through a session too
        wait_until(
            lambda: sum(1 for f, _ in _opened(cluster) if f == victim) > before, 20, f"a new session of broker {victim}"
        )

        workload.stop()
        cluster.wait_full_isr(TOPIC, 30)
        logs = verify(cluster.bootstrap, workload)
        batches = cluster.wait_logs_equal(TOPIC, 30)
        for partition, log in logs.items():
            assert batches[partition], f"partition {partition} is empty"
            assert batches[partition][-1][1] + 1 >= (log[-1][0] + 1 if log else 0)
        assert workload.acked_count() > 0
    except BaseException:
        print(cluster.logs())
        raise


def test_partitions_an_incremental_session_leaves_out_stay_in_sync(cluster):
    """A follower's incremental fetches name only partitions that moved, and the leader skips the
    idle ones; they must still count as fetched, as Kafka counts every session partition: while
    one partition is busy and after all go quiet, for several replica.lag.time.max.ms, no ISR
    shrinks, and acks=all with min.insync.replicas=3 then succeeds on every idle partition."""
    from confluent_kafka import Producer

    from tests.cluster.conftest import LAG_TIME_MAX_MS

    topic, partitions = "idle", 8
    create_topic(cluster, topic, partitions, 3, {"min.insync.replicas": "3"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    failed: list = []

    def report(err, msg):
        if err is not None:
            failed.append(err)

    shrunk: list = []

    def check_isr() -> None:
        for partition in range(partitions):
            state = cluster.state(topic, partition)
            if state is None or len(state.isr) != 3:
                shrunk.append((partition, state))

    try:
        busy_until = time.monotonic() + 3 * LAG_TIME_MAX_MS / 1000
        while time.monotonic() < busy_until:  # partition 0 busy, the others idle in the sessions
            for _ in range(20):
                producer.produce(topic, b"busy", partition=0, on_delivery=report)
            producer.poll(0.05)
            check_isr()
        assert producer.flush(30) == 0 and not failed, failed
        quiet_until = time.monotonic() + 2 * LAG_TIME_MAX_MS / 1000
        while time.monotonic() < quiet_until:  # everything idle: only long polls
            time.sleep(0.2)
            check_isr()
        assert not shrunk, f"ISR shrank: {shrunk[:3]}"
        for partition in range(partitions):
            producer.produce(topic, b"after", partition=partition, on_delivery=report)
        assert producer.flush(30) == 0 and not failed, failed  # NOT_ENOUGH_REPLICAS if one fell out
    except BaseException:
        print(cluster.logs())
        raise
