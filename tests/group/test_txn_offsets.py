"""Transactional offset commits (TxnOffsetCommit) against a real broker, over TCP.

The transaction is driven with raw requests, as a client library sends them: InitProducerId
with a transactional.id, AddOffsetsToTxn (which adds the group's __consumer_offsets partition to
the transaction), TxnOffsetCommit, then EndTxn, after which the transaction coordinator writes
the commit or abort marker. OffsetFetch is what a consumer sees: pending offsets are invisible,
require_stable answers UNSTABLE_OFFSET_COMMIT (88) while they are pending, and a restarted
broker rebuilds the same state from the log. confluent-kafka's send_offsets_to_transaction and a
read_committed consumer show the same through a real client.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.group.support import WAIT_S, create_topic, produce, raw_request, unique, wait_until

# Few internal partitions: creating them is most of a fresh broker's first transaction.
SMALL = {
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
TXN_TIMEOUT_MS = 120_000  # longer than any test: the coordinator must not abort on its own


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("txn-offsets") / "data", SMALL) as process:
        yield process


@pytest.fixture
def own(tmp_path):
    """A broker for one test (restarts)."""
    with BrokerProcess(Path(tmp_path) / "data", SMALL) as process:
        yield process


# -- raw protocol helpers ---------------------------------------------------------------------------


def wait_coordinators(bootstrap: str, group: str, transactional_id: str | None) -> None:
    """FindCoordinator for the group (and the transactional id) until they answer: the first one
    creates __consumer_offsets (and __transaction_state), as a client's first FindCoordinator does."""
    for key_type, key in ((0, group), (1, transactional_id)):
        if key is None:
            continue

        def found() -> bool:
            response = raw_request(
                bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]}
            )
            return response.coordinators[0].error_code == ErrorCode.NONE

        wait_until(found, what=f"a coordinator for {key!r}")


class Txn:
    """One transactional producer, spoken to with raw requests."""

    def __init__(self, bootstrap: str, transactional_id: str):
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id

        def init():
            response = raw_request(
                bootstrap,
                ApiKey.INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": transactional_id,
                    "transaction_timeout": TXN_TIMEOUT_MS,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            # a transaction still open under this id is being aborted: clients retry
            if response.error_code == ErrorCode.CONCURRENT_TRANSACTIONS:
                return None
            assert response.error_code == ErrorCode.NONE, response
            return response

        response = wait_until(init, what=f"InitProducerId for {transactional_id}")
        self.producer_id = response.producer_id
        self.epoch = response.producer_epoch

    def add_offsets(self, group: str) -> int:
        response = raw_request(
            self.bootstrap,
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "group_id": group,
            },
        )
        return response.error_code

    def commit_offsets(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        member_id: str = "",
        generation: int = -1,
        version: int = 3,
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": f"m{offset}",
                }
            )
        response = raw_request(
            self.bootstrap,
            ApiKey.TXN_OFFSET_COMMIT,
            version,
            {
                "transactional_id": self.transactional_id,
                "group_id": group,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "generation_id": generation,
                "member_id": member_id,
                "group_instance_id": None,
                "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            },
        )
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def end(self, commit: bool) -> int:
        response = raw_request(
            self.bootstrap,
            ApiKey.END_TXN,
            3,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "committed": commit,
            },
        )
        return response.error_code


def begin(bootstrap: str, group: str) -> Txn:
    transactional_id = unique("txn")
    wait_coordinators(bootstrap, group, transactional_id)
    txn = Txn(bootstrap, transactional_id)
    assert txn.add_offsets(group) == ErrorCode.NONE
    return txn


def fetch(
    bootstrap: str, group: str, topic: str, partitions: list[int], require_stable: bool = False, version: int = 7
) -> dict[int, tuple[int, int]]:
    """{partition: (committed offset, error code)} as OffsetFetch answers; asserts no group-level error."""
    if version >= 8:
        response = raw_request(
            bootstrap,
            ApiKey.OFFSET_FETCH,
            version,
            {
                "groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": partitions}]}],
                "require_stable": require_stable,
            },
        )
        assert response.groups[0].error_code == ErrorCode.NONE, response
        topics = response.groups[0].topics
    else:
        response = raw_request(
            bootstrap,
            ApiKey.OFFSET_FETCH,
            version,
            {
                "group_id": group,
                "topics": [{"name": topic, "partition_indexes": partitions}],
                "require_stable": require_stable,
            },
        )
        assert response.error_code == ErrorCode.NONE, response
        topics = response.topics
    return {p.partition_index: (p.committed_offset, p.error_code) for t in topics for p in t.partitions}


