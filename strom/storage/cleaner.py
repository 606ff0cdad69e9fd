"""Log compaction: keep only the latest record of every key in the cleanable part of a log.

As in Kafka: the *dirty* section (from the cleaner checkpoint up to the first uncleanable
offset: the active segment or the high watermark, whichever is lower) is scanned to build a
key → latest-offset map; then every cleanable segment is rewritten, keeping a record only if no
later record has its key. Offsets are preserved, so compacted logs have gaps. Groups of
segments are rewritten into one ``.cleaned`` segment and swapped in by Log.replace_segments.

Tombstones (null value) are kept for ``delete.retention.ms`` after their batch's timestamp so
that consumers that are behind still see the delete; after that they are dropped. (Kafka
measures the same horizon from segment modification times; timestamps make it deterministic.)

Transactions: cleaning stops at the last stable offset, so an open transaction is never
compacted; records of aborted transactions are removed and never win a key (otherwise an
aborted offset commit in __consumer_offsets would replace a committed one). Markers are kept,
with the .txnindex entries of the segments they are in.

Off the event loop (Kafka's cleaner threads, here processes: see ``worker_clean``):
``plan_cleaning`` runs on the event loop and takes what a round needs (the sealed segments' paths
and sizes, their .txnindex entries, the aborted ranges, the tombstone horizon); ``run_cleaning``
runs in a cleaner process, reads only those sealed segments through descriptors of its own (the
event loop keeps appending to the active segment and serving fetches from the sealed ones) and
writes ``.cleaned`` segments nobody else sees; ``install`` runs on the event loop again and swaps
them in only if the segments they replace are still the log's, unchanged (a truncation,
retention delete or log deletion meanwhile abandons the round and removes its .cleaned files).
The ``.cleaned``/``.swap`` renames and the recovery at startup are Kafka's, as before.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
)
from strom.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    iter_batch_headers,
    iter_batch_records,
    read_batch_header,
    rebuild_batch,
)
from strom.storage.log import Log
from strom.storage.log_config import LONG_MAX
from strom.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
)
from strom.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

if TYPE_CHECKING:
    from strom.protocol.records import Record

log = logging.getLogger("strom.storage.cleaner")


# Kafka's SkimpyOffsetMap spends a 16-byte hash and an 8-byte offset per key of the dedupe buffer.
OFFSET_MAP_ENTRY_BYTES = 24
# A cleaned segment is written back in steps of this much (fdatasync in the cleaner process) rather
# than by one fsync of up to segment.bytes at its end: one large fsync on ext4 holds the journal
# commit that the broker's own appends and renames wait for, and floods the disk queue ahead of
# fetches that miss the page cache.
WRITEBACK_STEP_BYTES = 8 * 1024 * 1024
# How often a cleaner process looks at its clock to give way (strom.storage.cleaner_process): a
# record of a 1 MB batch takes 1-2 us to decode here, so this is well under the 200 us it yields after.
GIVE_WAY_EVERY_RECORDS = 32


@dataclass
class CleanResult:
    first_dirty_offset: int  # where the next cleaning starts
    bytes_before: int
    bytes_after: int
    records_removed: int


@dataclass(frozen=True)
class CleanerSettings:
    """The broker's log.cleaner.* keys that shape a cleaning round (Kafka's defaults)."""

    threads: int = 1
    io_max_bytes_per_second: float = 1.7976931348623157e308
    dedupe_buffer_size: int = 134_217_728
    io_buffer_size: int = 524_288
    io_buffer_load_factor: float = 0.9

    @property
    def max_map_entries(self) -> int:
        """Keys one cleaner process's share of the dedupe buffer holds before a round stops early."""
        per_thread = self.dedupe_buffer_size // max(1, self.threads)
        return max(1, int(per_thread // OFFSET_MAP_ENTRY_BYTES * self.io_buffer_load_factor))


DEFAULT_SETTINGS = CleanerSettings()


class CleaningAborted(Exception):
    """The round was stopped (shutdown) or a segment it reads changed under it (truncation)."""


class Throttler:
    """A cleaner process's share of log.cleaner.io.max.bytes.per.second, as Kafka's Throttler: bytes
    read and written are counted, and once per check interval, if the rate was exceeded, the
    cleaner sleeps until it is not."""

    def __init__(
        self,
        bytes_per_second: float,
        stop: threading.Event | None = None,
        check_interval_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.rate = bytes_per_second
        self.unlimited = bytes_per_second >= 1e300
        self.stop = stop or threading.Event()
        self.check_interval_s = check_interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0

    def reset(self) -> None:
        """A round starts: the idle time before it must not count as bytes not read."""
        with self._lock:
            self._period_start = self.clock()
            self._observed = 0.0

    def maybe_throttle(self, nbytes: int) -> None:
        if self.unlimited:
            return
        with self._lock:
            self._observed += nbytes
            elapsed = self.clock() - self._period_start
            if elapsed < self.check_interval_s:
                return
            wait = self._observed / self.rate - elapsed if self.rate > 0 else self.check_interval_s
            if wait > 0:
                self.stop.wait(wait)
            self._period_start = self.clock()
            self._observed = 0.0


def first_uncleanable_offset(log_: Log) -> int:
    return min(log_.active_segment.base_offset, log_.last_stable_offset)


class _AbortedRanges:
    """Which transactional batches belong to aborted transactions, from the txn indexes."""

    def __init__(self, aborted: list[AbortedTxn]):
        self.by_producer: dict[int, list[tuple[int, int]]] = {}
        for entry in aborted:
            self.by_producer.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))

    def __contains__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self.by_producer.get(header.producer_id)
        return ranges is not None and any(first <= header.base_offset <= last for first, last in ranges)


def cleanable_segments(log_: Log, min_compaction_lag_ms: int = 0) -> list[LogSegment]:
    """Non-active segments wholly below the first uncleanable offset (and old enough)."""
    limit = first_uncleanable_offset(log_)
    now = log_.now_ms()
    result = []
    for i, segment in enumerate(log_.segments[:-1]):
        next_base = log_.segments[i + 1].base_offset
        if next_base > limit:
            break
        if min_compaction_lag_ms and segment.max_timestamp >= 0 and now - segment.max_timestamp < min_compaction_lag_ms:
            break
        result.append(segment)
    return result


def dirty_bytes(log_: Log, first_dirty_offset: int) -> tuple[int, int]:
    """(cleanable dirty bytes, cleanable bytes): what a round would clean, and all it would rewrite."""
    segments = cleanable_segments(log_, log_.config.min_compaction_lag_ms)
    # After a cleaning the dirty section starts at a segment boundary (the old active segment).
    dirty = sum(s.size for s in segments if s.base_offset >= first_dirty_offset)
    return dirty, sum(s.size for s in segments)


def dirty_ratio(log_: Log, first_dirty_offset: int) -> float:
    dirty, total = dirty_bytes(log_, first_dirty_offset)
    return dirty / total if total else 0.0


def max_compaction_delay(log_: Log, first_dirty_offset: int) -> int:
    """How long ago the oldest dirty record passed max.compaction.lag.ms (0: none has), as Kafka's
    LogCleanerManager measures it (KIP-354): from the first batch timestamp of each sealed segment
    from the first dirty offset on. Such a log is cleaned whatever its dirty ratio; a segment
    still within min.compaction.lag.ms stays uncleaned even so (cleanable_segments)."""
    lag = max(log_.config.max_compaction_lag_ms, 0)
    if lag >= LONG_MAX:
        return 0  # the default: no segment need be read
    segments = log_.segments
    stamps = [
        stamp
        for segment, after in zip(segments, segments[1:])
        if after.base_offset > first_dirty_offset and (stamp := segment.first_batch_timestamp()) > 0
    ]
    clean_until = log_.now_ms() - lag
    earliest = min(stamps, default=LONG_MAX)
    return clean_until - earliest if earliest < clean_until else 0


@dataclass
class SegmentSource:
    """A sealed segment as the cleaner process reads it: by path, up to the size it had when planned."""

    base_offset: int
    path: str
    size: int
    next_base: int  # the base offset of the segment after it: no offset of this one reaches it
    txn_entries: list[AbortedTxn]


@dataclass
class CleanJob:
    """A round's inputs, taken on the event loop and pickled to a cleaner process; nothing else of
    the log is read there."""

    directory: str
    groups: list[list[SegmentSource]]
    first_dirty_offset: int
    end_offset: int  # the first offset after the cleanable segments
    aborted: _AbortedRanges
    tombstone_horizon: int
    index_interval_bytes: int
    max_index_size: int
    max_map_entries: int | None = None
    io_buffer_size: int = 1024 * 1024

    @property
    def sources(self) -> list[SegmentSource]:
        return [source for group in self.groups for source in group]


@dataclass
class CleanPlan:
    """The job plus the live segments it was cut from (which stay on the event loop)."""

    job: CleanJob
    segments: dict[int, LogSegment]  # base offset -> the segment the source was planned from


@dataclass
class CleanOutcome:
    """What the cleaner wrote: the base offset of each .cleaned segment and the sources it replaces."""

    directory: str
    cleaned: list[tuple[int, list[int]]] = field(default_factory=list)
    next_dirty_offset: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0

    def discard(self) -> None:
        for base_offset, _ in self.cleaned:
            _remove_cleaned_files(self.directory, base_offset)
        self.cleaned = []


def _remove_cleaned_files(directory: str, base_offset: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
        try:
            os.unlink(os.path.join(directory, file_name(base_offset, suffix) + CLEANED_SUFFIX))
        except FileNotFoundError:
            pass


def plan_cleaning(log_: Log, first_dirty_offset: int, settings: CleanerSettings | None = None) -> CleanPlan | None:
    """Take a round's inputs on the event loop (cheap: no segment is read); None when nothing is cleanable."""
    segments = cleanable_segments(log_, log_.config.min_compaction_lag_ms)
    if not segments:
        return None
    config = log_.config
    aborted = _AbortedRanges(log_.aborted_transactions(segments[0].base_offset, first_uncleanable_offset(log_)))
    next_bases = [s.base_offset for s in log_.segments[1 : len(segments) + 1]]
    groups: list[list[SegmentSource]] = []
    for segment, next_base in zip(segments, next_bases):
        segment.write_pending()  # a sealed segment has nothing pending; the file must be whole to be read by path
        source = SegmentSource(
            segment.base_offset, segment.log_path, segment.size, next_base, list(segment.txn_index.entries)
        )
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + source.size
            if size <= config.segment_bytes and next_base - group[0].base_offset < 2**31 - 1:
                group.append(source)
                continue
        groups.append([source])
    job = CleanJob(
        directory=log_.directory,
        groups=groups,
        first_dirty_offset=first_dirty_offset,
        end_offset=next_bases[-1],
        aborted=aborted,
        tombstone_horizon=log_.now_ms() - config.delete_retention_ms,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        max_map_entries=settings.max_map_entries if settings else None,
        io_buffer_size=settings.io_buffer_size if settings else 1024 * 1024,
    )
    return CleanPlan(job, {s.base_offset: s for s in segments})


def _paced(records: Iterator[Record], give_way: Callable[[], None] | None) -> Iterator[Record]:
    """``records``, with ``give_way`` called before the first and every GIVE_WAY_EVERY_RECORDS more."""
    if give_way is None:
        yield from records
        return
    for n, record in enumerate(records):
        if n % GIVE_WAY_EVERY_RECORDS == 0:
            give_way()
        yield record


class _Reader:
    """Reads a round's sources through descriptors of its own: a retention delete or truncation on
    the event loop meanwhile renames, closes or shortens the log's files, never these."""

    def __init__(
        self,
        job: CleanJob,
        throttler: Throttler | None,
        stop: threading.Event | None,
    ):
        self.job = job
        self.throttler = throttler
        self.stop = stop
        self.fds: dict[int, int] = {}

    def open_all(self) -> None:
        for source in self.job.sources:
            try:
                fd = os.open(source.path, os.O_RDONLY)
            except FileNotFoundError:
                raise CleaningAborted(f"segment {source.base_offset} of {self.job.directory} is gone") from None
            self.fds[source.base_offset] = fd
            if os.fstat(fd).st_size < source.size:
                raise CleaningAborted(f"segment {source.base_offset} of {self.job.directory} shrank")

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def _check(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise CleaningAborted("the cleaner is stopping")

    def batches(self, source: SegmentSource) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch of a sealed segment, as (header at position 0, its bytes)."""
        fd, size, directory = self.fds[source.base_offset], source.size, self.job.directory
        position = 0
        while position < size:
            self._check()
            chunk = os.pread(fd, min(self.job.io_buffer_size, size - position), position)
            if not chunk:
                raise CleaningAborted(f"segment {source.base_offset} of {directory} shrank under the cleaner")
            if self.throttler is not None:
                self.throttler.maybe_throttle(len(chunk))
            offset = 0
            while offset + BATCH_HEADER_SIZE <= len(chunk):
                try:
                    header = read_batch_header(chunk, offset, size - position - offset)
                except (CorruptRecordError, InvalidRecordError):
                    return  # as the segment's own scan: a damaged tail ends the segment
                if offset + header.size > len(chunk):
                    if offset == 0:  # one batch larger than the read buffer
                        data = os.pread(fd, header.size, position)
                        if len(data) < header.size:
                            raise CleaningAborted(f"segment {source.base_offset} of {directory} shrank")
                        header.position = 0
                        yield header, memoryview(data)
                        offset = header.size
                    break
                header.position = 0
                yield header, memoryview(chunk)[offset : offset + header.size]
                offset += header.size
            if offset == 0:
                return
            position += offset


def _build_offset_map(
    job: CleanJob, reader: _Reader, give_way: Callable[[], None] | None = None
) -> tuple[dict[bytes, int], int]:
    """key → latest offset over the dirty section, and the offset it covers up to (exclusive).

    When the dedupe buffer's share of keys is reached the map stops after that batch, and the
    round cleans only up to there, as Kafka does; the next round carries on from it.
    """
    first_dirty = job.first_dirty_offset
    aborted = job.aborted
    limit = job.max_map_entries
    latest: dict[bytes, int] = {}
    for source in job.sources:
        if source.next_base <= first_dirty:
            continue
        for header, data in reader.batches(source):
            if header.last_offset < first_dirty or header.is_control or header in aborted:
                continue
            for record in _paced(iter_batch_records(data, header), give_way):
                if record.key is not None and record.offset >= first_dirty:
                    latest[record.key] = record.offset
            if limit is not None and len(latest) >= limit and header.last_offset + 1 < job.end_offset:
                return latest, header.last_offset + 1
    return latest, job.end_offset


def run_cleaning(
    job: CleanJob,
    throttler: Throttler | None = None,
    stop: threading.Event | None = None,
    give_way: Callable[[], None] | None = None,
) -> CleanOutcome:
    """The reading, decoding and writing of a round (a cleaner process): the .cleaned segments,
    written, fsynced and closed. On any failure the .cleaned files written so far are removed.
    ``give_way`` runs every few records (the cleaner process's priority guard and its yielding of
    the CPU, strom.storage.cleaner_process)."""
    reader = _Reader(job, throttler, stop)
    if throttler is not None:
        throttler.reset()
    outcome = CleanOutcome(job.directory)
    aborted = job.aborted
    horizon = job.tombstone_horizon
    try:
        reader.open_all()
        offset_map, map_end = _build_offset_map(job, reader, give_way)
        outcome.next_dirty_offset = map_end
        for group in job.groups:
            group = [source for source in group if source.base_offset < map_end]
            if not group:
                break
            _remove_cleaned_files(job.directory, group[0].base_offset)  # an abandoned round's; appends would extend it
            cleaned = LogSegment(
                job.directory,
                group[0].base_offset,
                index_interval_bytes=job.index_interval_bytes,
                max_index_size=job.max_index_size,
                suffix=CLEANED_SUFFIX,
                active=True,
            )
            outcome.cleaned.append((group[0].base_offset, [source.base_offset for source in group]))
            synced = 0
            try:
                for source in group:
                    outcome.bytes_before += source.size
                    for header, data in reader.batches(source):
                        if header.is_control:
                            kept_bytes = bytes(data)
                        elif header in aborted:
                            outcome.records_removed += header.records_count
                            continue
                        else:
                            kept, count = [], 0
                            for record in _paced(iter_batch_records(data, header), give_way):
                                count += 1
                                if _retain(record, offset_map, header.max_timestamp, horizon):
                                    kept.append(record)
                            outcome.records_removed += count - len(kept)
                            if not kept:
                                continue
                            kept_bytes = bytes(data) if len(kept) == count else rebuild_batch(header, kept)
                        cleaned.append(kept_bytes, list(iter_batch_headers(kept_bytes)))
                        if throttler is not None:
                            throttler.maybe_throttle(len(kept_bytes))
                        if cleaned.size - synced >= WRITEBACK_STEP_BYTES:
                            os.fdatasync(cleaned.fd)
                            synced = cleaned.size
                cleaned.txn_index.replace([e for source in group for e in source.txn_entries])
                cleaned.on_roll()  # the time index's last entry, trimmed indexes, fsync: final before the swap
                outcome.bytes_after += cleaned.size
            finally:
                cleaned.close()
    except BaseException:
        outcome.discard()
        raise
    finally:
        reader.close()
    return outcome


# -- the cleaner process ---------------------------------------------------------------------------
# A thread would share the GIL with the event loop. Measured here (50 MB round, an asyncio task
# timing 1 ms sleeps): on a thread the loop's lag went from p50 0.1 / p99 3 ms to p50 3 / p99
# 14-18 ms (the thread decodes records in Python and holds the GIL for the 5 ms switch interval;
# when the OS preempts it while it holds the GIL, the loop waits longer: p99 60-80 ms on a loaded
# machine); in a process it stayed at p50 0.1 / p99 2-3 ms. A process shares only the CPUs.
_worker_stop: threading.Event | None = None
_worker_throttler: Throttler | None = None
_worker_give_way: Callable[[], None] | None = None


def worker_init(stop: threading.Event, bytes_per_second: float, give_way: Callable[[], None] | None = None) -> None:
    """Runs once in each cleaner process (from strom.storage.cleaner_process, which lowers its CPU
    priority first): its share of log.cleaner.io.max.bytes.per.second, the stop flag, and what
    runs every few records (the priority guard's check and yielding the CPU)."""
    global _worker_stop, _worker_throttler, _worker_give_way
    _worker_stop = stop
    _worker_throttler = Throttler(bytes_per_second, stop)
    _worker_give_way = give_way


def worker_clean(job: CleanJob) -> CleanOutcome:
    """A round in a cleaner process; errors come back as what the event loop acts on (picklable)."""
    try:
        return run_cleaning(job, _worker_throttler, _worker_stop, _worker_give_way)
    except (CleaningAborted, OSError):
        raise
    except KafkaStorageError as exc:
        cause = storage_cause(exc)
        if cause is not None:
            raise cause from None
        raise RuntimeError(f"cleaning {job.directory}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - sent back as text: not every exception pickles
        raise RuntimeError(f"cleaning {job.directory}: {exc!r}\n{traceback.format_exc()}") from None


def still_current(log_: Log, segments: list[LogSegment], sizes: list[int]) -> bool:
    """Whether ``segments`` are still a run of the log's sealed segments, each of the size planned."""
    live = log_.segments
    try:
        first = next(i for i, s in enumerate(live) if s is segments[0])
    except StopIteration:
        return False
    if first + len(segments) >= len(live):  # the active segment is never replaced
        return False
    return all(
        live[first + i] is segment and segment.size == size and segment.suffix == ""
        for i, (segment, size) in enumerate(zip(segments, sizes))
    )


def install(
    log_: Log, plan: CleanPlan, outcome: CleanOutcome, crash_hook: Callable[[str], None] | None = None
) -> CleanResult | None:
    """Swap the cleaned segments in (event loop); None, with the .cleaned files removed, when a
    truncation, retention delete or log deletion meanwhile replaced what they were cut from."""
    sizes = {source.base_offset: source.size for source in plan.job.sources}
    groups = [[plan.segments[base] for base in bases] for _, bases in outcome.cleaned]
    if not all(still_current(log_, group, [sizes[s.base_offset] for s in group]) for group in groups):
        log.info("cleaning of %s abandoned: its segments changed meanwhile", plan.job.directory)
        outcome.discard()
        return None
    config = log_.config
    began = time.perf_counter()
    for (base_offset, _), group in zip(outcome.cleaned, groups):
        cleaned = LogSegment(
            log_.directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            suffix=CLEANED_SUFFIX,
            active=False,
            write_behind=log_.write_behind,
        )
        log_.replace_segments(cleaned, group, crash_hook, durable=True)  # run_cleaning fsynced it
    log.info(
        "cleaned %s: %d -> %d bytes, %d records removed; swapped in on the event loop in %.1f ms%s",
        log_.directory,
        outcome.bytes_before,
        outcome.bytes_after,
        outcome.records_removed,
        (time.perf_counter() - began) * 1000,
        f"; up to offset {outcome.next_dirty_offset} only: the dedupe buffer holds {plan.job.max_map_entries} keys"
        if outcome.next_dirty_offset < plan.job.end_offset
        else "",
    )
    return CleanResult(outcome.next_dirty_offset, outcome.bytes_before, outcome.bytes_after, outcome.records_removed)


def storage_cause(exc: BaseException) -> OSError | None:
    """The I/O error behind a failed round (a .cleaned segment reports its write failures as KafkaStorageError)."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, KafkaStorageError) and isinstance(exc.__cause__, OSError):
        return exc.__cause__
    return None


def clean_log(log_: Log, first_dirty_offset: int, crash_hook: Callable[[str], None] | None = None) -> CleanResult:
    """Compact ``log_`` once on the calling thread (tools and tests); returns where the next cleaning starts."""
    plan = plan_cleaning(log_, first_dirty_offset)
    if plan is None:
        return CleanResult(first_dirty_offset, 0, 0, 0)
    result = install(log_, plan, run_cleaning(plan.job), crash_hook)
    assert result is not None  # nothing ran in between
    return result


def _retain(record: Record, offset_map: dict[bytes, int], batch_timestamp: int, tombstone_horizon: int) -> bool:
    if record.key is None:
        return True
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False
    if record.value is None and batch_timestamp < tombstone_horizon:
        return False
    return True
