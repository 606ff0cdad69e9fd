"""Fault injection on a real three-broker cluster with a real ZooKeeper and a real client.

Every test runs an idempotent acks=all producer (confluent-kafka) against a topic with
replication factor 3 and min.insync.replicas=2 while brokers are killed, paused or cut off
from ZooKeeper, and ends with the same checks: every acknowledged message is read back once, at
its acknowledged offset, in order; every replica holds the same batches (base offsets and
CRCs, read from the .log files); the ISR is complete again.
"""

from __future__ import annotations

import os
import signal
import time

from confluent_kafka import KafkaError, Producer

from strom.cli.client_props import watermark_offsets
from tests.cluster.conftest import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS, create_topic, wait_until
from tests.cluster.workload import Workload, verify

TOPIC = "faults"
PARTITIONS = 3
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10  # detection takes the session timeout, election is quick


def leaders(cluster) -> dict[int, int]:
    return {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}


def wait_new_leaders(cluster, partitions, gone: set[int]) -> dict[int, int]:
    """Wait until none of ``partitions`` is led by a broker in ``gone``; returns the new leaders."""

    def moved():
        now = leaders(cluster)
        registered = cluster.registered()
        ok = all(now[p] not in gone and now[p] in registered for p in partitions)
        return now if ok else None

    return wait_until(moved, FAILOVER_S, f"new leaders for {sorted(partitions)} away from {sorted(gone)}")


def finish(cluster, workload: Workload) -> dict[int, list[tuple[int, str]]]:
    """The common ending: all acknowledged data is there, once, and every replica agrees."""
    workload.stop()
    cluster.wait_full_isr(TOPIC, 30)
    logs = verify(cluster.bootstrap, workload)
    batches = cluster.wait_logs_equal(TOPIC, 30)
    for partition, log in logs.items():
        assert batches[partition], f"partition {partition} is empty"
        assert batches[partition][-1][1] + 1 >= (log[-1][0] + 1 if log else 0)
    assert workload.acked_count() > 0
    return logs


def test_kill_leader_five_times(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, TOPIC_CONFIGS)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        workload.wait_progress(range(PARTITIONS), 20, 20)
        for round_ in range(5):
            victim = cluster.leader(TOPIC, round_ % PARTITIONS)
            led = [p for p, leader in leaders(cluster).items() if leader == victim]
            cluster.kill(victim)
            if round_ % 2:
                # restarted at once, as a supervisor would: it waits for ZooKeeper to expire its
                # predecessor's registration, then rejoins
                cluster.restart(victim)
            else:
                wait_new_leaders(cluster, led, {victim})
                workload.wait_progress(led, 10, 20)  # acks=all works on the two survivors (min ISR 2)
                cluster.restart(victim)
            cluster.wait_full_isr(TOPIC, 30)
            workload.wait_progress(range(PARTITIONS), 5, 20)
        finish(cluster, workload)
    except BaseException:
        print(cluster.logs())
        raise


def test_paused_follower_leaves_and_rejoins_the_isr(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, TOPIC_CONFIGS)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        workload.wait_progress(range(PARTITIONS), 20, 20)
        controller = cluster.controller()
        # pause a broker that is not the controller, and look at a partition it follows
        victim = next(b for b in cluster.brokers if b != controller)
        partition = next(p for p, leader in leaders(cluster).items() if leader != victim)
        leader = cluster.leader(TOPIC, partition)
        other = next(b for b in cluster.replicas(TOPIC)[partition] if b not in (victim, leader))
        process = cluster.brokers[victim].process
        os.kill(process.pid, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            # the leader drops it after replica.lag.time.max.ms, well before the ZooKeeper session ends
            wait_until(
                lambda: victim not in cluster.state(TOPIC, partition).isr,
                (LAG_TIME_MAX_MS * 3) / 1000,
                f"broker {victim} leaving the ISR of {TOPIC}-{partition}",
            )
            assert time.monotonic() - stopped_at < SESSION_TIMEOUT_MS / 1000
            assert victim in cluster.registered()
            # acks=all keeps working with two in sync, and the HW never passes what the other
            # in-sync follower holds: every committed offset is on min.insync.replicas replicas
            for _ in range(5):
                workload.wait_progress([partition], 5, 10)
                high = workload_high_watermark(cluster, partition)
                assert cluster.log_end(other, TOPIC, partition) >= high
            assert cluster.log_end(victim, TOPIC, partition) < high
        finally:
            os.kill(process.pid, signal.SIGCONT)
        cluster.wait_full_isr(TOPIC, 30)
        assert victim in cluster.state(TOPIC, partition).isr
        finish(cluster, workload)
    except BaseException:
        print(cluster.logs())
        raise


def workload_high_watermark(cluster, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "hw"})
    try:
        return watermark_offsets(consumer, TopicPartition(TOPIC, partition), 10)[1]
    finally:
        consumer.close()


