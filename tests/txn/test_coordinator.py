"""The transaction coordinator across a crash of its broker, with a real transactional client.

What was committed stays committed, a transaction left open by a producer that died is aborted
once its timeout passes (and stops holding back read_committed consumers), and the state topic
reads back, with ``strom dump-log``, as Kafka's transaction log would.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.group.records import partition_for_group
from strom.txn.coordinator import TRANSACTION_STATE_TOPIC
from tests.broker_process import BrokerProcess

STATE_PARTITIONS = 4
OVERRIDES = {
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "offsets.topic.num.partitions": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}

OPEN_TRANSACTION = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "tx-open", "transaction.timeout.ms": 4000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("events", b"never-visible", partition=0)
    assert p.flush(30) == 0
    print("open", flush=True)
    time.sleep(120)
""")


def _create_events(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("events", 1, 1)])["events"].result(30)


def _commit(bootstrap: str, transactional_id: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("events", value, partition=0)
    producer.commit_transaction(30)


def _read_committed(bootstrap: str, expected: int, timeout_s: float = 30) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("events", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    time.sleep(0.5)  # anything beyond what was expected would arrive now
    got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
    consumer.close()
    return got


def test_committed_and_open_transactions_across_a_coordinator_crash(tmp_path):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    opener = None
    try:
        _create_events(broker.bootstrap)
        _commit(broker.bootstrap, "tx-done", b"committed-before-crash")
        opener = subprocess.Popen(
            [sys.executable, "-c", OPEN_TRANSACTION, broker.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert opener.stdout.readline().strip() == b"open"
        opener.kill()  # the producer dies with its transaction open
        opener.wait(10)
        broker.kill()
        broker.start()
        # a later committed write is held back until the coordinator times the open one out
        _commit(broker.bootstrap, "tx-done", b"committed-after-crash")
        assert _read_committed(broker.bootstrap, 2) == [b"committed-before-crash", b"committed-after-crash"]
        broker.stop()
        state_dir = tmp_path / "data" / f"{TRANSACTION_STATE_TOPIC}-{partition_for_group('tx-done', STATE_PARTITIONS)}"
        dumped = subprocess.run(
            [
                sys.executable,
                "-m",
                "strom.cli.main",
                "dump-log",
                "--print-data-log",
                str(sorted(state_dir.glob("*.log"))[0]),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert '"transactionalId": "tx-done"' in dumped
        assert '"transactionStatus": "CompleteCommit"' in dumped
        assert '"partitionIds": [0]' in dumped
    finally:
        if opener is not None and opener.poll() is None:
            opener.kill()
        broker.stop()


def test_a_new_producer_instance_fences_the_old_one_and_aborts_its_transaction(tmp_path):
    with BrokerProcess(tmp_path / "data", OVERRIDES) as broker:
        _create_events(broker.bootstrap)
        old = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "tx-zombie"})
        old.init_transactions(30)
        old.begin_transaction()
        old.produce("events", b"zombie", partition=0)
        assert old.flush(30) == 0
        _commit(broker.bootstrap, "tx-zombie", b"successor")
        old.produce("events", b"zombie-2", partition=0)
        with pytest.raises(KafkaException) as fenced:  # its next send fails, fatally
            old.flush(10)
            old.commit_transaction(10)
        assert fenced.value.args[0].fatal(), fenced.value
        assert fenced.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), fenced.value
        assert _read_committed(broker.bootstrap, 1) == [b"successor"]
