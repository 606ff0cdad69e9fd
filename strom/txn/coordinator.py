"""The transaction coordinator (KIP-98): transactional ids, their producer epochs and their transactions.

A broker coordinates the transactional ids whose __transaction_state partition it leads, just
as the group coordinator follows __consumer_offsets. Every state change is written to that
partition and committed (acks=all) before it is answered, so a new coordinator elected after
a failure loads exactly what clients were told; it then finishes every transaction it finds
in PrepareCommit or PrepareAbort, and keeps timing out the ones still Ongoing.

Commit and abort are two-phase, as in Kafka: EndTxn writes PrepareCommit/PrepareAbort and is
answered; the markers are then written to every partition of the transaction, and the
CompleteCommit/CompleteAbort record ends it. Until then the id answers
CONCURRENT_TRANSACTIONS, which clients retry.

Transactions v2 (KIP-890 part 2, a client on EndTxn v5): the partitions are added by the writes
themselves (Produce v12 and TxnOffsetCommit v5 ask the coordinator to add their partition, not
to verify it), and every EndTxn bumps the producer epoch: PrepareCommit/PrepareAbort are written
with the next epoch, the markers carry it, so a zombie of the old epoch is fenced on every
partition the transaction touched, and the client is answered the new epoch (or, when the epoch
is exhausted, a new producer id with epoch 0). A transaction that added nothing may be aborted,
which only bumps the epoch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strom.clock import wall_ms
from strom.group.offset_store import OFFSETS_TOPIC
from strom.group.records import RecordFormatError, partition_for_group
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode, KafkaError
from strom.protocol.records import NewRecord, build_batch, decode_batch_records
from strom.replication.client import BrokerConnectionError
from strom.txn import records as schema
from strom.txn.markers import MarkerChannel
from strom.txn.metadata import MAX_EPOCH, IllegalTransition, TxnMetadata, TxnTransition
from strom.txn.records import TxnState

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.partition import Partition
    from strom.replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
STATE_WRITE_TIMEOUT_S = 10.0
# How long a request for an id that is mid-transition waits for it to settle before answering
# CONCURRENT_TRANSACTIONS (Kafka answers at once, and clients back off for 20-100 ms).
SETTLE_WAIT_S = 1.0
VERIFY_TIMEOUT_S = 5.0
ADD_PARTITIONS_TO_TXN_VERIFY_VERSION = 4
# a broker adding a partition for a transactions-v2 write (verify_only false from a broker)
ADD_PARTITIONS_TO_TXN_ADD_VERSION = 5
TRANSACTION_VERSION_2 = 2

_RETRIABLE_WRITE_ERRORS = {
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
}


def _now_ms() -> int:
    """Transaction timestamps as written to __transaction_state (wall clock); timeouts are monotonic."""
    return wall_ms()


@dataclass
class InitResult:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


class TxnCoordinatorConfig(Protocol):
    """The broker configs the transaction coordinator follows (``BrokerConfig`` has them all)."""

    @property
    def transaction_state_log_num_partitions(self) -> int: ...
    @property
    def transaction_max_timeout_ms(self) -> int: ...
    @property
    def transactional_id_expiration_ms(self) -> int: ...
    @property
    def transaction_abort_timed_out_transaction_cleanup_interval_ms(self) -> int: ...
    @property
    def transaction_remove_expired_transaction_cleanup_interval_ms(self) -> int: ...


class TransactionCoordinator:
    """Coordinates the transactional ids of the __transaction_state partitions this broker leads
    (``replicas``; ``metadata`` says who leads the others). ``markers`` writes the transactions'
    markers; ``next_producer_id`` hands out producer ids (the cluster-wide blocks of
    ``ProducerIdManager``); ``ensure_offsets_topic`` and ``offsets_partition_for`` are the group
    coordinator's side of AddOffsetsToTxn; ``stopping`` ends the timers with the broker."""

    def __init__(
        self,
        broker_id: int,
        config: TxnCoordinatorConfig,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        markers: MarkerChannel,
        *,
        next_producer_id: Callable[[], int],
        ensure_offsets_topic: Callable[[], None],
        offsets_partition_for: Callable[[str], int],
        stopping: Callable[[], bool],
    ):
        self.broker_id = broker_id
        self.config = config
        self.metadata = metadata
        self._replicas = replicas
        self.markers = markers
        self._next_producer_id = next_producer_id
        self._ensure_offsets_topic = ensure_offsets_topic
        self._offsets_partition_for = offsets_partition_for
        self._stopping = stopping
        self.txns: dict[str, TxnMetadata] = {}
        self.owned: set[int] = set()
        self._completions: set[asyncio.Task] = set()
        self._settled: dict[str, asyncio.Event] = {}

    # -- placement and ownership ---------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        info = self.metadata.topics.get(TRANSACTION_STATE_TOPIC)
        return info.partition_count if info else self.config.transaction_state_log_num_partitions

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's Utils.abs(transactionalId.hashCode) % partitions, so strom picks Kafka's partition."""
        return partition_for_group(transactional_id, self.num_partitions)

    def coordinator_epoch(self, index: int) -> int:
        """The state partition's leader epoch: markers carry it so that a deposed coordinator's lose."""
        partition = self._replicas.partitions.get((TRANSACTION_STATE_TOPIC, index))
        return partition.leader_epoch if partition is not None else -1

    def on_leadership_change(self, partition: Partition, is_leader: bool) -> None:
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        if is_leader and partition.index not in self.owned:
            self.owned.add(partition.index)
            self._load(partition)
        elif not is_leader and partition.index in self.owned:
            self.owned.discard(partition.index)
            for txn_id in [t for t, m in self.txns.items() if m.coordinator_partition == partition.index]:
                del self.txns[txn_id]

    def _load(self, partition: Partition) -> None:
        loaded: dict[str, TxnMetadata] = {}
        for txn_id, value in _replay(partition):
            if value is None:
                loaded.pop(txn_id, None)
            else:
                loaded[txn_id] = TxnMetadata.from_log(txn_id, value, partition.index)
        for txn_id, meta in loaded.items():
            self.txns[txn_id] = meta
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                # the previous coordinator died between the two phases: finish what it promised
                self._complete_later(meta, meta.state == TxnState.PREPARE_COMMIT)
        if loaded:
            log.info("loaded %d transactional ids from %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, partition.index)

    def coordinator_error(self, transactional_id: str | None) -> int:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if TRANSACTION_STATE_TOPIC not in self.metadata.topics:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.partition_for(transactional_id) not in self.owned or self._replicas.fenced:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def _owns(self, index: int, epoch: int) -> bool:
        return index in self.owned and self.coordinator_epoch(index) == epoch

    # -- writing state ---------------------------------------------------------------------------------
    async def _write(self, meta: TxnMetadata, transition: TxnTransition, tombstone: bool = False) -> int:
        """Write a prepared transition and complete it once committed; an error code (NONE on success)."""
        index = meta.coordinator_partition
        epoch = self.coordinator_epoch(index)
        value = None if tombstone else schema.encode_value(transition.log_value())
        batch = build_batch(
            [NewRecord(value, key=schema.encode_key(meta.transactional_id), timestamp=transition.update_ms)]
        )
        try:
            return await self._append_and_complete(meta, transition, index, epoch, batch)
        finally:
            event = self._settled.pop(meta.transactional_id, None)
            if event is not None:
                event.set()

    async def _append_and_complete(
        self, meta: TxnMetadata, transition: TxnTransition, index: int, epoch: int, batch: bytes
    ) -> int:
        try:
            await self._replicas.append_committed(TRANSACTION_STATE_TOPIC, index, batch, STATE_WRITE_TIMEOUT_S)
        except KafkaError as exc:
            meta.abandon()
            log.info(
                "could not write the state of %s to %s-%d: %s",
                meta.transactional_id,
                TRANSACTION_STATE_TOPIC,
                index,
                exc,
            )
            if exc.error_code in _RETRIABLE_WRITE_ERRORS:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return ErrorCode.NOT_COORDINATOR
        if not self._owns(index, epoch) or self.txns.get(meta.transactional_id) is not meta:
            meta.abandon()
            return ErrorCode.NOT_COORDINATOR
        meta.complete(transition)
        return ErrorCode.NONE

    async def _settle(self, meta: TxnMetadata) -> None:
        """Wait (bounded) while the id is between states: the transition in flight, or the markers
        of a commit/abort, usually finish within milliseconds, and answering
        CONCURRENT_TRANSACTIONS would cost the client a retry backoff instead."""
        deadline = time.monotonic() + SETTLE_WAIT_S
        while meta.pending is not None or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            left = deadline - time.monotonic()
            if left <= 0 or self.txns.get(meta.transactional_id) is not meta:
                return
            event = self._settled.setdefault(meta.transactional_id, asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), left)
            except TimeoutError:
                return

    # -- InitProducerId --------------------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> InitResult:
        error = self.coordinator_error(transactional_id)
        if error:
            return InitResult(error)
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        meta = self.txns.get(transactional_id)
        fresh = meta is None
        if meta is None:
            meta = self.txns[transactional_id] = TxnMetadata(
                transactional_id,
                self._next_producer_id(),
                -1,
                timeout_ms,
                coordinator_partition=self.partition_for(transactional_id),
            )
        await self._settle(meta)
        if meta.pending is not None or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if producer_id >= 0 and not fresh:  # KIP-360: a known producer re-initialising
            if (
                meta.last_producer_epoch >= 0
                and (producer_id, producer_epoch) == (meta.producer_id, meta.last_producer_epoch)
                and meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
            ):
                return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)  # a retry
            if producer_id != meta.producer_id:
                return InitResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if producer_epoch != meta.producer_epoch:
                return InitResult(ErrorCode.PRODUCER_FENCED)
        if meta.state == TxnState.ONGOING:
            # A new incarnation of the producer: fence the old one and abort what it left open;
            # the client retries and then gets the next epoch.
            await self._fence_and_abort(meta)
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if meta.state == TxnState.DEAD:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        new_id, new_epoch = meta.producer_id, meta.producer_epoch + 1
        if new_epoch >= MAX_EPOCH - 1:  # the epoch is exhausted: a new producer id, as Kafka
            new_id, new_epoch = self._next_producer_id(), 0
        transition = meta.prepare(TxnState.EMPTY, _now_ms(), producer_id=new_id, epoch=new_epoch, timeout_ms=timeout_ms)
        code = await self._write(meta, transition)
        if code:
            if fresh and self.txns.get(transactional_id) is meta and meta.producer_epoch < 0:
                del self.txns[transactional_id]
            return InitResult(code)
        return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)

    # -- adding partitions -------------------------------------------------------------------------
    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[int, TxnMetadata | None]:
        error = self.coordinator_error(transactional_id)
        if error:
            return error, None
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, meta

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        tv2: bool = False,
    ) -> int:
        """Add partitions to the producer's transaction, starting one if none is open (``tv2``: a
        write of a transactions-v2 client adding its own partition)."""
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        assert meta is not None  # _check_producer returns one with NONE
        wanted = set(partitions)
        await self._settle(meta)
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)  # it may have moved on
        if error:
            return error
        assert meta is not None
        if meta.pending is not None or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
            return ErrorCode.NONE
        try:
            transition = meta.prepare(
                TxnState.ONGOING, _now_ms(), add=wanted, client_version=TRANSACTION_VERSION_2 if tv2 else None
            )
        except IllegalTransition:
            return ErrorCode.INVALID_TXN_STATE
        return await self._write(meta, transition)

    def check_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn v4 verify_only: which partitions the open transaction has added."""
        partitions = list(partitions)
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error:
            return {tp: error for tp in partitions}
        assert meta is not None  # _check_producer returns one with NONE
        if meta.state != TxnState.ONGOING:
            return {tp: ErrorCode.INVALID_TXN_STATE for tp in partitions}
        return {tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        add: bool = False,
    ) -> dict[tuple[str, int], int]:
        """KIP-890 part 1 for a partition leader: ask the coordinator whether the transaction added
        these; with ``add`` (part 2, transactions v2) ask it to add them."""
        if TRANSACTION_STATE_TOPIC not in self.metadata.topics:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        index = self.partition_for(transactional_id)
        leader = self.metadata.leader_of(TRANSACTION_STATE_TOPIC, index)
        if leader == self.broker_id:
            if add:
                code = await self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, tv2=True)
                return dict.fromkeys(partitions, code)
            return self.check_partitions(transactional_id, producer_id, producer_epoch, partitions)
        if leader < 0:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        request = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": not add,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        version = ADD_PARTITIONS_TO_TXN_ADD_VERSION if add else ADD_PARTITIONS_TO_TXN_VERIFY_VERSION
        try:
            response = await self.markers.peers.request(
                leader, ApiKey.ADD_PARTITIONS_TO_TXN, version, request, VERIFY_TIMEOUT_S
            )
        except BrokerConnectionError as exc:
            log.info("verifying %s with coordinator %d: %s", transactional_id, leader, exc)
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in partitions}
        if response.error_code:
            return {tp: int(response.error_code) for tp in partitions}
        codes: dict[tuple[str, int], int] = {tp: ErrorCode.INVALID_TXN_STATE for tp in partitions}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    codes[(topic.name, p.partition_index)] = int(p.partition_error_code)
        return codes

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        """The __consumer_offsets partition that AddOffsetsToTxn adds for a group."""
        self._ensure_offsets_topic()
        return OFFSETS_TOPIC, self._offsets_partition_for(group_id)

    # -- ending transactions -----------------------------------------------------------------------
    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, tv2: bool = False
    ) -> InitResult:
        """EndTxn: the error code, and for transactions v2 the producer id and epoch to go on with."""
        if tv2:
            return await self._end_txn_v2(transactional_id, producer_id, producer_epoch, commit)
        return InitResult(await self._end_txn_v1(transactional_id, producer_id, producer_epoch, commit))

    async def _end_txn_v1(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        error, meta = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        assert meta is not None  # _check_producer returns one with NONE
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = meta.state
        if state == TxnState.ONGOING:
            return await self._prepare_end(meta, commit, meta.producer_epoch)
        done, preparing = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        if state == done:
            return ErrorCode.NONE  # a retry after the answer was lost
        if state == preparing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    async def _end_txn_v2(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> InitResult:
        error = self.coordinator_error(transactional_id)
        if error:
            return InitResult(error)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return InitResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        await self._settle(meta)
        if self.txns.get(transactional_id) is not meta:
            return InitResult(ErrorCode.NOT_COORDINATOR)
        if meta.pending is not None:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        done, preparing = (
            (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT)
            if commit
            else (TxnState.COMPLETE_ABORT, TxnState.PREPARE_ABORT)
        )
        # a retry whose answer was lost: the client still has the epoch (or id) before the bump
        retried = (producer_id == meta.producer_id and producer_epoch == meta.last_producer_epoch >= 0) or (
            producer_id == meta.previous_producer_id >= 0 and meta.producer_epoch == 0
        )
        if retried and meta.state in (done, preparing):
            if meta.state == preparing:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
        if producer_id != meta.producer_id:
            return InitResult(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch != meta.producer_epoch:
            return InitResult(ErrorCode.PRODUCER_FENCED)
        idle = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        if meta.state == TxnState.ONGOING or (not commit and meta.state in idle):
            epoch, next_id = min(producer_epoch + 1, MAX_EPOCH), -1
            if epoch >= MAX_EPOCH - 1:  # the epochs are running out: the markers take the last, then a new id
                next_id = self._next_producer_id()
            code = await self._prepare_end(
                meta, commit, epoch, next_producer_id=next_id, client_version=TRANSACTION_VERSION_2
            )
            if code:
                return InitResult(code)
            if meta.next_producer_id >= 0:
                return InitResult(ErrorCode.NONE, meta.next_producer_id, 0)
            return InitResult(ErrorCode.NONE, meta.producer_id, meta.producer_epoch)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        return InitResult(ErrorCode.INVALID_TXN_STATE)

    async def _prepare_end(
        self,
        meta: TxnMetadata,
        commit: bool,
        epoch: int,
        fencing: bool = False,
        next_producer_id: int | None = None,
        client_version: int | None = None,
    ) -> int:
        transition = meta.prepare(
            TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
            _now_ms(),
            epoch=epoch,
            fencing=fencing,
            next_producer_id=next_producer_id,
            client_version=client_version,
        )
        code = await self._write(meta, transition)
        if code == ErrorCode.NONE:
            self._complete_later(meta, commit)
        return code

    async def _fence_and_abort(self, meta: TxnMetadata, timed_out: bool = False) -> int:
        """Abort an open transaction under the next epoch, so that its producer is fenced everywhere.

        A transactions-v2 client whose transaction ``timed_out`` is not fenced for good, as in
        Kafka 4: its writes of the old epoch are refused (INVALID_PRODUCER_EPOCH, abortable to it),
        and its EndTxn(abort) with that epoch is taken as a retry of this abort and answered the
        new epoch, so the producer carries on. A new instance (InitProducerId) fences outright.
        """
        epoch = meta.producer_epoch + 1 if meta.producer_epoch + 1 < MAX_EPOCH else meta.producer_epoch
        fencing = not (timed_out and meta.client_version >= TRANSACTION_VERSION_2)
        log.info(
            "aborting the open transaction of %s (producer %d)%s and %s epoch %d",
            meta.transactional_id,
            meta.producer_id,
            " that timed out" if timed_out else "",
            "fencing" if fencing else "bumping",
            meta.producer_epoch,
        )
        return await self._prepare_end(meta, False, epoch, fencing=fencing)

    def _complete_later(self, meta: TxnMetadata, commit: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._send_markers_and_complete(meta, commit))
        self._completions.add(task)
        task.add_done_callback(self._completions.discard)

    async def _send_markers_and_complete(self, meta: TxnMetadata, commit: bool) -> None:
        """Write the markers, then the Complete state. A new leader epoch of the state partition
        that this broker goes on leading (a follower left its ISR) is no change of coordinator:
        only a change of leader reloads the partition (``on_leadership_change``), so the markers
        go on here under the new epoch; stopping at it left the transaction in PrepareX for good
        (CONCURRENT_TRANSACTIONS to its producer, the last stable offset stuck on its partitions)."""
        index = meta.coordinator_partition

        def current() -> bool:
            return index in self.owned and self.txns.get(meta.transactional_id) is meta

        try:
            written = False
            while not written and current() and not self._stopping():
                epoch = self.coordinator_epoch(index)

                def still_coordinator(epoch: int = epoch) -> bool:
                    return current() and self.coordinator_epoch(index) == epoch

                written = await self.markers.write(
                    meta.producer_id, meta.producer_epoch, commit, epoch, meta.sorted_partitions, still_coordinator
                )
            backoff = 0.05
            while written and current():
                if meta.pending is None:
                    state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
                    if meta.next_producer_id >= 0:  # the epoch is exhausted: go on under the new id
                        transition = meta.prepare(
                            state,
                            _now_ms(),
                            producer_id=meta.next_producer_id,
                            epoch=0,
                            previous_producer_id=meta.producer_id,
                            next_producer_id=-1,
                        )
                    else:
                        transition = meta.prepare(state, _now_ms())
                    if await self._write(meta, transition) == ErrorCode.NONE:
                        return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        except Exception:
            log.exception(
                "finishing the transaction of %s failed; the next coordinator will finish it", meta.transactional_id
            )

    # -- timeouts and expiry -----------------------------------------------------------------------
    async def abort_timed_out(self) -> None:
        """Abort transactions open longer than their timeout (transaction.abort.timed.out...interval.ms)."""
        now = time.monotonic()
        for meta in list(self.txns.values()):
            if (
                meta.state == TxnState.ONGOING
                and meta.pending is None
                and now > meta.started_at + meta.timeout_ms / 1000
            ):
                await self._fence_and_abort(meta, timed_out=True)

    async def expire_transactional_ids(self) -> None:
        """Forget ids idle for transactional.id.expiration.ms: a tombstone, then gone from memory."""
        now = time.monotonic()
        idle = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        for meta in list(self.txns.values()):
            if (
                meta.state in idle
                and meta.pending is None
                and (now - meta.updated_at) * 1000 > self.config.transactional_id_expiration_ms
            ):
                transition = meta.prepare(TxnState.DEAD, _now_ms())
                if await self._write(meta, transition, tombstone=True) == ErrorCode.NONE:
                    self.txns.pop(meta.transactional_id, None)
                    log.info("transactional id %s expired", meta.transactional_id)

    async def run_timers(self) -> None:
        """Both periodic checks, each on its own interval."""
        abort_every = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        expire_every = self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
        next_expiry = time.monotonic() + expire_every
        while not self._stopping():
            await asyncio.sleep(abort_every)
            try:
                await self.abort_timed_out()
                if time.monotonic() >= next_expiry:
                    next_expiry = time.monotonic() + expire_every
                    await self.expire_transactional_ids()
            except Exception:
                log.exception("transaction timers failed; retrying")

    async def shutdown(self) -> None:
        for task in list(self._completions):
            task.cancel()
        await asyncio.gather(*self._completions, return_exceptions=True)
        self.markers.peers.close()

    # -- describing --------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        error = self.coordinator_error(transactional_id)
        if error:
            return error, None
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_epoch < 0:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int) -> list[TxnMetadata]:
        now = time.monotonic()
        found = []
        for meta in self.txns.values():
            if meta.producer_epoch < 0:
                continue
            if states and meta.state.display_name not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (
                meta.state != TxnState.ONGOING or (now - meta.started_at) * 1000 < min_duration_ms
            ):
                continue
            found.append(meta)
        return sorted(found, key=lambda m: m.transactional_id)


def _replay(partition: Partition):
    """Every (transactional id, value or None) of a state partition, in offset order."""
    for header, chunk in partition.log.iter_batches():
        if header.is_control:
            continue
        for record in decode_batch_records(chunk, header):
            if record.key is None:
                continue
            try:
                yield schema.decode_key(record.key), None if record.value is None else schema.decode_value(record.value)
            except RecordFormatError as exc:
                log.warning("skipping unreadable record at %d in %s: %s", record.offset, partition.log.directory, exc)
