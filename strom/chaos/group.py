"""The consumer group of the campaign's workloads, and its checker.

Two members of one group (confluent-kafka, auto commit off) consume the topic for the whole run,
under the faults: each batch a member gets from ``consume()`` is processed (recorded), then its
offsets are committed synchronously (at-least-once). Each member also crashes every 20 s (its
last batch processed, not committed) and comes back as a new consumer, so the group rebalances
and partitions change hands under the faults, not only when a fault expires a session.
Everything is recorded with times: every read (member, partition, offset, value), every commit
(what, when it was sent and answered, its result), every rebalance, the high watermark each
member's client last saw per partition (from its fetches, polled after every batch), and the
group's committed offsets read back about once a second by a separate reader and by each member
when it is given partitions.

The checker requires, over the full history:

- committed offsets never move backwards (nothing in the workload resets them): no committed
  offset read back, nor written by a successful commit, is lower than one written or read back
  by a request that had completed before it was sent;
- the high watermark a member's client saw never moves backwards per partition (a record read
  at offset o means the watermark was past o when it was fetched). A newly elected leader's
  watermark can lag its predecessor's (it learnt it from its last fetch as a follower: Kafka
  documents the window, OffsetNotAvailableException, and guards only ListOffsets against it),
  so a step back within ``ELECTION_WINDOW_S`` after the partition's leader epoch changed in
  ZooKeeper is reported apart, as the new leader's lag, and does not fail the run; any other is
  an anomaly;
- no value the producer was told definitely failed is read (a value whose outcome was
  indeterminate, a timeout, may be);
- every acknowledged value is read at least once, across the run and a final drain after the
  faults are healed. Values read more than once are counted apart: they are expected after a
  rebalance, since offsets are committed only after a batch is processed.

Times are ``time.monotonic()``; one thread's records keep its program order in the lists.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.chaos.workload import _quiet_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from strom.chaos.txn import TxnHistory
    from strom.chaos.workload import History

GROUP_ID = "chaos-group"
MEMBERS = 2
READBACK_INTERVAL_S = 1.0
ELECTION_WINDOW_S = 15.0  # longer than any fault is held
EPOCH_POLL_INTERVAL_S = 0.25
CRASH_EVERY_S = 20.0  # each member crashes between processing a batch and committing it this often
CRASH_STAGGER_S = 10.0  # member i's first crash comes i * this later: one crash at a time
# librdkafka delivery errors that say the record was never written (it never left the client, or
# the broker refused it outright); every other failure (a timeout above all) may have landed
DEFINITE_FAILURES = frozenset(
    {
        "_PURGE_QUEUE",
        "_MSG_SIZE_TOO_LARGE",
        "MSG_SIZE_TOO_LARGE",
        "_UNKNOWN_TOPIC",
        "_UNKNOWN_PARTITION",
        "UNKNOWN_TOPIC_OR_PART",
        "INVALID_RECORD",
        "CORRUPT_MESSAGE",
        "TOPIC_AUTHORIZATION_FAILED",
        "_INVALID_ARG",
    }
)
_CODE = re.compile(r"code=(\w+)")


def error_name(error: str) -> str:
    """The code name in a recorded ``str(KafkaError)`` (the whole text when it has none)."""
    found = _CODE.search(error)
    return found.group(1) if found else error


@dataclass
class GroupHistory:
    reads: list[tuple[float, int, int, int, str]] = field(default_factory=list)  # t, member, partition, offset, value
    watermarks: list[tuple[float, int, int, int]] = field(default_factory=list)  # t, member, partition, high
    # sent, answered, who, {partition: offset}, error (None: committed); who is a member or -1 (the reader)
    commits: list[tuple[float, float, int, dict[int, int], str | None]] = field(default_factory=list)
    readbacks: list[tuple[float, float, int, dict[int, int]]] = field(default_factory=list)
    # t, member, assign|revoke|crash (a crash names the partitions of the batch left uncommitted)
    rebalances: list[tuple[float, int, str, list[int]]] = field(default_factory=list)
    errors: list[tuple[float, int, str]] = field(default_factory=list)
    elections: list[tuple[float, int, int]] = field(default_factory=list)  # t, partition, new leader epoch

    def to_json(self) -> dict:
        return {
            "reads": self.reads,
            "watermarks": self.watermarks,
            "commits": [(s, d, m, {str(p): o for p, o in c.items()}, e) for s, d, m, c, e in self.commits],
            "readbacks": [(s, d, m, {str(p): o for p, o in c.items()}) for s, d, m, c in self.readbacks],
            "rebalances": self.rebalances,
            "errors": self.errors,
            "elections": self.elections,
        }


@dataclass
class GroupVerdict:
    reads: int
    distinct: int
    duplicate_reads: int  # reads of a value already read: expected after rebalances, not a failure
    commits: int
    commits_failed: int
    readbacks: int
    rebalances: int  # assignments members received (each rebalance gives every member one)
    crashes: int
    missed: list[str]  # acknowledged, never read by the group
    failed_read: list[str]  # the producer was told it definitely failed, and the group read it
    indeterminate_read: int  # failed with an indeterminate error, read: allowed
    unreported_read: int  # read, with no delivery report at all (a replaced producer's last ones)
    commit_backwards: list[str]
    watermark_backwards: list[str]
    watermark_back_after_election: list[str]  # a new leader's lagging watermark: reported, not a failure

    @property
    def ok(self) -> bool:
        return not (self.missed or self.failed_read or self.commit_backwards or self.watermark_backwards)

    def failures(self, first: int = 5) -> dict[str, list[str]]:
        """The first few of each kind of failure, for an assertion's message."""
        names = ("missed", "failed_read", "commit_backwards", "watermark_backwards")
        return {name: getattr(self, name)[:first] for name in names if getattr(self, name)}

    def summary(self) -> str:
        return (
            f"group read {self.reads} ({self.distinct} distinct, {self.duplicate_reads} duplicate reads), "
            f"commits {self.commits} ({self.commits_failed} failed), read back {self.readbacks}, "
            f"assignments {self.rebalances} ({self.crashes} member crashes), missed {len(self.missed)}, "
            f"failed values read {len(self.failed_read)}, "
            f"commits backwards {len(self.commit_backwards)}, watermark backwards {len(self.watermark_backwards)} "
            f"(+{len(self.watermark_back_after_election)} after an election)"
        )


