"""Idempotent-producer state of one partition: the last batches of every producer id.

Kafka's rule (KIP-98): a broker remembers the metadata of the last 5 batches of each producer
(a producer keeps at most 5 in flight), so a retry of any of them is answered with its original
offsets instead of being appended twice, and a batch that skips a sequence number is refused
with OUT_OF_ORDER_SEQUENCE_NUMBER. The state is rebuilt from batch headers in the log when a
partition is opened, so deduplication survives a broker restart.

Transactions add two things per partition: the first offset of each producer's open
transaction, and the transactions completed but whose marker is not yet below the high
watermark. Both hold the last stable offset (LSO) back: a read_committed consumer must not read
past the first of them, since until the marker is committed a new leader could still see the
transaction as open (Kafka's "unreplicated transactions").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from strom.protocol.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from strom.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader
from strom.storage.producer_snapshot import SnapshotEntry
from strom.storage.txn_index import AbortedTxn

BATCHES_REMEMBERED = 5
INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_REMEMBERED))
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of the last marker: an older coordinator's markers are fenced
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def next_sequence(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # completed transactions (first offset, marker offset) whose marker is not yet below the HW
        self.unreplicated: deque[tuple[int, int]] = deque()

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The remembered batch this one retries, if any (same producer, epoch and sequences)."""
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            return None
        for batch in entry.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None

    def check(self, header: BatchHeader) -> None:
        """Raise unless ``header`` is the next batch of its producer (call after find_duplicate)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if header.base_sequence == NO_SEQUENCE:  # transactional offset commits: no sequence, but epochs
            if entry is not None and header.producer_epoch < entry.epoch:
                raise InvalidProducerEpochError(
                    f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}"
                )
            return
        if entry is None:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} is unknown here and its first batch has sequence "
                    f"{header.base_sequence}, expected 0"
                )
            return
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}"
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} new epoch {header.producer_epoch} must start at sequence 0, "
                    f"got {header.base_sequence}"
                )
            return
        expected = next_sequence(entry.last_seq) if entry.batches else 0
        if header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence}, expected {expected}"
            )

    def update(self, header: BatchHeader) -> None:
        """Record an appended batch (offsets already assigned)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self._entry_for(header)
        if header.base_sequence != NO_SEQUENCE and not header.is_control:
            entry.batches.append(
                BatchMetadata(
                    header.base_sequence,
                    header.last_sequence,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                )
            )
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        if header.is_transactional and not header.is_control and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = header.base_offset
            self.ongoing[header.producer_id] = header.base_offset

    def _entry_for(self, header: BatchHeader) -> ProducerEntry:
        """The producer's entry; a newer epoch starts a fresh one (sequences restart at 0)."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        elif header.producer_epoch != entry.epoch:
            fresh = ProducerEntry(
                header.producer_epoch,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_first_offset=entry.current_txn_first_offset,
            )
            entry = self.producers[header.producer_id] = fresh
        return entry

    # -- transactions ------------------------------------------------------------------------------
    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced producer epoch or an older coordinator (leader appends)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} has epoch {producer_epoch}, older than {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} comes from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}"
            )

    def complete_txn(self, header: BatchHeader, commit: bool, coordinator_epoch: int) -> AbortedTxn | None:
        """Record a marker (offsets assigned). Returns the index entry when it aborted a transaction."""
        entry = self._entry_for(header)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        first = entry.current_txn_first_offset
        if first < 0:
            return None  # a marker for a transaction with no data here (e.g. a retried marker)
        entry.current_txn_first_offset = -1
        del self.ongoing[header.producer_id]
        marker_offset = header.base_offset
        self.unreplicated.append((first, marker_offset))
        if commit:
            return None
        still_open = min(self.ongoing.values(), default=marker_offset + 1)
        return AbortedTxn(header.producer_id, first, marker_offset, min(still_open, marker_offset + 1))

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset a read_committed consumer may not see yet (None: nothing holds the LSO)."""
        unreplicated = self.unreplicated
        while unreplicated and unreplicated[0][1] < high_watermark:
            unreplicated.popleft()
        if not self.ongoing and not unreplicated:
            return None
        return min(min(self.ongoing.values(), default=2**63), min((f for f, _ in unreplicated), default=2**63))

    def truncate(self) -> None:
        """Forget everything (the log was truncated; the caller rebuilds from what remains)."""
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    # -- snapshots ---------------------------------------------------------------------------------
    def snapshot_entries(self) -> list[SnapshotEntry]:
        entries = []
        for producer_id, entry in self.producers.items():
            last = entry.batches[-1] if entry.batches else None
            entries.append(
                SnapshotEntry(
                    producer_id,
                    entry.epoch,
                    last.last_seq if last else NO_SEQUENCE,
                    last.last_offset if last else -1,
                    last.last_offset - last.first_offset if last else 0,
                    entry.last_timestamp,
                    entry.coordinator_epoch,
                    entry.current_txn_first_offset,
                )
            )
        return entries

    def load_snapshot(self, entries: list[SnapshotEntry]) -> None:
        """Start from a snapshot (the log replays the batches after its offset on top)."""
        self.truncate()
        for e in entries:
            entry = self.producers[e.producer_id] = ProducerEntry(
                e.epoch,
                last_timestamp=e.timestamp,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_first_offset=e.current_txn_first_offset,
            )
            if e.last_sequence != NO_SEQUENCE and e.last_offset >= 0:
                first_seq = (e.last_sequence - e.offset_delta) % (INT32_MAX + 1)
                entry.batches.append(
                    BatchMetadata(
                        first_seq, e.last_sequence, e.last_offset - e.offset_delta, e.last_offset, e.timestamp
                    )
                )
            if e.current_txn_first_offset >= 0:
                self.ongoing[e.producer_id] = e.current_txn_first_offset

    def producer_epoch(self, producer_id: int) -> int | None:
        entry = self.producers.get(producer_id)
        return None if entry is None else entry.epoch
