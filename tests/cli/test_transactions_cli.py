"""``strom transactions`` (kafka-transactions.sh) and ``console-consumer --isolation-level`` against a
real broker, with confluent-kafka's transactional producer.

Tables are Kafka's: a header row, then rows, each cell padded to its column's widest value and
followed by a tab. The hanging transaction is a real one: a transactional producer with a long
transaction.timeout.ms writes, then dies by kill -9, so nothing ends its transaction and
read_committed consumers stop at its first offset until ``abort`` writes the marker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker_process import BrokerProcess
from tests.group.support import WAIT_S, create_topic, produce, unique, wait_until

pytestmark = pytest.mark.timeout(120)

PRODUCER_HEADER = [
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
]
DESCRIBE_HEADER = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("txn-cli") / "data") as process:
        yield process


def strom(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=timeout
    )


def transactions(broker, *args: str) -> subprocess.CompletedProcess:
    return strom("transactions", "--bootstrap-server", broker.bootstrap, *args)


def table(result: subprocess.CompletedProcess) -> list[list[str]]:
    """Rows of Kafka's prettyPrintTable, checking its layout: equal column widths, a tab after each cell."""
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines and all(line.endswith("\t") for line in lines), repr(result.stdout)
    cells = [line.split("\t")[:-1] for line in lines]
    for column in zip(*cells):
        assert len({len(cell) for cell in column}) == 1, column  # padded to one width
    return [[cell.rstrip() for cell in row] for row in cells]


def rows_by(rows: list[list[str]], column: str) -> dict[str, dict[str, str]]:
    header, *body = rows
    return {row[header.index(column)]: dict(zip(header, row)) for row in body}


def transactional_producer(broker, transactional_id: str, **config) -> Producer:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **config}
    )
    producer.init_transactions(WAIT_S)
    return producer


def consume(broker, topic: str, isolation: str, count: int) -> list[str]:
    result = strom(
        "console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--isolation-level",
        isolation,
        "--max-messages",
        str(count),
        "--timeout-ms",
        "30000",
    )
    assert result.returncode == 0, result.stderr
    assert f"Processed a total of {count} messages" in result.stderr
    return result.stdout.splitlines()


def end_offset(broker, topic: str, isolation: str) -> int:
    """ListOffsets(latest) under the isolation level: the LSO for read_committed, the HW otherwise."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique("offsets"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)[1]
    finally:
        consumer.close()


def test_list_describe_and_describe_producers_follow_a_transaction(broker):
    topic = create_topic(broker.bootstrap, unique("txn"), 2)
    txn_id = unique("copier")
    producer = transactional_producer(broker, txn_id)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(WAIT_S) == 0

    listed = rows_by(table(transactions(broker, "list")), "TransactionalId")
    assert listed[txn_id]["TransactionState"] == "Ongoing"
    assert listed[txn_id]["Coordinator"] == "0"
    assert table(transactions(broker, "list"))[0] == [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
    ]
    producer_id = listed[txn_id]["ProducerId"]

    described = table(transactions(broker, "describe", "--transactional-id", txn_id))
    assert described[0] == DESCRIBE_HEADER
    row = dict(zip(DESCRIBE_HEADER, described[1]))
    assert (row["CoordinatorId"], row["TransactionalId"], row["ProducerId"], row["ProducerEpoch"]) == (
        "0",
        txn_id,
        producer_id,
        "0",
    )
    assert row["TransactionState"] == "Ongoing"
    assert row["TransactionTimeoutMs"] == "60000"  # librdkafka's default transaction.timeout.ms
    assert row["TopicPartitions"] == f"{topic}-0,{topic}-1"
    assert int(row["CurrentTransactionStartTimeMs"]) > 0 and int(row["TransactionDurationMs"]) >= 0

    producers = table(transactions(broker, "describe-producers", "--topic", topic, "--partition", "1"))
    assert producers[0] == PRODUCER_HEADER
    assert len(producers) == 2
    state = dict(zip(PRODUCER_HEADER, producers[1]))
    assert state["ProducerId"] == producer_id and state["ProducerEpoch"] == "0"
    assert state["LastSequence"] == "2"  # v1, v3, v5: sequences 0..2
    assert state["CurrentTransactionStartOffset"] == "0"
    assert state["LatestCoordinatorEpoch"] == "-1"  # no marker written here yet

    producer.commit_transaction(WAIT_S)
    listed = rows_by(table(transactions(broker, "list")), "TransactionalId")
    assert listed[txn_id]["TransactionState"] == "CompleteCommit"
    row = dict(zip(DESCRIBE_HEADER, table(transactions(broker, "describe", "--transactional-id", txn_id))[1]))
    assert row["TransactionState"] == "CompleteCommit"
    assert row["TopicPartitions"] == ""
    state = dict(
        zip(PRODUCER_HEADER, table(transactions(broker, "describe-producers", "--topic", topic, "--partition", "1"))[1])
    )
    assert state["CurrentTransactionStartOffset"] == "None"
    assert state["LatestCoordinatorEpoch"] == "0"  # the commit marker's
    assert sorted(consume(broker, topic, "read_committed", 6)) == [f"v{i}" for i in range(6)]


def test_describe_of_a_transactional_id_without_a_transaction(broker):
    txn_id = unique("idle")
    transactional_producer(broker, txn_id)  # InitProducerId only: state Empty, no start time
    row = dict(zip(DESCRIBE_HEADER, table(transactions(broker, "describe", "--transactional-id", txn_id))[1]))
    assert row["TransactionState"] == "Empty"
    assert (row["CurrentTransactionStartTimeMs"], row["TransactionDurationMs"], row["TopicPartitions"]) == (
        "None",
        "None",
        "",
    )


def test_errors_are_one_line_and_exit_1(broker):
    topic = create_topic(broker.bootstrap, unique("err"), 1)
    unknown = transactions(broker, "describe", "--transactional-id", "never-used")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr == (
        "Failed to describe transaction state of transactional-id `never-used`: TRANSACTIONAL_ID_NOT_FOUND\n"
    )
    missing = transactions(broker, "describe-producers", "--topic", topic, "--partition", "5")
    assert missing.returncode == 1
    assert missing.stderr == (
        f"Failed to describe producers for partition {topic}-5 on leader: UNKNOWN_TOPIC_OR_PARTITION\n"
    )
    no_topic = transactions(broker, "describe-producers", "--topic", unique("absent"), "--partition", "0")
    assert no_topic.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in no_topic.stderr
    nothing_open = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    assert nothing_open.returncode == 1
    assert nothing_open.stderr == f"Could not find any open transactions starting at offset 0 on partition {topic}-0\n"
    unnamed = transactions(broker, "abort", "--topic", topic, "--partition", "0")
    assert unnamed.returncode == 1 and "--start-offset" in unnamed.stderr
    unreachable = strom("transactions", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1500", "list")
    assert unreachable.returncode == 1 and unreachable.stdout == ""
    assert unreachable.stderr.startswith("cannot reach the bootstrap servers 127.0.0.1:1")


HANGING_PRODUCER = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    bootstrap, topic, txn_id = sys.argv[1:4]
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 600000})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, f"hanging-{i}".encode(), partition=0)
    assert producer.flush(15) == 0
    print("written", flush=True)
    sys.stdin.read()  # until killed
""")