def test_expired_zookeeper_session_re_registers_and_rejoins(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, TOPIC_CONFIGS)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        workload.wait_progress(range(PARTITIONS), 20, 20)
        victim = cluster.leader(TOPIC, 0)
        led = [p for p, leader in leaders(cluster).items() if leader == victim]
        process = cluster.brokers[victim].process
        os.kill(process.pid, signal.SIGSTOP)
        try:
            # silent longer than the session timeout: ZooKeeper expires it and its znode goes
            wait_until(
                lambda: victim not in cluster.registered(), FAILOVER_S, f"broker {victim}'s registration to expire"
            )
            wait_new_leaders(cluster, led, {victim})
            workload.wait_progress(led, 10, 20)
        finally:
            os.kill(process.pid, signal.SIGCONT)
        # the same process notices the expiry, opens a new session, registers again and catches up
        cluster.wait_registered(set(cluster.brokers), 30)
        assert process.poll() is None, "the broker must survive a session expiry"
        cluster.wait_full_isr(TOPIC, 30)
        workload.wait_progress(range(PARTITIONS), 10, 20)
        finish(cluster, workload)
    except BaseException:
        print(cluster.logs())
        raise


def test_kill_controller_elects_a_new_one(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, TOPIC_CONFIGS)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        workload.wait_progress(range(PARTITIONS), 20, 20)
        old = cluster.controller()
        old_epoch = cluster.controller_epoch()
        assert old in cluster.brokers
        led = [p for p, leader in leaders(cluster).items() if leader == old]
        cluster.kill(old)
        wait_until(lambda: cluster.controller() not in (-1, old), FAILOVER_S, "a new controller")
        new = cluster.controller()
        assert new in cluster.brokers and new != old
        # the winner writes /controller first, then bumps /controller_epoch (as Kafka)
        wait_until(lambda: cluster.controller_epoch() > old_epoch, 10, "the controller epoch to be bumped")
        # the new controller moves the dead broker's leaderships
        wait_new_leaders(cluster, led, {old})
        workload.wait_progress(range(PARTITIONS), 10, 20)
        cluster.restart(old)
        cluster.wait_full_isr(TOPIC, 30)
        assert cluster.controller() == new  # a returning broker does not take the role back
        finish(cluster, workload)
    except BaseException:
        print(cluster.logs())
        raise


def test_two_replicas_down_refuses_acks_all_and_loses_nothing(cluster):
    create_topic(cluster, TOPIC, PARTITIONS, 3, TOPIC_CONFIGS)
    workload = Workload(cluster.bootstrap, TOPIC, PARTITIONS).start()
    try:
        workload.wait_progress(range(PARTITIONS), 20, 20)
        survivor = cluster.leader(TOPIC, 0)
        victims = [b for b in cluster.brokers if b != survivor]
        for victim in victims:
            cluster.kill(victim)
        wait_until(
            lambda: all(cluster.state(TOPIC, p).isr == [survivor] for p in range(PARTITIONS)),
            FAILOVER_S,
            f"ISR shrinking to [{survivor}]",
        )
        assert all(cluster.leader(TOPIC, p) == survivor for p in range(PARTITIONS))
        before = workload.acked_count()
        # a producer that does not retry sees Kafka's answer
        errors = []
        strict = Producer(
            {
                "bootstrap.servers": cluster.brokers[survivor].bootstrap,
                "acks": "all",
                "retries": 0,
                "message.timeout.ms": 10000,
            }
        )
        for partition in range(PARTITIONS):
            strict.produce(TOPIC, b"refused", partition=partition, on_delivery=lambda e, m: errors.append(e))
        assert strict.flush(15) == 0
        assert [e.code() if e else None for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS] * PARTITIONS
        time.sleep(1)
        assert workload.acked_count() == before, "acks=all acknowledged with one in-sync replica"
        for victim in victims:
            cluster.restart(victim)
        cluster.wait_full_isr(TOPIC, 30)
        workload.wait_progress(range(PARTITIONS), 10, 30)  # the retried messages go through
        logs = finish(cluster, workload)
        assert all(value != "refused" for log in logs.values() for _, value in log)
    except BaseException:
        print(cluster.logs())
        raise
