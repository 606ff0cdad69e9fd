"""``strom transactions`` on three brokers, bootstrapped through one: the requests find their brokers.

ListTransactions must reach every broker (each lists only the ids it coordinates),
DescribeTransactions the id's coordinator, DescribeProducers and the abort's WriteTxnMarkers the
partition's leader, which here are mostly not the bootstrap broker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from strom.cli.client_props import watermark_offsets
from strom.group.records import partition_for_group
from tests.cluster.conftest import create_topic, wait_until

pytestmark = pytest.mark.timeout(180)

STATE_PARTITIONS = 3
OVERRIDES = {
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
TOPIC = "routed"


def transactions(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "transactions",
            "--bootstrap-server",
            bootstrap,
            "--timeout",
            "30000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )


def rows(result: subprocess.CompletedProcess) -> list[dict[str, str]]:
    assert result.returncode == 0, result.stdout + result.stderr
    header, *body = ([cell.strip() for cell in line.split("\t")[:-1]] for line in result.stdout.splitlines())
    return [dict(zip(header, row)) for row in body]


def ids_on_every_state_partition() -> list[str]:
    """One transactional id per __transaction_state partition, so every broker coordinates one."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < STATE_PARTITIONS:
        found.setdefault(partition_for_group(f"routed-{n}", STATE_PARTITIONS), f"routed-{n}")
        n += 1
    return [found[p] for p in range(STATE_PARTITIONS)]


HANGING_PRODUCER = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    bootstrap, topic, partition, txn_id = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"hanging", partition=partition)
    assert producer.flush(30) == 0
    print("written", flush=True)
    sys.stdin.read()  # until killed
""")


def test_requests_reach_coordinators_and_leaders(cluster_factory):
    cluster = cluster_factory(overrides=OVERRIDES)
    create_topic(cluster, TOPIC, partitions=3, replication_factor=3)
    one = cluster.brokers[0].bootstrap  # the tool only ever gets broker 0's address
    producers = []
    txn_ids = ids_on_every_state_partition()
    for index, txn_id in enumerate(txn_ids):
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(TOPIC, txn_id.encode(), partition=index)
        assert producer.flush(30) == 0
        producers.append(producer)
    coordinators = {
        t: str(cluster.leader("__transaction_state", partition_for_group(t, STATE_PARTITIONS))) for t in txn_ids
    }
    assert set(coordinators.values()) - {"0"}, "every id is coordinated by the bootstrap broker"

    listed = {row["TransactionalId"]: row for row in rows(transactions(one, "list"))}
    assert {t: listed[t]["Coordinator"] for t in txn_ids} == coordinators
    assert {listed[t]["TransactionState"] for t in txn_ids} == {"Ongoing"}
    for index, txn_id in enumerate(txn_ids):
        [described] = rows(transactions(one, "describe", "--transactional-id", txn_id))
        assert (described["CoordinatorId"], described["TransactionState"], described["TopicPartitions"]) == (
            coordinators[txn_id],
            "Ongoing",
            f"{TOPIC}-{index}",
        )
        [state] = rows(transactions(one, "describe-producers", "--topic", TOPIC, "--partition", str(index)))
        assert (state["ProducerId"], state["CurrentTransactionStartOffset"]) == (listed[txn_id]["ProducerId"], "0")
    for producer in producers:
        producer.commit_transaction(30)
    listed = {row["TransactionalId"]: row for row in rows(transactions(one, "list"))}
    assert {listed[t]["TransactionState"] for t in txn_ids} == {"CompleteCommit"}

    # A hanging transaction on a partition that broker 0 does not lead, aborted through broker 0.
    partition = next(p for p in range(3) if cluster.leader(TOPIC, p) != 0)
    doomed = subprocess.Popen(
        [sys.executable, "-c", HANGING_PRODUCER, cluster.bootstrap, TOPIC, str(partition), "routed-doomed"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = doomed.stdout.readline()  # bounded: the script gives up after 30 s per step
        assert line == "written\n", doomed.stderr.read() if doomed.poll() is not None else line
    finally:
        doomed.kill()
        doomed.wait(10)
    start = 2  # after the committed record and its marker
    hanging = {
        row["CurrentTransactionStartOffset"]: row
        for row in rows(transactions(one, "describe-producers", "--topic", TOPIC, "--partition", str(partition)))
    }
    assert str(start) in hanging, hanging
    aborted = transactions(one, "abort", "--topic", TOPIC, "--partition", str(partition), "--start-offset", str(start))
    assert (aborted.returncode, aborted.stdout, aborted.stderr) == (0, "", "")
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "routed-lso", "isolation.level": "read_committed"}
    )
    try:
        wait_until(
            lambda: watermark_offsets(consumer, TopicPartition(TOPIC, partition), 10)[1] == 4,
            30,
            "the LSO to pass the abort marker",
        )
    finally:
        consumer.close()
