"""The transactional workload (``--workload txn``) and its checker.

Each producer has its own transactional.id and writes batches of records (``t<producer>:<batch>:<i>``,
keyed over every partition, so one transaction spans several) in one transaction each; every
fifth batch is aborted on purpose. What each batch ended as is recorded: committed (the commit
returned), aborted (the abort returned, or the transaction failed before any commit was sent:
nothing else can become of it), or unknown (a commit was sent and its answer never came, or the
producer failed fatally after it: the coordinator may have written either marker). A fatal error
or a commit that cannot finish within its deadline replaces the producer; the new one's
InitProducerId fences the old epoch and settles its open transaction.

The checker reads the topic with isolation.level=read_committed and requires: every record of
every committed batch exactly once; no record of an aborted batch, nor of a batch never
committed; an unknown batch wholly present or wholly absent; each producer's records in order
within a partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from strom.chaos.workload import ProducerThreads, Verdict, client_logging

ABORT_EVERY = 5
COMMIT_DEADLINE_S = 60.0


@dataclass
class TxnHistory:
    batches: dict[str, list[str]] = field(default_factory=dict)  # batch id -> its values
    committed: set[str] = field(default_factory=set)
    aborted: set[str] = field(default_factory=set)
    unknown: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def settle(self, batch: str, outcome: str) -> None:
        with self.lock:
            getattr(self, outcome).add(batch)

    def acked_count(self) -> int:
        with self.lock:
            return sum(len(self.batches[b]) for b in self.committed)


class _Replace(Exception):
    """The producer cannot go on: a new one (same transactional.id) takes over."""


class TxnProducers(ProducerThreads[TxnHistory]):
    """Transactional producers of batches of ``batch_size`` values, every fifth batch aborted on purpose."""

    kind = "txn-producer"
    drain_s = 90.0
    batch_size = 20

    def _new_history(self) -> TxnHistory:
        return TxnHistory()

    def _producer(self, index: int):
        from confluent_kafka import Producer

        return initialised(
            lambda: Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "transactional.id": f"chaos-txn-{index}",
                    "acks": "all",
                    "linger.ms": 5,
                    "transaction.timeout.ms": 60000,
                    "message.timeout.ms": 60000,
                    "request.timeout.ms": 10000,
                    "retry.backoff.ms": 50,
                    "reconnect.backoff.max.ms": 500,
                    "topic.metadata.refresh.interval.ms": 1000,
                    **client_logging(self._loggers[index]),
                }
            )
        )

    def _run(self, index: int) -> None:
        producer = self._producer(index)
        batch = 0
        while not self._stop.is_set():
            batch_id = f"t{index}:{batch}"
            values = [f"{batch_id}:{i}" for i in range(self.batch_size)]
            with self.history.lock:
                self.history.batches[batch_id] = values
            try:
                self.history.settle(batch_id, self._one(producer, batch, values))
            except _Replace as replaced:
                self.history.settle(batch_id, str(replaced))
                producer = self._producer(index)
            batch += 1

    def _one(self, producer, batch: int, values: list[str]) -> str:
        """One transaction; its outcome (raises _Replace(outcome) when the producer must be replaced)."""
        from confluent_kafka import KafkaException

        try:
            producer.begin_transaction()
            for i, value in enumerate(values):
                key = f"k{(batch * len(values) + i) % self.keys}".encode()
                while True:
                    try:
                        producer.produce(self.topic, value.encode(), key=key)
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.poll(0)
        except KafkaException as e:
            outcome = abandon(producer, e, commit_sent=False)
        else:
            outcome = end_transaction(producer, commit=batch % ABORT_EVERY != ABORT_EVERY - 1)
        if outcome.endswith(REPLACE):
            raise _Replace(outcome.removesuffix(REPLACE))
        return outcome


def initialised(make: Callable[[], Any], timeout_s: float = 120.0) -> Any:
    """A transactional producer from ``make`` whose init_transactions succeeded: while the
    coordinator cannot answer (a fault still held), a new producer tries again, for ``timeout_s``."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        producer = make()
        try:
            producer.init_transactions(30)
            return producer
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


REPLACE = "!"  # ends an outcome after which the producer cannot go on: a new one must fence it


def end_transaction(producer, commit: bool) -> str:
    """Commit the open transaction (retriable errors retried for COMMIT_DEADLINE_S) or abort it:
    "committed" or "aborted", or an outcome ending in REPLACE (see ``abandon``)."""
    from confluent_kafka import KafkaException

    commit_sent = False
    try:
        if not commit:
            producer.abort_transaction(COMMIT_DEADLINE_S)
            return "aborted"
        deadline = time.monotonic() + COMMIT_DEADLINE_S
        while True:
            try:
                commit_sent = True
                producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                return "committed"
            except KafkaException as e:
                if e.args[0].retriable() and time.monotonic() < deadline:
                    continue
                raise
    except KafkaException as e:
        return abandon(producer, e, commit_sent)


def abandon(producer, error, commit_sent: bool) -> str:
    """After ``error`` in a transaction: "aborted" if an abort could end it; else the producer must
    be replaced, and the outcome is "aborted!" (no commit was sent: the new producer's
    InitProducerId aborts it) or "unknown!" (the coordinator may have written either marker)."""
    from confluent_kafka import KafkaException

    if error.args[0].txn_requires_abort():
        try:
            producer.abort_transaction(COMMIT_DEADLINE_S)
            return "aborted"
        except KafkaException:
            pass
    return ("unknown" if commit_sent else "aborted") + REPLACE


def check_txn(history: TxnHistory, read: dict[int, list[tuple[int, str]]], replica_differences: list[str]) -> Verdict:
    seen: dict[str, int] = {}
    batch_seen: dict[str, int] = {}
    out_of_order = []
    for partition, records in read.items():
        last: dict[str, tuple[int, int]] = {}
        for _offset, value in records:
            seen[value] = seen.get(value, 0) + 1
            producer, batch, i = value.split(":")
            batch_id = f"{producer}:{batch}"
            batch_seen[batch_id] = batch_seen.get(batch_id, 0) + 1
            position = (int(batch), int(i))
            if position <= last.get(producer, (-1, -1)):
                out_of_order.append(f"{partition}:{value} after {producer}:{last[producer]}")
            last[producer] = position
    lost, duplicated, anomalies = [], [], []
    for batch_id, values in history.batches.items():
        present = [v for v in values if v in seen]
        duplicated += [v for v in present if seen[v] > 1]
        if batch_id in history.committed:
            lost += [v for v in values if v not in seen]
        elif batch_id in history.aborted and present:
            anomalies.append(f"aborted batch {batch_id}: {len(present)} records visible to read_committed")
        elif batch_id in history.unknown and 0 < len(present) < len(values):
            anomalies.append(f"batch {batch_id} of unknown outcome partly visible ({len(present)}/{len(values)})")
        elif batch_id not in history.committed | history.aborted | history.unknown and present:
            anomalies.append(f"never-committed batch {batch_id}: {len(present)} records visible")
    strangers = [b for b in batch_seen if b not in history.batches]
    anomalies += [f"records of a batch never written: {b}" for b in strangers]
    committed = sum(len(history.batches[b]) for b in history.committed)
    failed = sum(len(history.batches[b]) for b in history.aborted | history.unknown)
    landed = sum(1 for b in history.unknown for v in history.batches[b] if v in seen)
    return Verdict(
        committed,
        failed,
        sum(len(r) for r in read.values()),
        sorted(lost),
        sorted(set(duplicated)),
        [],
        out_of_order,
        landed,
        replica_differences,
        anomalies,
    )
