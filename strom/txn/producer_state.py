"""Idempotent-producer state of one partition: the last batches of every producer id.

Kafka's rule (KIP-98): a broker remembers the metadata of the last 5 batches of each producer
(a producer keeps at most 5 in flight), so a retry of any of them is answered with its original
offsets instead of being appended twice, and a batch that skips a sequence number is refused
with OUT_OF_ORDER_SEQUENCE_NUMBER. The state is rebuilt from batch headers in the log when a
partition is opened, so deduplication survives a broker restart.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from strom.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from strom.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

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

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

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
        if header.producer_id == NO_PRODUCER_ID or header.base_sequence == NO_SEQUENCE:
            return
        entry = self.producers.get(header.producer_id)
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
        expected = _next_seq(entry.last_seq) if entry.batches else 0
        if header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} sent sequence {header.base_sequence}, expected {expected}"
            )

    def update(self, header: BatchHeader) -> None:
        """Record an appended batch (offsets already assigned)."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_epoch)
        if header.base_sequence != NO_SEQUENCE and not header.is_control:
            entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence, header.base_offset,
                                               header.last_offset, header.max_timestamp))
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)

    def truncate(self) -> None:
        """Forget everything (the log was truncated; the caller rebuilds from what remains)."""
        self.producers.clear()

    def producer_epoch(self, producer_id: int) -> int | None:
        entry = self.producers.get(producer_id)
        return None if entry is None else entry.epoch
