"""examples/delivery/exactly_once.py: consume-transform-produce in transactions, SIGKILLed mid-transaction.

The kill leaves a transaction open, with some of its output already in the log; the restarted copy
(same transactional.id) aborts it, reads again from the offsets the last committed transaction
stored, and finishes. A read_committed reader of the output then sees every input record exactly
once, in input order per partition, although the log itself holds the aborted copies too.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.group.support import WAIT_S, create_topic, produce, unique, wait_until

pytestmark = pytest.mark.timeout(150)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "delivery" / "exactly_once.py"
TOTAL = 300
PARTITIONS = 3
KILL_ATTEMPTS = 3


def start(broker, topic: str, group: str, output: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLE),
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--output-topic",
            output,
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=500",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def end_offsets(broker, topic: str, isolation: str) -> list[int]:
    """ListOffsets(latest): the last stable offsets under read_committed, the high watermarks otherwise."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("ends"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=WAIT_S)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def read_all(broker, topic: str, isolation: str) -> dict[int, list[str]]:
    """Every value of every partition up to its end (the LSO under read_committed), per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("reader"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    values: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()

    def tick() -> None:
        msg = consumer.poll(0.1)
        if msg is None:
            return
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
            return
        values[msg.partition()].append(msg.value().decode())

    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        wait_until(lambda: len(at_end) == PARTITIONS, 30, what=f"the end of {topic}", tick=tick)
    finally:
        consumer.close()
    return values


def transaction_state(broker, transactional_id: str) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "transactions",
            "--bootstrap-server",
            broker.bootstrap,
            "describe",
            "--transactional-id",
            transactional_id,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    header, row = (line.split("\t") for line in result.stdout.splitlines())
    return row[header.index("TransactionState")].strip()


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(10)


def test_killed_mid_transaction_and_restarted_outputs_each_record_once(broker):
    topic = create_topic(broker.bootstrap, unique("eos-in"), PARTITIONS)
    output = create_topic(broker.bootstrap, unique("eos-out"), PARTITIONS)
    group = unique("eos")
    values = [f"m{i:04d}" for i in range(TOTAL)]
    produce(broker.bootstrap, topic, [v.encode() for v in values], partitions=PARTITIONS)

    # Kill -9 while a transaction is open with output in the log (tried again if a kill lands
    # between two transactions): the coordinator still reports it Ongoing, since no EndTxn came.
    for _ in range(KILL_ATTEMPTS):
        copier = start(broker, topic, group, output, "--batch", "20", "--delay-ms", "20")
        try:

            def open_transaction() -> bool:
                assert copier.poll() is None, copier.stderr.read()
                stable = sum(end_offsets(broker, output, "read_committed"))
                return stable >= 60 and sum(end_offsets(broker, output, "read_uncommitted")) > stable

            wait_until(open_transaction, 60, interval=0.01, what="an open transaction after 60 records")
            copier.kill()  # SIGKILL: no commit, no abort, no LeaveGroup
            copier.wait(10)
        finally:
            stop(copier)
        written, stable = end_offsets(broker, output, "read_uncommitted"), end_offsets(broker, output, "read_committed")
        if transaction_state(broker, f"{group}-eos") == "Ongoing" and sum(written) > sum(stable):
            break
    else:
        pytest.fail(f"none of {KILL_ATTEMPTS} kills landed inside an open transaction")
    committed_before = sum(len(v) for v in read_all(broker, output, "read_committed").values())
    assert 0 < committed_before < TOTAL, "the kill did not land mid-stream"

    second = start(broker, topic, group, output, "--idle-exit", "3")
    try:
        second.wait(60)  # the group waits for the killed member's session (6 s) before reassigning
    finally:
        if second.poll() is None:
            stop(second)
            pytest.fail(f"the restarted copier did not finish: {second.stderr.read()}")
    assert second.returncode == 0, second.stderr.read()

    committed = read_all(broker, output, "read_committed")
    expected = {p: [v.upper() for v in values[p::PARTITIONS]] for p in range(PARTITIONS)}
    seen = Counter(v for vs in committed.values() for v in vs)
    assert sorted(v for v, n in seen.items() if n > 1) == [], "output twice"
    assert sorted(set(v.upper() for v in values) - set(seen)) == [], "output missing"
    assert committed == expected  # each exactly once, in input order per partition
    everything = read_all(broker, output, "read_uncommitted")
    assert sum(len(v) for v in everything.values()) > TOTAL  # the aborted copies are in the log, hidden
