"""One transactional id's state at its coordinator, and the transitions Kafka allows between states.

A transition is first *prepared* (``pending`` is set, so concurrent requests for the same id
get CONCURRENT_TRANSACTIONS), then written to __transaction_state, and only *completed* once
that write is committed: the in-memory state never runs ahead of what a new coordinator would
load after a failover.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from strom.clock import wall_ms
from strom.txn.records import TxnLogValue, TxnState

# Kafka's TransactionState.validPreviousStates, less PrepareEpochFence: that is Kafka's in-memory
# step before the PrepareAbort of a fenced epoch, never written; strom prepares that PrepareAbort
# (with the bumped epoch) directly from Ongoing. PrepareAbort from Empty and the Complete states
# is transactions v2's abort of a transaction that added nothing (it still bumps the epoch).
VALID_PREVIOUS = {
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
}

MAX_EPOCH = 32767


class IllegalTransition(Exception):
    pass


@dataclass
class TxnTransition:
    """What a transition will make of the metadata once its record is committed."""

    state: TxnState
    producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    partitions: set[tuple[str, int]]
    start_ms: int
    update_ms: int
    client_version: int = 0
    previous_producer_id: int = -1
    next_producer_id: int = -1

    def log_value(self) -> TxnLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, index in self.partitions:
            by_topic.setdefault(topic, []).append(index)
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            by_topic,
            self.update_ms,
            self.start_ms,
            self.previous_producer_id,
            self.next_producer_id,
            self.client_version,
        )


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    # the epoch before the last bump, so that a producer retrying InitProducerId or EndTxn after
    # its response was lost is recognised (Kafka's lastProducerEpoch)
    last_producer_epoch: int = -1
    pending: TxnState | None = None
    coordinator_partition: int = 0
    # transactions v2 (KIP-890 part 2): the client's transaction version (2: the epoch is bumped
    # by every EndTxn), and the producer ids around an epoch exhausted by those bumps: the id the
    # ending transaction hands over to (next) and the one it came from (previous, for a retry)
    client_version: int = 0
    next_producer_id: int = -1
    previous_producer_id: int = -1
    # monotonic seconds: the transaction timeout and transactional.id.expiration.ms are durations,
    # so a step of the wall clock neither aborts open transactions nor expires idle ids
    started_at: float = field(default_factory=time.monotonic)
    updated_at: float = field(default_factory=time.monotonic)

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue, coordinator_partition: int) -> TxnMetadata:
        partitions = {(t, p) for t, ps in value.partitions.items() for p in ps}
        # another coordinator wrote it: its wall-clock times are all there is to go by
        now, now_ms = time.monotonic(), wall_ms()
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.timeout_ms,
            value.state,
            partitions,
            value.start_ms,
            value.last_update_ms,
            coordinator_partition=coordinator_partition,
            client_version=value.client_transaction_version,
            next_producer_id=value.next_producer_id,
            previous_producer_id=value.previous_producer_id,
            started_at=now - max(0, now_ms - value.start_ms) / 1000,
            updated_at=now - max(0, now_ms - value.last_update_ms) / 1000,
        )

    def prepare(
        self,
        state: TxnState,
        now_ms: int,
        *,
        producer_id: int | None = None,
        epoch: int | None = None,
        timeout_ms: int | None = None,
        add: set[tuple[str, int]] | None = None,
        fencing: bool = False,
        client_version: int | None = None,
        next_producer_id: int | None = None,
        previous_producer_id: int | None = None,
    ) -> TxnTransition:
        """Check the move to ``state`` and mark it pending; the caller writes it, then completes or aborts it."""
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id} is already moving to {self.pending.name}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id} cannot go from {self.state.name} to {state.name}")
        partitions = set(self.partitions)
        start = self.start_ms
        if state == TxnState.ONGOING:
            if self.state != TxnState.ONGOING:
                start = now_ms
                partitions = set()
            partitions |= add or set()
        elif state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.DEAD):
            partitions = set()
        new_epoch = self.producer_epoch if epoch is None else epoch
        # the epoch before a bump is remembered so that a retried InitProducerId is recognised;
        # a fenced epoch is not (Kafka sets lastProducerEpoch to -1 when fencing)
        if fencing:
            last_epoch = -1
        elif new_epoch != self.producer_epoch:
            last_epoch = self.producer_epoch
        else:
            last_epoch = self.last_producer_epoch
        transition = TxnTransition(
            state,
            self.producer_id if producer_id is None else producer_id,
            new_epoch,
            last_epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms,
            partitions,
            start,
            now_ms,
            self.client_version if client_version is None else client_version,
            self.previous_producer_id if previous_producer_id is None else previous_producer_id,
            self.next_producer_id if next_producer_id is None else next_producer_id,
        )
        self.pending = state
        return transition

    def complete(self, transition: TxnTransition) -> None:
        now = time.monotonic()
        if transition.state == TxnState.ONGOING and self.state != TxnState.ONGOING:
            self.started_at = now
        self.updated_at = now
        self.state = transition.state
        self.producer_id = transition.producer_id
        self.last_producer_epoch = transition.last_producer_epoch
        self.producer_epoch = transition.producer_epoch
        self.timeout_ms = transition.timeout_ms
        self.partitions = transition.partitions
        self.start_ms = transition.start_ms
        self.update_ms = transition.update_ms
        self.client_version = transition.client_version
        self.previous_producer_id = transition.previous_producer_id
        self.next_producer_id = transition.next_producer_id
        self.pending = None

    def abandon(self) -> None:
        self.pending = None

    @property
    def sorted_partitions(self) -> list[tuple[str, int]]:
        return sorted(self.partitions)
