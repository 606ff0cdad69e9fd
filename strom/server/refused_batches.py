"""Idempotent batches this broker refused unwritten, so that the batch right behind one is refused
the same way instead of with OUT_OF_ORDER_SEQUENCE_NUMBER.

A producer keeps up to five requests in flight per partition. When the first is refused without
being written (this broker does not lead the partition yet, the ISR is too small) and the state
changes before the second arrives (the broker has just learned that it leads, the ISR has grown
back), the second starts past the sequence the log expects. Kafka answers it
OUT_OF_ORDER_SEQUENCE_NUMBER. The Java client retries that; librdkafka (up to 2.16 at least,
confluentinc/librdkafka#4953) bumps its producer epoch instead, which restarts its sequences on
every partition, so a batch that was in flight elsewhere with an unknown outcome (its leader's
connection dropped after the write) is written a second time under the new epoch, where no
broker can recognise it. strom's fault campaign saw exactly that after a clean restart of a
leader: the new leader learned of its leadership ~100 ms after the client did.

The second batch is refused with the first one's error and a message saying so, and counts as
refused in its turn, so a third in flight behind it is refused too (the fixed-schedule fault test
saw that: one request refused before the broker learned it led, the next refused in its place, and
the third answered out of order while a batch refused in place did not count). Every client then sends
them all again, in order. A refusal explains only the batch right after it: the same batch sent
again still starts past the log's sequence and gets OUT_OF_ORDER_SEQUENCE_NUMBER, as in Kafka
(the client may have given up on the refused batch).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from strom.protocol.errors import ErrorCode
from strom.protocol.records import BATCH_HEADER_SIZE, BatchHeader
from strom.storage.producer_state import next_sequence

# errors of a produce that wrote nothing and that a producer retries
REFUSALS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
MAX_REMEMBERED = 4096  # oldest forgotten first: a bound, not a size anyone should reach
REMEMBER_S = 30.0  # a client re-sends a refused batch within its retry backoff, well inside this


@dataclass(frozen=True)
class _Refusal:
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    error_code: int
    at: float


def _sequences(records) -> tuple[BatchHeader, int] | None:
    """The first batch header of an idempotent produce and the last sequence of its batches."""
    if records is None or len(records) < BATCH_HEADER_SIZE:
        return None
    first = header = BatchHeader.parse(records, 0)
    if first.producer_id < 0 or first.base_sequence < 0 or first.magic != 2:
        return None
    position = header.size
    while header.size >= BATCH_HEADER_SIZE and position + BATCH_HEADER_SIZE <= len(records):
        header = BatchHeader.parse(records, position)  # unvalidated: a refusal comes before any check
        position += header.size
    return first, header.last_sequence


class RefusedBatches:
    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._refusals: OrderedDict[tuple[str, int, int], _Refusal] = OrderedDict()

    def remember(self, topic: str, partition: int, records, error_code: int) -> None:
        """A produce of ``records`` to this partition was answered ``error_code`` and nothing was written."""
        if error_code not in REFUSALS:
            return
        found = _sequences(records)
        if found is None:
            return
        first, last_sequence = found
        key = (topic, partition, first.producer_id)
        self._refusals.pop(key, None)
        self._refusals[key] = _Refusal(
            first.producer_epoch, first.base_sequence, last_sequence, error_code, self._clock()
        )
        while len(self._refusals) > MAX_REMEMBERED:
            self._refusals.popitem(last=False)

    def explain_gap(self, topic: str, partition: int, records) -> tuple[int, str] | None:
        """The error and message for a batch refused OUT_OF_ORDER_SEQUENCE_NUMBER that starts right
        after a batch this broker refused unwritten; None when it does not."""
        found = _sequences(records)
        if found is None:
            return None
        first, last_sequence = found
        key = (topic, partition, first.producer_id)
        refusal = self._refusals.get(key)
        if refusal is None:
            return None
        if self._clock() - refusal.at > REMEMBER_S:
            del self._refusals[key]
            return None
        if refusal.producer_epoch != first.producer_epoch or first.base_sequence != next_sequence(
            refusal.last_sequence
        ):
            return None
        # refused in its turn, unwritten: the batch behind it, also in flight, is explained by it
        del self._refusals[key]
        self._refusals[key] = _Refusal(
            first.producer_epoch, first.base_sequence, last_sequence, refusal.error_code, self._clock()
        )
        return refusal.error_code, (
            f"sequence {first.base_sequence} follows sequences {refusal.first_sequence}..{refusal.last_sequence} "
            f"of producer {first.producer_id}, which this broker refused unwritten with "
            f"{ErrorCode(refusal.error_code).name}; send them first"
        )