class GroupConsumers:
    """``MEMBERS`` member threads and a committed-offset reader, until ``stop()``."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        isolation: str = "read_uncommitted",
        leader_epochs: Callable[[], dict[int, int | None]] | None = None,
    ):
        """``leader_epochs`` reads each partition's leader epoch (None: unknown) from ZooKeeper."""
        self.leader_epochs = leader_epochs
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.isolation = isolation
        self.history = GroupHistory()
        self.values_read: set[str] = set()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._member, args=(i,), name=f"chaos-member-{i}", daemon=True)
            for i in range(MEMBERS)
        ]
        self._threads.append(threading.Thread(target=self._reader, name="chaos-group-reader", daemon=True))
        if leader_epochs is not None:
            self._threads.append(threading.Thread(target=self._elections, name="chaos-group-epochs", daemon=True))

    def start(self) -> GroupConsumers:
        for thread in self._threads:
            thread.start()
        return self

    def _config(self, **extra) -> dict:
        return {
            "bootstrap.servers": self.bootstrap,
            "group.id": GROUP_ID,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": self.isolation,
            # short sessions, so that the faults make members leave and rejoin: rebalances happen
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500,
            "socket.timeout.ms": 10000,
            "logger": _quiet_logger(),
            **extra,
        }

    def drain(self, acked: set[str], timeout_s: float = 90.0) -> bool:
        """Wait (bounded) until the group has read every value in ``acked``; whether it did."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not (acked - self.values_read):
                # the last batch's commit follows its processing: wait (bounded) until one is answered
                read_at = self.history.reads[-1][0] if self.history.reads else 0.0
                settle = time.monotonic() + 5.0
                while time.monotonic() < settle and not any(c[1] >= read_at for c in self.history.commits[-4:]):
                    time.sleep(0.05)
                return True
            time.sleep(0.5)
        return False

    def stop(self, timeout_s: float = 30.0) -> GroupHistory:
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        return self.history

    def _member(self, member: int) -> None:
        """One member; every ``CRASH_EVERY_S`` it crashes after processing a batch, before committing it.

        The crash (the batch's offsets are not committed, the consumer leaves) and the new
        consumer's joining make two rebalances; whoever is given the partitions then reads that
        batch again from the committed offsets: what at-least-once allows, and the checker counts.
        """
        incarnation = 0
        while not self._stop.is_set():
            self._incarnation(member, time.monotonic() + CRASH_EVERY_S + CRASH_STAGGER_S * member * (incarnation == 0))
            incarnation += 1

    def _incarnation(self, member: int, crash_at: float) -> None:
        from confluent_kafka import Consumer, KafkaException

        history = self.history
        consumer = Consumer(self._config(**{"client.id": f"chaos-member-{member}"}))

        def on_assign(c, partitions) -> None:
            owned = sorted(tp.partition for tp in partitions)
            history.rebalances.append((time.monotonic(), member, "assign", owned))
            if owned:
                self._read_back(c, member, owned)

        def on_revoke(c, partitions) -> None:
            history.rebalances.append((time.monotonic(), member, "revoke", sorted(tp.partition for tp in partitions)))

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        seen_high: dict[int, int] = {}
        try:
            while not self._stop.is_set():
                try:
                    messages = consumer.consume(500, 0.5)
                except KafkaException as e:
                    history.errors.append((time.monotonic(), member, str(e.args[0])))
                    continue
                now = time.monotonic()
                ends: dict[int, int] = {}
                for message in messages:
                    error = message.error()
                    if error is not None:
                        history.errors.append((now, member, str(error)))
                        continue
                    partition, offset, value = message.partition(), message.offset(), message.value()
                    assert partition is not None and offset is not None and value is not None  # the workload's
                    text = value.decode()
                    history.reads.append((now, member, partition, offset, text))
                    self.values_read.add(text)
                    ends[partition] = offset + 1
                if ends and now >= crash_at:
                    history.rebalances.append((now, member, "crash", sorted(ends)))
                    return
                if ends:
                    self._commit(consumer, member, ends)
                for tp in consumer.assignment():
                    try:
                        high = consumer.get_watermark_offsets(tp, cached=True)[1]
                    except KafkaException:
                        continue
                    if high >= 0 and high != seen_high.get(tp.partition):
                        seen_high[tp.partition] = high
                        history.watermarks.append((time.monotonic(), member, tp.partition, high))
        finally:
            try:
                consumer.close()
            except (KafkaException, RuntimeError) as e:
                history.errors.append((time.monotonic(), member, f"close: {e}"))

    def _commit(self, consumer, member: int, ends: dict[int, int]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        sent = time.monotonic()
        try:
            result = consumer.commit(
                offsets=[TopicPartition(self.topic, p, o) for p, o in sorted(ends.items())], asynchronous=False
            )
            failed = [f"{tp.partition}: {tp.error}" for tp in result or [] if tp.error is not None]
            error = "; ".join(failed) if failed else None
        except KafkaException as e:
            error = str(e.args[0])
        self.history.commits.append((sent, time.monotonic(), member, dict(ends), error))

    def _read_back(self, consumer, who: int, partitions: list[int]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        sent = time.monotonic()
        try:
            got = consumer.committed([TopicPartition(self.topic, p) for p in partitions], timeout=5)
        except KafkaException as e:
            self.history.errors.append((time.monotonic(), who, f"committed(): {e.args[0]}"))
            return
        done = time.monotonic()
        # an error says nothing about the stored offset; no offset (-1001) after a commit is a step back
        offsets = {tp.partition: max(tp.offset, -1) for tp in got if tp.error is None}
        if offsets:
            self.history.readbacks.append((sent, done, who, offsets))

    def _elections(self) -> None:
        assert self.leader_epochs is not None
        known: dict[int, int] = {}
        while not self._stop.wait(EPOCH_POLL_INTERVAL_S):
            for partition, epoch in self.leader_epochs().items():
                if epoch is not None and epoch != known.get(partition, epoch):
                    self.history.elections.append((time.monotonic(), partition, epoch))
                if epoch is not None:
                    known[partition] = epoch

    def _reader(self) -> None:
        """Reads the group's committed offsets back about once a second (not a member: joins nothing)."""
        from confluent_kafka import Consumer

        consumer = Consumer(self._config(**{"client.id": "chaos-group-reader"}))
        try:
            while not self._stop.wait(READBACK_INTERVAL_S):
                self._read_back(consumer, -1, list(range(self.partitions)))
        finally:
            consumer.close()


def check_group(
    history: GroupHistory, acked: set[str], definitely_failed: set[str], indeterminate: set[str]
) -> GroupVerdict:
    read_counts: dict[str, int] = {}
    for _t, _member, _partition, _offset, value in history.reads:
        read_counts[value] = read_counts.get(value, 0) + 1
    missed = sorted(v for v in acked if v not in read_counts)
    failed_read = sorted(v for v in definitely_failed if v in read_counts and v not in acked)
    others = [v for v in read_counts if v not in acked and v not in definitely_failed]
    indeterminate_read = sum(1 for v in others if v in indeterminate)
    watermark_backwards, after_election = watermarks_backwards(history)
    return GroupVerdict(
        reads=len(history.reads),
        distinct=len(read_counts),
        duplicate_reads=sum(n - 1 for n in read_counts.values()),
        commits=len(history.commits),
        commits_failed=sum(1 for c in history.commits if c[4] is not None),
        readbacks=len(history.readbacks),
        rebalances=sum(1 for r in history.rebalances if r[2] == "assign"),
        crashes=sum(1 for r in history.rebalances if r[2] == "crash"),
        missed=missed,
        failed_read=failed_read,
        indeterminate_read=indeterminate_read,
        unreported_read=len(others) - indeterminate_read,
        commit_backwards=commits_backwards(history),
        watermark_backwards=watermark_backwards,
        watermark_back_after_election=after_election,
    )


def commits_backwards(history: GroupHistory) -> list[str]:
    """Committed offsets seen lower than one seen by a request that had completed before.

    Each successful commit and each read-back is an observation of the stored offsets somewhere
    between its sending and its answer; ``b`` sent after ``a`` was answered must see at least
    what ``a`` saw. A failed commit may or may not have been stored, and says nothing.
    """
    seen: list[tuple[float, float, str, dict[int, int]]] = [
        (sent, done, f"commit by member {who}", offsets)
        for sent, done, who, offsets, error in history.commits
        if error is None
    ]
    seen += [
        (sent, done, "read back by " + (f"member {who}" if who >= 0 else "the reader"), offsets)
        for sent, done, who, offsets in history.readbacks
    ]
    by_done = sorted(seen, key=lambda s: s[1])
    found = []
    best: dict[int, tuple[int, float, str]] = {}  # partition -> highest offset seen by requests answered so far
    i = 0
    for sent, _done, what, offsets in sorted(seen, key=lambda s: s[0]):
        while i < len(by_done) and by_done[i][1] < sent:
            _s, done_i, what_i, offsets_i = by_done[i]
            for p, o in offsets_i.items():
                if o > best.get(p, (-1, 0.0, ""))[0]:
                    best[p] = (o, done_i, what_i)
            i += 1
        for p, o in offsets.items():
            high, at, by = best.get(p, (-1, 0.0, ""))
            if o < high:
                found.append(f"partition {p}: {what} at {sent:.3f} saw {o}, after {by} saw {high} (answered {at:.3f})")
    return found


def watermarks_backwards(history: GroupHistory) -> tuple[list[str], list[str]]:
    """High watermarks a member's client saw lower than it had seen (or read past) before, per partition:
    those not explained by an election, and those seen soon after the partition's leader changed."""
    events: dict[tuple[int, int], list[tuple[float, int, int]]] = {}  # (member, partition) -> (t, kind, high)
    for t, member, partition, offset, _value in history.reads:
        events.setdefault((member, partition), []).append((t, 0, offset + 1))  # a lower bound, of an earlier fetch
    for t, member, partition, high in history.watermarks:
        events.setdefault((member, partition), []).append((t, 1, high))
    found: list[str] = []
    after_election: list[str] = []
    for (member, partition), seq in sorted(events.items()):
        highest = -1
        for t, kind, high in sorted(seq, key=lambda e: (e[0], e[1])):  # stable: one thread's order
            if kind == 1 and high < highest:
                what = f"member {member} partition {partition}: watermark {high} at {t:.3f} after {highest}"
                elected = [
                    (at, epoch)
                    for at, p, epoch in history.elections
                    if p == partition and t - ELECTION_WINDOW_S <= at <= t + 1.0
                ]
                if elected:
                    after_election.append(f"{what} (leader epoch {elected[-1][1]} at {elected[-1][0]:.3f})")
                else:
                    found.append(what)
            highest = max(highest, high)
    return found, after_election


def queue_outcomes(history: History) -> tuple[set[str], set[str], set[str]]:
    """The queue workload's values: acknowledged, definitely failed, failed with an indeterminate error."""
    definite = {v for v, error in history.failed.items() if error_name(error) in DEFINITE_FAILURES}
    return set(history.acked), definite, set(history.failed) - definite


def txn_outcomes(history: TxnHistory) -> tuple[set[str], set[str], set[str]]:
    """The transactional workload's values: of committed, of aborted, of batches of unknown outcome."""

    def values(batches: set[str]) -> set[str]:
        return {v for b in batches for v in history.batches[b]}

    return values(history.committed), values(history.aborted), values(history.unknown)
