"""The queue workload and its checker.

Several idempotent acks=all producers write unique values (``<producer>:<sequence>``, keyed, so
each producer's values of one key go to one partition in order) and record what each delivery
report said. After the faults are healed the whole topic is read back, and the history is
checked the way a user would: every acknowledged value is there exactly once, at the offset it
was acknowledged at, in each producer's order; values whose delivery failed may or may not be
there (the client was told the outcome is unknown only for timeouts) and are counted apart.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, Self, TypeVar

HistoryT = TypeVar("HistoryT")


class GroupChecks(Protocol):
    """What a verdict and the campaign read of the consumer group's checks (strom.chaos.group's
    GroupVerdict, which imports this module: the type is named here, not imported)."""

    @property
    def ok(self) -> bool: ...
    @property
    def watermark_back_after_election(self) -> list[str]: ...
    def summary(self) -> str: ...


@dataclass
class History:
    acked: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # value -> (partition, offset)
    failed: dict[str, str] = field(default_factory=dict)  # value -> error
    fatal: list[str] = field(default_factory=list)  # fatal producer errors (each producer was replaced)


@dataclass
class Verdict:
    acknowledged: int
    failed: int
    read: int
    lost: list[str]
    duplicated: list[str]
    moved: list[str]  # acknowledged at one offset, read at another
    out_of_order: list[str]
    failed_but_present: int  # indeterminate outcomes that did land: allowed
    replica_differences: list[str]
    anomalies: list[str] = field(default_factory=list)  # the transactional checker's: aborted records read, ...
    # acknowledged without an offset: librdkafka acknowledges a request that failed with a retriable
    # error once a later one of the same producer succeeds (its "implicit ack"), offset unknown
    offset_unknown: int = 0
    group: GroupChecks | None = None  # the consumer group's checks (strom.chaos.group), when a group ran
    # the producers' own account of each producer epoch bump (their librdkafka logs, when kept): an
    # idempotent producer that bumps its epoch restarts its sequences, so a batch it re-sends after
    # the bump is not recognised as a retry by any broker
    epoch_bumps: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.moved
            or self.out_of_order
            or self.replica_differences
            or self.anomalies
            or (self.group is not None and not self.group.ok)
        )

    def summary(self) -> str:
        return (
            f"acked {self.acknowledged}, failed {self.failed} ({self.failed_but_present} of them landed), "
            f"read {self.read}, lost {len(self.lost)}, duplicated {len(self.duplicated)}, "
            f"moved {len(self.moved)}, out of order {len(self.out_of_order)}, "
            f"replica differences {len(self.replica_differences)}"
            + (f", anomalies {len(self.anomalies)}" if self.anomalies else "")
            + (f", acknowledged without an offset {self.offset_unknown}" if self.offset_unknown else "")
            + (f", producer epoch bumps {len(self.epoch_bumps)}" if self.epoch_bumps else "")
            + (f"; {self.group.summary()}" if self.group is not None else "")
        )


class ProducerThreads(Generic[HistoryT]):
    """``count`` producer threads writing until ``stop()``, the base of both workloads.

    With ``log_dir``, each producer's librdkafka log (with its idempotence debug context) goes to
    ``<kind>-<index>.log`` there: a duplicate is only explained by the client's side of it,
    such as when and why it bumped its producer epoch.
    """

    kind = "producer"
    drain_s = 60.0  # how long stop() lets the producers deliver what they hold
    history: HistoryT

    def __init__(self, bootstrap: str, topic: str, count: int = 2, keys: int = 12, log_dir: Path | None = None):
        self.bootstrap = bootstrap
        self.topic = topic
        self.count = count
        self.keys = keys
        self.history = self._new_history()
        self._loggers = [client_logger(log_dir, f"{self.kind}-{i}") for i in range(count)]
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"chaos-{self.kind}-{i}", daemon=True)
            for i in range(count)
        ]

    def start(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> HistoryT:
        self._stop.set()
        for thread in self._threads:
            thread.join(self.drain_s + 10)
        for logger in self._loggers:
            close_client_logger(logger)
        return self.history

    def _new_history(self) -> HistoryT:
        raise NotImplementedError

    def _run(self, index: int) -> None:
        raise NotImplementedError


class Producers(ProducerThreads[History]):
    """Idempotent producers of unique values, each delivery report kept in ``history``."""

    interval_s = 1.0 / 400  # each producer's pace

    def _new_history(self) -> History:
        return History()

    def _producer(self, index: int, fatal: list):
        from confluent_kafka import Producer

        def on_error(error) -> None:
            if error.fatal():
                fatal.append(error)

        # with an error_cb, a fatal error is reported here rather than raised from poll() ahead of
        # the delivery reports still queued: acknowledgements received before it are not missed
        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 10000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": on_error,
                **client_logging(self._loggers[index]),
            }
        )

    def _run(self, index: int) -> None:
        from confluent_kafka import KafkaError, KafkaException

        history = self.history
        fatal: list = []
        producer = self._producer(index, fatal)
        # a replaced producer is kept until this thread ends: its destructor serves delivery reports,
        # and should do so here, not on whichever thread happens to drop the last reference
        retired = []

        def report(err, msg) -> None:
            # no lock: a dict store is atomic under the GIL; with a lock taken here a run deadlocked after a
            # fatal error replaced a producer (every thread waiting on it, its holder never found)
            value = msg.value().decode()
            if err is None:
                history.acked[value] = (msg.partition(), msg.offset())
            else:
                history.failed[value] = str(err)

        sequence = 0
        while not self._stop.is_set():
            value = f"{index}:{sequence}"
            key = f"k{sequence % self.keys}".encode()
            try:
                try:
                    producer.produce(self.topic, value.encode(), key=key, on_delivery=report)
                    sequence += 1
                except BufferError:
                    pass
                producer.poll(self.interval_s)
            except KafkaException as e:
                error = e.args[0]
                if not (error.fatal() or error.code() == KafkaError._FATAL):
                    raise
                fatal.append(error)
            if fatal:
                # librdkafka gives up on an idempotent producer whose sequence the broker's log
                # contradicts (what an unclean election leaves): its last reports are taken, then a
                # new producer (a new producer id) goes on
                history.fatal.append(f"producer {index} at {value}: {fatal[0].str()}")
                try:
                    producer.flush(10)
                except KafkaException:
                    pass
                retired.append(producer)
                fatal = []
                producer = self._producer(index, fatal)
                sequence += 1  # maybe not written: never reused
        producer.flush(60)
        for old in retired:
            try:
                old.flush(0)
            except KafkaException:
                pass


def client_logger(log_dir: Path | None, name: str) -> logging.Logger | None:
    """A logger that keeps one client's librdkafka log in ``log_dir/<name>.log`` (None without a
    directory). It is not registered with ``logging``: a campaign makes new ones every run."""
    if log_dir is None:
        return None
    logger = logging.Logger(f"strom.chaos.{name}", logging.DEBUG)
    handler = logging.FileHandler(log_dir / f"{name}.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    return logger


def close_client_logger(logger: logging.Logger | None) -> None:
    if logger is not None:
        for handler in logger.handlers:
            handler.close()


def epoch_bumps(log_dir: Path) -> list[str]:
    """The line of the producers' logs in ``log_dir`` where librdkafka begins each producer epoch
    bump, which ends with why ("... epoch bump for 2 partition(s) with in-flight requests: skipped
    sequence numbers"); the request that caused it is logged just before (ERRSEQ)."""
    lines: list[str] = []
    for path in sorted(log_dir.glob("*producer-*.log")):
        with path.open(errors="replace") as file:
            lines.extend(f"{path.stem}: {line.strip()}" for line in file if "epoch bump for" in line)
    return lines


def client_logging(logger: logging.Logger | None) -> dict:
    """A client's logging settings: to ``logger`` with the idempotence and transaction debug context
    (a few lines per producer id, epoch bump and leader change), else dropped."""
    if logger is None:
        return {"logger": _quiet_logger()}
    return {"logger": logger, "debug": "eos"}


def _quiet_logger(name: str = "strom.chaos.librdkafka"):
    # connection failures are the point of a chaos run: the history, not librdkafka, says what happened
    logger = logging.getLogger(name)
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def log_end_offsets(
    consumer, topic: str, partitions: int, deadline: float, errors: dict[int, str] | None = None
) -> dict[int, int]:
    """Each partition's end offset as of now (those not known by ``deadline`` are missing, and
    ``errors`` keeps the last error each of them got)."""
    from confluent_kafka import KafkaException, TopicPartition

    ends: dict[int, int] = {}
    while len(ends) < partitions and time.monotonic() < deadline:
        for p in range(partitions):
            if p in ends:
                continue
            try:
                ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            except KafkaException as exc:  # a leader still moving: retried until the deadline
                if errors is not None:
                    errors[p] = str(exc)
        if len(ends) < partitions:
            time.sleep(0.5)
    return ends


def read_everything(
    bootstrap: str,
    topic: str,
    partitions: int,
    timeout_s: float = 90.0,
    isolation: str = "read_uncommitted",
    extra: dict | None = None,
) -> dict[int, list[tuple[int, str]]]:
    """Every (offset, value) of every partition, from the start to the end as of now (``extra``:
    more librdkafka settings, a secured listener's, say)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-checker",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "logger": _quiet_logger(),
            **(extra or {}),
        }
    )
    got: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    errors: dict[int, str] = {}  # the last error of each partition, for the report
    ends = log_end_offsets(consumer, topic, partitions, deadline, errors)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done = {p for p, end in ends.items() if end == 0}
    while len(done) < partitions and time.monotonic() < deadline:
        for message in consumer.consume(2000, 0.5):
            error = message.error()
            partition, offset = message.partition(), message.offset()
            if error is None:
                value = message.value()
                assert partition is not None and offset is not None and value is not None  # the workload's values
                got[partition].append((offset, value.decode()))
                if offset + 1 >= ends.get(partition, 1 << 62):
                    done.add(partition)
            elif error.code() == error._PARTITION_EOF:
                assert partition is not None and offset is not None  # an end-of-partition event carries both
                if offset >= ends.get(partition, 0):
                    done.add(partition)
            elif partition is not None:
                errors[partition] = error.str()
    consumer.close()
    if len(done) < partitions:
        left = sorted(set(range(partitions)) - done)
        raise RuntimeError(
            f"could not read partitions {left} to their end within {timeout_s}s: end offsets {ends}, "
            f"read up to { ({p: got[p][-1][0] if got[p] else None for p in left}) }, last errors {errors}"
        )
    return got


def check(history: History, read: dict[int, list[tuple[int, str]]], replica_differences: list[str]) -> Verdict:
    seen: dict[str, list[tuple[int, int]]] = {}
    for partition, records in read.items():
        for offset, value in records:
            seen.setdefault(value, []).append((partition, offset))
    lost = sorted(v for v in history.acked if v not in seen)
    duplicated = sorted(v for v, where in seen.items() if len(where) > 1)
    # an acknowledgement without an offset (None) still names the partition the value must be in
    moved = sorted(
        v
        for v, at in history.acked.items()
        if v in seen and (at not in seen[v] if at[1] is not None else all(p != at[0] for p, _ in seen[v]))
    )
    out_of_order = []
    for partition, records in read.items():
        last: dict[str, int] = {}
        for _offset, value in records:
            producer, sequence = value.split(":")
            # an idempotent producer's writes to one partition keep their order
            previous = last.get(producer, -1)
            if int(sequence) <= previous:
                out_of_order.append(f"{partition}:{value} after {producer}:{previous}")
            last[producer] = int(sequence)
    failed_present = sum(1 for v in history.failed if v in seen)
    return Verdict(
        len(history.acked),
        len(history.failed),
        sum(len(r) for r in read.values()),
        lost,
        duplicated,
        moved,
        out_of_order,
        failed_present,
        replica_differences,
        offset_unknown=sum(1 for _partition, offset in history.acked.values() if offset is None),
    )