def stable(bootstrap: str, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """The offsets once no transaction holds them, retrying UNSTABLE_OFFSET_COMMIT as consumers do."""

    def settled():
        got = fetch(bootstrap, group, topic, partitions, require_stable=True)
        if any(code == ErrorCode.UNSTABLE_OFFSET_COMMIT for _, code in got.values()):
            return None
        assert all(code == ErrorCode.NONE for _, code in got.values()), got
        return {p: offset for p, (offset, _) in got.items()}

    return wait_until(settled, what=f"stable offsets of {group}")


def plain_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """An OffsetCommit outside any transaction, retried as a client retries while the group's
    coordinator is still being found or loaded (the first commit of a new group may come first)."""
    retriable = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}
    errors: list[ErrorCode] = []
    wait_coordinators(bootstrap, group, None)

    def committed() -> bool:
        errors[:] = commit_once(bootstrap, group, topic, offsets)
        return not retriable.intersection(errors)

    wait_until(committed, what=f"a commit for group {group!r}")
    assert errors == [ErrorCode.NONE] * len(offsets)


def commit_once(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> list[ErrorCode]:
    response = raw_request(
        bootstrap,
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": o,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                        for p, o in offsets.items()
                    ],
                }
            ],
        },
    )
    return [p.error_code for t in response.topics for p in t.partitions]


def after_restart(process: BrokerProcess, group: str) -> None:
    """Restart the broker and wait until the group's coordinator has loaded its partition."""
    process.restart()

    def loaded() -> bool:
        response = raw_request(process.bootstrap, ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None})
        return response.error_code == ErrorCode.NONE

    wait_until(loaded, what=f"group {group} loaded after the restart")


# -- commit, abort, visibility ------------------------------------------------------------------------


def test_offsets_are_pending_until_the_commit_marker(shared):
    topic = create_topic(shared.bootstrap, unique("in"), 2)
    group = unique("g")
    txn = begin(shared.bootstrap, group)
    assert txn.commit_offsets(group, {(topic, 0): 42}) == {(topic, 0): ErrorCode.NONE}

    assert fetch(shared.bootstrap, group, topic, [0, 1]) == {0: (-1, 0), 1: (-1, 0)}  # invisible
    assert fetch(shared.bootstrap, group, topic, [0, 1], require_stable=True) == {
        0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        1: (-1, 0),
    }
    assert fetch(shared.bootstrap, group, topic, [0, 1], require_stable=True, version=8) == {
        0: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        1: (-1, 0),
    }

    assert txn.end(commit=True) == ErrorCode.NONE
    assert stable(shared.bootstrap, group, topic, [0, 1]) == {0: 42, 1: -1}
    assert fetch(shared.bootstrap, group, topic, [0]) == {0: (42, 0)}


def test_aborted_offsets_are_dropped_and_the_old_ones_stay(shared):
    topic = create_topic(shared.bootstrap, unique("in"), 2)
    group = unique("g")
    txn = begin(shared.bootstrap, group)
    plain_commit(shared.bootstrap, group, topic, {0: 5, 1: 6})
    assert txn.commit_offsets(group, {(topic, 0): 9, (topic, 1): 10}) == {(topic, 0): 0, (topic, 1): 0}
    assert fetch(shared.bootstrap, group, topic, [0, 1]) == {0: (5, 0), 1: (6, 0)}
    assert txn.end(commit=False) == ErrorCode.NONE
    assert stable(shared.bootstrap, group, topic, [0, 1]) == {0: 5, 1: 6}


def test_a_plain_commit_written_after_the_transactional_one_wins(shared):
    """Kafka orders by the records in __consumer_offsets: the plain commit came later, so it stays
    when the transaction commits; a plain commit before the transactional one is replaced."""
    topic = create_topic(shared.bootstrap, unique("in"), 2)
    group = unique("g")
    plain_commit(shared.bootstrap, group, topic, {1: 3})
    txn = begin(shared.bootstrap, group)
    assert txn.commit_offsets(group, {(topic, 0): 9, (topic, 1): 9}) == {(topic, 0): 0, (topic, 1): 0}
    plain_commit(shared.bootstrap, group, topic, {0: 7})
    assert fetch(shared.bootstrap, group, topic, [0, 1]) == {0: (7, 0), 1: (3, 0)}
    assert txn.end(commit=True) == ErrorCode.NONE
    assert stable(shared.bootstrap, group, topic, [0, 1]) == {0: 7, 1: 9}