def test_a_hanging_transaction_is_found_and_aborted(broker):
    topic = create_topic(broker.bootstrap, unique("hang"), 1)
    before = [f"before-{i}" for i in range(4)]
    after = [f"after-{i}" for i in range(5)]
    produce(broker.bootstrap, topic, [v.encode() for v in before])
    txn_id = unique("doomed")
    doomed = subprocess.Popen(
        [sys.executable, "-c", HANGING_PRODUCER, broker.bootstrap, topic, txn_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = doomed.stdout.readline()  # bounded: the script itself gives up after 15 s per step
        assert line == "written\n", doomed.stderr.read() if doomed.poll() is not None else line
    finally:
        doomed.kill()  # kill -9: no abort, no EndTxn; the transaction stays open for 10 minutes
        doomed.wait(10)
    committed = transactional_producer(broker, unique("after"))
    committed.begin_transaction()
    for value in after:
        committed.produce(topic, value.encode(), partition=0)
    committed.commit_transaction(WAIT_S)

    # Hanging: the LSO stays at the dead producer's first offset, read_uncommitted sees everything.
    start = len(before)
    assert end_offset(broker, topic, "read_committed") == start
    total = len(before) + 3 + len(after) + 1  # + the commit marker
    assert end_offset(broker, topic, "read_uncommitted") == total
    assert (
        consume(broker, topic, "read_uncommitted", len(before) + 3 + len(after))
        == before + [f"hanging-{i}" for i in range(3)] + after
    )

    producers = rows_by(
        table(transactions(broker, "describe-producers", "--topic", topic, "--partition", "0")),
        "CurrentTransactionStartOffset",
    )
    assert str(start) in producers, producers
    hanging = producers[str(start)]
    assert hanging["LatestCoordinatorEpoch"] == "-1" and hanging["LastSequence"] == "2"
    listed = rows_by(table(transactions(broker, "list")), "TransactionalId")
    assert listed[txn_id]["TransactionState"] == "Ongoing"
    assert listed[txn_id]["ProducerId"] == hanging["ProducerId"]

    aborted = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start))
    assert (aborted.returncode, aborted.stdout, aborted.stderr) == (0, "", "")

    wait_until(lambda: end_offset(broker, topic, "read_committed") == total + 1, what="the LSO to pass the abort")
    assert consume(broker, topic, "read_committed", len(before) + len(after)) == before + after
    state = rows_by(
        table(transactions(broker, "describe-producers", "--topic", topic, "--partition", "0")), "ProducerId"
    )[hanging["ProducerId"]]
    assert state["CurrentTransactionStartOffset"] == "None"
    again = transactions(broker, "abort", "--topic", topic, "--partition", "0", "--start-offset", str(start))
    assert again.returncode == 1 and "Could not find any open transactions" in again.stderr


def test_abort_by_producer_id_epoch_and_coordinator_epoch(broker):
    """The form for brokers older than 3.0; a coordinator epoch of -1 (no marker yet) is sent as 0."""
    topic = create_topic(broker.bootstrap, unique("hang-ids"), 1)
    doomed = subprocess.Popen(
        [sys.executable, "-c", HANGING_PRODUCER, broker.bootstrap, topic, unique("doomed")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = doomed.stdout.readline()
        assert line == "written\n", doomed.stderr.read() if doomed.poll() is not None else line
    finally:
        doomed.kill()
        doomed.wait(10)
    [state] = rows_by(
        table(transactions(broker, "describe-producers", "--topic", topic, "--partition", "0")), "ProducerId"
    ).values()
    assert state["CurrentTransactionStartOffset"] == "0"
    assert end_offset(broker, topic, "read_committed") == 0
    aborted = transactions(
        broker,
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--producer-id",
        state["ProducerId"],
        "--producer-epoch",
        state["ProducerEpoch"],
        "--coordinator-epoch",
        state["LatestCoordinatorEpoch"],
    )
    assert (aborted.returncode, aborted.stdout, aborted.stderr) == (0, "", "")
    assert end_offset(broker, topic, "read_committed") == 4  # three aborted records and the marker
