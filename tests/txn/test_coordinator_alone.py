"""The transaction coordinator built from its collaborators alone, no broker: a real replica
manager over logs in a tmp dir (tests/replication/replicas.py) holds __transaction_state, and its
marker channel writes the markers into the partitions this broker leads."""

from __future__ import annotations

import asyncio
import itertools

from strom.group.offset_store import OFFSETS_TOPIC
from strom.protocol.errors import ErrorCode
from strom.protocol.records import read_control_record
from strom.server.config import BrokerConfig
from strom.txn.coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from strom.txn.markers import MarkerChannel
from strom.txn.records import TxnState
from tests.replication.replicas import Replicas, make_replicas

CONFIG = BrokerConfig.from_mapping({"transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "1"})


class Setup:
    def __init__(self, replicas: Replicas, first_id: int = 4000):
        self.replicas = replicas
        self.ids = itertools.count(first_id)
        self.completed: list[tuple[int, int, bool]] = []  # complete_txn calls: (offsets partition, producer, commit)
        self.offsets_topic_asked = 0
        markers = MarkerChannel(
            1,
            replicas.metadata,
            replicas.manager,
            lambda *call: self.completed.append(call),
            listener="PLAINTEXT",
            stopping=lambda: False,
        )
        self.coordinator = TransactionCoordinator(
            1,
            CONFIG,
            replicas.metadata,
            replicas.manager,
            markers,
            next_producer_id=self.ids.__next__,
            ensure_offsets_topic=self._ensure_offsets_topic,
            offsets_partition_for=lambda group_id: 0,
            stopping=lambda: False,
        )
        replicas.manager.leadership_listeners.append(self.coordinator.on_leadership_change)

    def _ensure_offsets_topic(self) -> None:
        self.offsets_topic_asked += 1


def test_init_producer_id_is_written_to_the_state_log_and_a_new_coordinator_reads_it_back(tmp_path):
    replicas = make_replicas(tmp_path)
    first = Setup(replicas)
    assert first.coordinator.coordinator_error("tx") == ErrorCode.COORDINATOR_NOT_AVAILABLE  # no state topic yet
    replicas.lead(TRANSACTION_STATE_TOPIC, partitions=2)
    assert first.coordinator.owned == {0, 1}

    async def init(coordinator: TransactionCoordinator) -> tuple[int, int, int]:
        result = await coordinator.init_producer_id("tx", 60_000)
        return result.error_code, result.producer_id, result.producer_epoch

    assert asyncio.run(init(first.coordinator)) == (ErrorCode.NONE, 4000, 0)
    assert asyncio.run(init(first.coordinator)) == (ErrorCode.NONE, 4000, 1)  # the next incarnation: fenced epoch
    # the state is in the log, not only in memory
    state_log = replicas.manager.partitions[(TRANSACTION_STATE_TOPIC, first.coordinator.partition_for("tx"))].log
    assert state_log.high_watermark == 2

    # a coordinator that takes over (another process after a failover) loads the id from the log
    second = Setup(replicas, first_id=9000)
    for partition in [p for key, p in replicas.manager.partitions.items() if key[0] == TRANSACTION_STATE_TOPIC]:
        second.coordinator.on_leadership_change(partition, True)
    assert second.coordinator.txns["tx"].producer_id == 4000
    assert asyncio.run(init(second.coordinator)) == (ErrorCode.NONE, 4000, 2)
    assert next(second.ids) == 9000  # no new producer id was taken


def test_a_committed_transaction_writes_its_markers_and_settles_its_offsets(tmp_path):
    replicas = make_replicas(tmp_path)
    setup = Setup(replicas)
    replicas.lead(TRANSACTION_STATE_TOPIC, partitions=2)
    replicas.lead("orders", partitions=1)
    replicas.lead(OFFSETS_TOPIC, partitions=1)
    coordinator = setup.coordinator

    async def transaction() -> tuple[int, int, int]:
        init = await coordinator.init_producer_id("tx", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        added = await coordinator.add_partitions("tx", pid, epoch, [("orders", 0)])
        offsets = coordinator.offsets_partition("g")  # AddOffsetsToTxn
        added_offsets = await coordinator.add_partitions("tx", pid, epoch, [offsets])
        ended = (await coordinator.end_txn("tx", pid, epoch, commit=True)).error_code
        for _ in range(200):  # the markers and CompleteCommit are written after EndTxn is answered
            if coordinator.txns["tx"].state == TxnState.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.01)
        return added, added_offsets, ended

    assert asyncio.run(transaction()) == (ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE)
    assert coordinator.txns["tx"].state == TxnState.COMPLETE_COMMIT
    assert setup.offsets_topic_asked == 1
    assert setup.completed == [(0, 4000, True)]
    [(header, chunk)] = list(replicas.manager.partitions[("orders", 0)].log.iter_batches())
    assert header.is_control and header.producer_id == 4000
    assert read_control_record(chunk, header)[0] is True  # COMMIT


def test_transactions_v2_hands_over_to_a_new_producer_id_when_the_epochs_run_out(tmp_path):
    """EndTxn v5 bumps the epoch; at the last epochs the markers take the last one and the client is
    answered a new producer id with epoch 0, which a coordinator taking over also knows (v1 records)."""
    from strom.txn.metadata import MAX_EPOCH

    replicas = make_replicas(tmp_path)
    setup = Setup(replicas)
    replicas.lead(TRANSACTION_STATE_TOPIC, partitions=2)
    replicas.lead("orders", partitions=1)
    coordinator = setup.coordinator

    async def until_complete() -> None:
        for _ in range(200):
            if coordinator.txns["tx"].state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                return
            await asyncio.sleep(0.01)

    async def run():
        init = await coordinator.init_producer_id("tx", 60_000)
        pid = init.producer_id
        # an id far into its life (as 32,764 transactions would leave it): white-box, the log is the same
        coordinator.txns["tx"].producer_epoch = MAX_EPOCH - 3
        epoch = MAX_EPOCH - 3
        added = await coordinator.add_partitions("tx", pid, epoch, [("orders", 0)], tv2=True)
        first = await coordinator.end_txn("tx", pid, epoch, commit=True, tv2=True)
        await until_complete()
        second_add = await coordinator.add_partitions("tx", pid, first.producer_epoch, [("orders", 0)], tv2=True)
        second = await coordinator.end_txn("tx", pid, first.producer_epoch, commit=False, tv2=True)
        await until_complete()
        retried = await coordinator.end_txn("tx", pid, first.producer_epoch, commit=False, tv2=True)
        return pid, added, first, second_add, second, retried

    pid, added, first, second_add, second, retried = asyncio.run(run())
    assert (added, second_add) == (ErrorCode.NONE, ErrorCode.NONE)
    assert (first.error_code, first.producer_id, first.producer_epoch) == (ErrorCode.NONE, pid, MAX_EPOCH - 2)
    assert (second.error_code, second.producer_id, second.producer_epoch) == (ErrorCode.NONE, pid + 1, 0)
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (ErrorCode.NONE, pid + 1, 0)
    meta = coordinator.txns["tx"]
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (
        TxnState.COMPLETE_ABORT,
        pid + 1,
        0,
        pid,
    )
    # the markers carried the old id at the last epoch: a zombie of the old id is fenced there
    markers = [h for h, _ in replicas.manager.partitions[("orders", 0)].log.iter_batches() if h.is_control]
    assert [(h.producer_id, h.producer_epoch) for h in markers] == [(pid, MAX_EPOCH - 2), (pid, MAX_EPOCH - 1)]

    taken_over = Setup(replicas, first_id=9000)
    for partition in [p for key, p in replicas.manager.partitions.items() if key[0] == TRANSACTION_STATE_TOPIC]:
        taken_over.coordinator.on_leadership_change(partition, True)
    loaded = taken_over.coordinator.txns["tx"]
    assert (loaded.producer_id, loaded.producer_epoch, loaded.client_version, loaded.previous_producer_id) == (
        pid + 1,
        0,
        2,
        pid,
    )
