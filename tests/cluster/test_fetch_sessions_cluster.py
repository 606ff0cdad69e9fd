"""Followers replicate through incremental fetch sessions (KIP-227): on a real three-broker
cluster with an acks=all idempotent producer running, every replica ends byte-identical and
every acknowledged message is read back, across a leader change."""

from __future__ import annotations

import re

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