def test_one_transaction_commits_offsets_of_several_groups(shared):
    topic = create_topic(shared.bootstrap, unique("in"), 1)
    groups = [unique("g") for _ in range(3)]
    txn = begin(shared.bootstrap, groups[0])
    for group in groups[1:]:
        wait_coordinators(shared.bootstrap, group, txn.transactional_id)
        assert txn.add_offsets(group) == ErrorCode.NONE
    for i, group in enumerate(groups):
        assert txn.commit_offsets(group, {(topic, 0): 100 + i}) == {(topic, 0): 0}
    assert txn.end(commit=True) == ErrorCode.NONE
    assert [stable(shared.bootstrap, group, topic, [0])[0] for group in groups] == [100, 101, 102]


# -- what the broker refuses -------------------------------------------------------------------------


def test_a_commit_the_transaction_did_not_add_is_refused(shared):
    """KIP-890 part 1: without AddOffsetsToTxn the transaction coordinator does not know the partition."""
    topic = create_topic(shared.bootstrap, unique("in"), 1)
    group = unique("g")
    transactional_id = unique("txn")
    wait_coordinators(shared.bootstrap, group, transactional_id)
    txn = Txn(shared.bootstrap, transactional_id)
    assert txn.commit_offsets(group, {(topic, 0): 1}) == {(topic, 0): ErrorCode.INVALID_TXN_STATE}
    assert fetch(shared.bootstrap, group, topic, [0], require_stable=True) == {0: (-1, 0)}


def test_unknown_partitions_members_and_generations_are_refused(shared):
    topic = create_topic(shared.bootstrap, unique("in"), 1)
    group = unique("g")
    txn = begin(shared.bootstrap, group)
    assert txn.commit_offsets(group, {(topic, 0): 1, (topic, 5): 1, ("no-such-topic", 0): 1}) == {
        (topic, 0): ErrorCode.NONE,
        (topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    # v3 carries the consumer's membership: a member the group does not know cannot commit
    assert txn.commit_offsets(group, {(topic, 0): 2}, member_id="ghost", generation=1) == {
        (topic, 0): ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert txn.end(commit=True) == ErrorCode.NONE
    assert stable(shared.bootstrap, group, topic, [0]) == {0: 1}


def test_a_fenced_producer_cannot_commit_offsets(shared):
    topic = create_topic(shared.bootstrap, unique("in"), 1)
    group = unique("g")
    old = begin(shared.bootstrap, group)
    assert old.commit_offsets(group, {(topic, 0): 4}) == {(topic, 0): 0}
    new = Txn(shared.bootstrap, old.transactional_id)  # aborts the open transaction, bumps the epoch
    assert new.epoch > old.epoch
    assert stable(shared.bootstrap, group, topic, [0]) == {0: -1}
    assert old.commit_offsets(group, {(topic, 0): 5}) == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert new.add_offsets(group) == ErrorCode.NONE
    assert new.commit_offsets(group, {(topic, 0): 6}) == {(topic, 0): 0}
    assert old.commit_offsets(group, {(topic, 0): 7}) == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert new.end(commit=True) == ErrorCode.NONE
    assert stable(shared.bootstrap, group, topic, [0]) == {0: 6}


def test_deleting_a_group_drops_the_offsets_of_its_open_transaction(shared):
    topic = create_topic(shared.bootstrap, unique("in"), 1)
    group = unique("g")
    txn = begin(shared.bootstrap, group)
    assert txn.commit_offsets(group, {(topic, 0): 8}) == {(topic, 0): 0}
    response = raw_request(shared.bootstrap, ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    assert response.results[0].error_code == ErrorCode.NONE
    assert txn.end(commit=True) == ErrorCode.NONE
    assert stable(shared.bootstrap, group, topic, [0]) == {0: -1}


# -- loading after a restart -------------------------------------------------------------------------


def test_a_restart_rebuilds_committed_aborted_and_open_transactions(own):
    bootstrap = own.bootstrap
    topic = create_topic(bootstrap, unique("in"), 3)
    group = unique("g")
    committed_txn = begin(bootstrap, group)
    plain_commit(bootstrap, group, topic, {0: 1, 1: 1, 2: 1})
    assert committed_txn.commit_offsets(group, {(topic, 0): 10}) == {(topic, 0): 0}
    assert committed_txn.end(commit=True) == ErrorCode.NONE
    aborted_txn = begin(bootstrap, group)
    assert aborted_txn.commit_offsets(group, {(topic, 1): 20}) == {(topic, 1): 0}
    assert aborted_txn.end(commit=False) == ErrorCode.NONE
    assert stable(bootstrap, group, topic, [0, 1, 2]) == {0: 10, 1: 1, 2: 1}
    open_txn = begin(bootstrap, group)
    assert open_txn.commit_offsets(group, {(topic, 2): 30}) == {(topic, 2): 0}

    after_restart(own, group)
    bootstrap = own.bootstrap
    assert fetch(bootstrap, group, topic, [0, 1, 2]) == {0: (10, 0), 1: (1, 0), 2: (1, 0)}
    assert fetch(bootstrap, group, topic, [0, 1, 2], require_stable=True) == {
        0: (10, 0),
        1: (1, 0),
        2: (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
    }  # still open: still pending
    wait_coordinators(bootstrap, group, open_txn.transactional_id)
    open_txn.bootstrap = bootstrap
    assert open_txn.end(commit=True) == ErrorCode.NONE  # the reloaded coordinator finishes it
    assert stable(bootstrap, group, topic, [0, 1, 2]) == {0: 10, 1: 1, 2: 30}

    after_restart(own, group)
    assert stable(own.bootstrap, group, topic, [0, 1, 2]) == {0: 10, 1: 1, 2: 30}
    # markers are not group records: loading passes over them without complaint
    assert "unreadable record" not in own.read_log()


def test_a_restart_keeps_a_later_plain_commit_over_the_transaction(own):
    topic = create_topic(own.bootstrap, unique("in"), 1)
    group = unique("g")
    txn = begin(own.bootstrap, group)
    assert txn.commit_offsets(group, {(topic, 0): 9}) == {(topic, 0): 0}
    plain_commit(own.bootstrap, group, topic, {0: 7})
    assert txn.end(commit=True) == ErrorCode.NONE
    assert stable(own.bootstrap, group, topic, [0]) == {0: 7}
    after_restart(own, group)
    assert stable(own.bootstrap, group, topic, [0]) == {0: 7}


# -- real clients -------------------------------------------------------------------------------------


def test_confluent_kafka_send_offsets_to_transaction(shared):
    """Consume-transform-produce with librdkafka: the group's offsets move only with a commit."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = shared.bootstrap
    source = create_topic(bootstrap, unique("src"), 1)
    sink = create_topic(bootstrap, unique("dst"), 1)
    group = unique("copier")
    produce(bootstrap, source, [f"v{i}".encode() for i in range(6)])
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": unique("copier-txn"),
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
        }
    )
    try:
        consumer.subscribe([source])
        producer.init_transactions(WAIT_S)
        seen = []

        def copy_batch(count: int, commit: bool) -> None:
            producer.begin_transaction()
            batch = []
            deadline = time.monotonic() + WAIT_S
            while len(batch) < count and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    batch.append(msg)
            assert len(batch) == count
            for msg in batch:
                producer.produce(sink, msg.value())
            seen.extend(msg.offset() for msg in batch)
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), WAIT_S
            )
            if commit:
                producer.commit_transaction(WAIT_S)
            else:
                producer.abort_transaction(WAIT_S)

        copy_batch(3, commit=True)
        assert consumer.committed([TopicPartition(source, 0)], WAIT_S)[0].offset == 3
        copy_batch(3, commit=False)
        assert consumer.committed([TopicPartition(source, 0)], WAIT_S)[0].offset == 3
        assert seen == [0, 1, 2, 3, 4, 5]
    finally:
        consumer.close()
    assert stable(bootstrap, group, source, [0]) == {0: 3}


def test_a_read_committed_consumer_waits_for_the_transaction_to_settle(shared):
    """librdkafka's read_committed consumer asks with require_stable and retries UNSTABLE_OFFSET_COMMIT,
    so it starts where the transaction left the group, not from the offset before it."""
    from confluent_kafka import Consumer

    bootstrap = shared.bootstrap
    topic = create_topic(bootstrap, unique("in"), 1)
    group = unique("g")
    produce(bootstrap, topic, [f"v{i}".encode() for i in range(10)])
    plain_commit(bootstrap, group, topic, {0: 2})
    txn = begin(bootstrap, group)
    assert txn.commit_offsets(group, {(topic, 0): 7}) == {(topic, 0): 0}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # it joins and asks for its offset, which is not stable yet
            msg = consumer.poll(0.1)
            assert msg is None or msg.error() is not None, f"consumed offset {msg.offset()} before the commit"
        assert txn.end(commit=True) == ErrorCode.NONE
        first = wait_until(lambda: _first_message(consumer), what="the first record after the commit")
        assert first.offset() == 7
    finally:
        consumer.close()


def _first_message(consumer):
    msg = consumer.poll(0.2)
    return msg if msg is not None and msg.error() is None else None
