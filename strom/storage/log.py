"""A partition's log: an ordered list of segments with one active segment taking appends.

The log owns offsets (log start, log end, high watermark, recovery point), validation of what
is appended, rolling, retention, truncation and crash recovery. It knows nothing about the
network or replication; the partition above it decides which offsets are committed.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from strom.clock import wall_time
from strom.protocol.compression import CompressionError, CompressionType
from strom.protocol.errors import CorruptRecordError, InvalidRecordError, OffsetOutOfRangeError
from strom.protocol.records import (
    BatchHeader,
    build_control_batch,
    decode_batch_records,
    iter_batch_headers,
    patch_offset_and_epoch,
    read_control_record,
    rebuild_batch,
    set_log_append_time,
    validate_batches,
)
from strom.storage import producer_snapshot
from strom.storage.leader_epoch import LeaderEpochCache
from strom.storage.log_config import LogConfig
from strom.storage.log_validator import needs_record_walk, validate_records
from strom.storage.producer_state import ProducerStateManager
from strom.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileSlice,
    LogSegment,
)
from strom.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn
from strom.storage.write_behind import WriteBehind

if TYPE_CHECKING:
    from strom.protocol.records import ByteSource

log = logging.getLogger("strom.storage")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class LogAppendInfo(NamedTuple):
    """What an append did. A NamedTuple: one is built per Produce request, and tuples are cheap."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    records_count: int
    batches: Sequence[BatchHeader] = ()
    duplicate: bool = False  # a retried idempotent batch: offsets are the original append's


@dataclass(slots=True)
class FetchData:
    """What a read returns: file slices to send, and the offset the first slice starts at."""

    slices: list[FileSlice]
    first_batch_offset: int | None = None

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>``; topics may contain dashes, so split at the last one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


FUTURE_DIR_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int, unique: str) -> str:
    """Kafka's name for a replica being moved into another log dir: ``<topic>-<p>.<uuid>-future``."""
    return f"{topic}-{partition}.{unique}{FUTURE_DIR_SUFFIX}"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """The partition of a ``<topic>-<p>.<32 hex digits>-future`` directory, else None."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32 or any(c not in "0123456789abcdef" for c in unique):
        return None
    return parse_partition_dir(stem)


class Log:
    def __init__(
        self,
        directory: str,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
        clock: Callable[[], float] = wall_time,
        monotonic: Callable[[], float] = time.monotonic,
        write_behind: WriteBehind | None = None,
    ):
        self.directory = directory
        self.config = config
        self.clock = clock  # record timestamps: LogAppendTime, retention, segment.ms (strom.clock)
        self.monotonic = monotonic  # durations: flush.ms, file.delete.delay.ms
        self.write_behind = write_behind
        os.makedirs(directory, exist_ok=True)
        name = os.path.basename(directory.rstrip("/"))
        parsed = parse_partition_dir(name) or parse_future_dir(name)
        self.topic, self.partition = parsed if parsed else (os.path.basename(directory), 0)
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[float, LogSegment]] = []
        self._unflushed_records = 0
        self._last_flush_ms = self.monotonic_ms()
        self._bound_cache: tuple[LogSegment, int, int, int] | None = None  # segment, offset, position, its size
        self.recovery_point = recovery_point
        # bumped whenever records are removed from the end: a copy of this log (a replica moving
        # to another log dir) that was taken before then may hold records this log no longer has
        self.truncations = 0
        self.leader_epoch_cache = LeaderEpochCache(directory)
        self._load(had_clean_shutdown)
        self.log_end_offset = self.active_segment.read_next_offset()
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if self.log_start_offset > self.log_end_offset:
            # A damaged checkpoint (or a log recovery cut short): keep the records rather than
            # trust a start offset past them, which would refuse every read and append.
            log.warning(
                "%s: log start offset %d is past the log end %d; starting at %d",
                directory,
                self.log_start_offset,
                self.log_end_offset,
                self.segments[0].base_offset,
            )
            self.log_start_offset = min(self.segments[0].base_offset, self.log_end_offset)
        self.recovery_point = min(max(self.recovery_point, self.log_start_offset), self.log_end_offset)
        self.high_watermark = (
            self.log_end_offset
            if high_watermark is None
            else min(max(high_watermark, self.log_start_offset), self.log_end_offset)
        )
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state = ProducerStateManager()
        self._rebuild_producer_state()

    def _load_newest_snapshot(self) -> int:
        """Load the newest usable producer snapshot; returns its offset (the log start without one)."""
        directory = self.directory
        producer_snapshot.delete_snapshots_after(directory, self.log_end_offset)
        for offset in reversed(producer_snapshot.snapshot_offsets(directory)):
            if offset < self.segments[0].base_offset:
                break
            try:
                self.producer_state.load_snapshot(
                    producer_snapshot.read_snapshot(producer_snapshot.snapshot_path(directory, offset))
                )
                return offset
            except (OSError, producer_snapshot.CorruptSnapshotError) as exc:
                log.warning("ignoring producer snapshot %d of %s: %s", offset, directory, exc)
                producer_snapshot.delete_snapshot(directory, offset)
        self.producer_state.truncate()
        return self.segments[0].base_offset

    def take_snapshot(self, offset: int | None = None) -> None:
        """Write the producer state as of ``offset`` (the log end by default): on roll and on close."""
        producer_snapshot.write_snapshot(
            self.directory, self.log_end_offset if offset is None else offset, self.producer_state.snapshot_entries()
        )

    def _rebuild_producer_state(self) -> None:
        """Know each producer's last sequence and open transaction after a restart or truncation.

        From the newest producer snapshot (Kafka's .snapshot files, written on roll and on clean
        shutdown), then the batch headers after it, plus one read per transaction marker. The
        same pass checks the .txnindex of each replayed segment against the abort markers it
        holds and rewrites one that disagrees (missing, corrupt, or left longer by a crash or a
        truncation).
        """
        state = self.producer_state
        if any(segment.txn_index.needs_rebuild for segment in self.segments):
            log.warning("%s: a .txnindex is corrupt; rebuilding from the whole log", self.directory)
            state.truncate()
            start = self.segments[0].base_offset
        else:
            start = self._load_newest_snapshot()
        for segment in self.segments[self.segment_for(start) :]:
            aborted: list[AbortedTxn] = [e for e in segment.txn_index.entries if e.last_offset < start]
            for header in segment.iter_batches():
                if header.producer_id < 0 or header.base_offset < start:
                    continue
                if not header.is_control:
                    state.update(header)
                    continue
                marker = self._read_marker(segment.read_batch(header), header, 0)
                if marker is not None:
                    done = state.complete_txn(header, *marker)
                    if done is not None:
                        aborted.append(done)
            if aborted != segment.txn_index.entries or segment.txn_index.needs_rebuild:
                if segment.txn_index.entries:
                    log.warning("rebuilding %s from the log's abort markers", segment.txn_index.path)
                segment.txn_index.replace(aborted)

    def _read_marker(self, buf: ByteSource, header: BatchHeader, position: int) -> tuple[bool, int] | None:
        """(commit?, coordinator epoch) of a control batch, or None for a control record that is no marker."""
        saved = header.position
        header.position = position
        try:
            return read_control_record(buf, header)
        except (InvalidRecordError, CorruptRecordError, CompressionError) as exc:  # damage a clean start did not scan
            log.warning(
                "%s: control batch at offset %d is not a transaction marker (%s); ignored",
                self.directory,
                header.base_offset,
                exc,
            )
            return None
        finally:
            header.position = saved

    @property
    def last_stable_offset(self) -> int:
        """The LSO: read_committed consumers read below it (the HW when no transaction holds it back)."""
        high_watermark = self.high_watermark
        first = self.producer_state.first_unstable_offset(high_watermark)
        return high_watermark if first is None or first > high_watermark else first

    def aborted_transactions(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_offset), for a read_committed fetch.

        An abort is indexed in the segment of its marker, which is never before the segment
        holding ``start_offset`` when the transaction overlaps the range, but may be any later
        one (a transaction that began in range can end far beyond it). Aborts are rare, so
        walking the in-memory entries of the remaining segments is cheap.
        """
        found: list[AbortedTxn] = []
        for segment in self.segments[self.segment_for(start_offset) :]:
            if segment.txn_index.entries:
                found.extend(segment.txn_index.collect(start_offset, upper_offset))
        return found

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def monotonic_ms(self) -> int:
        return int(self.monotonic() * 1000)

    def since_flush_ms(self) -> int:
        return self.monotonic_ms() - self._last_flush_ms

    # -- loading -----------------------------------------------------------------------------------
    def _new_segment(self, base_offset: int, suffix: str = "", active: bool = False) -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            suffix=suffix,
            active=active,
            write_behind=self.write_behind,
            clock=self.clock,
        )

    def _load(self, had_clean_shutdown: bool) -> None:
        names = os.listdir(self.directory)
        # Leftovers of an interrupted cleaning or deletion. Old segments are intact when a
        # .cleaned file exists; a .swap file is complete and replaces what it covers.
        for name in names:
            if name.endswith(CLEANED_SUFFIX) or name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
                os.unlink(os.path.join(self.directory, name))
        names = os.listdir(self.directory)
        log_bases = sorted(int(n[:20]) for n in names if n.endswith(LOG_SUFFIX) and n[:20].isdigit())
        swap_bases = sorted(int(n[:20]) for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX) and n[:20].isdigit())
        for name in names:  # index files with no .log of the same suffix are orphans
            for index_suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                for suffix in ("", SWAP_SUFFIX):
                    if name.endswith(index_suffix + suffix) and name[:20].isdigit():
                        if not os.path.exists(os.path.join(self.directory, name[:20] + LOG_SUFFIX + suffix)):
                            os.unlink(os.path.join(self.directory, name))
        segments = {base: self._new_segment(base) for base in log_bases}
        for base in swap_bases:
            swap = self._new_segment(base, SWAP_SUFFIX)
            swap.recover()
            end = swap.read_next_offset()
            for old_base in [b for b in segments if base <= b < end]:
                log.info("completing interrupted swap in %s: replacing segment %d", self.directory, old_base)
                segments.pop(old_base).delete_files()
            swap.change_suffix("")
            segments[base] = swap
        self.segments = [segments[b] for b in sorted(segments)]
        self._bases = [s.base_offset for s in self.segments]
        if not self.segments:
            start = max(self.recovery_point, 0)
            self.segments = [self._new_segment(start, active=True)]
            self._bases = [start]
            return
        self.active_segment.make_active()
        if not had_clean_shutdown:
            self._recover_unflushed()
        elif not self.active_segment.tail_is_valid():
            log.warning(
                "%s: the active segment ends in a damaged batch despite a clean shutdown; recovering it", self.directory
            )
            self._recover_segment(self.active_segment)
        for segment in self.segments:
            if segment.needs_index_rebuild:
                log.warning("rebuilding indexes of %s", segment.log_path)
                self._recover_segment(segment)

    def _recover_unflushed(self) -> None:
        """After a crash, rescan every segment from the one holding the recovery point onwards."""
        start = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        for i in range(start, len(self.segments)):
            if self._recover_segment(self.segments[i]):
                for doomed in self.segments[i + 1 :]:
                    log.warning("deleting segment %s after a corrupt batch before it", doomed.log_path)
                    doomed.delete_files()
                del self.segments[i + 1 :]
                del self._bases[i + 1 :]
                self.active_segment.make_active()
                break

    def _recover_segment(self, segment: LogSegment) -> int:
        truncated = segment.recover()
        if truncated:
            log.warning("recovery truncated %d bytes of %s", truncated, segment.log_path)
        return truncated

    # -- properties --------------------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_for(self, offset: int) -> int:
        """Index of the segment whose range holds ``offset`` (the floor by base offset)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    # -- appends -----------------------------------------------------------------------------------
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int = -1,
        decompressed: dict[int, bytes] | None = None,
    ) -> LogAppendInfo:
        """Validate, assign offsets and append a producer's record set.

        ``decompressed``: the records sections of compressed batches, by batch position in
        ``records``, when a caller decompressed them already (schema id validation does), so that
        the record checks do not decompress them a second time.

        Raises CorruptRecordError / InvalidRecordError / RecordTooLargeError /
        RecordValidationError before writing, so a rejected payload leaves the log untouched.
        This is the produce hot path: work is per batch, never per record, unless Kafka's rules
        need the records (compressed batches, compacted topics, timestamp bounds; see
        log_validator) or the topic forces a codec or LogAppendTime.
        """
        config = self.config
        headers = validate_batches(records, config.max_message_bytes)
        for header in headers:
            if header.is_control:
                raise InvalidRecordError("clients may not write control batches (transaction markers)")
        if needs_record_walk(config, headers):
            rebuilt, headers = validate_records(
                records, headers, config, f"{self.topic}-{self.partition}", self.now_ms(), decompressed
            )
            if rebuilt is not None:
                records = rebuilt
        if headers[0].producer_id >= 0:
            duplicate = self._check_producer(headers)
            if duplicate is not None:
                return duplicate
        buf = records if isinstance(records, bytearray) else bytearray(records)
        if config.compression_type != "producer":
            buf, headers = self._maybe_recompress(buf, headers)
        append_time = self.now_ms() if config.message_timestamp_type == "LogAppendTime" else -1
        next_offset = self.log_end_offset
        for header in headers:
            patch_offset_and_epoch(buf, header, next_offset, leader_epoch)
            header.base_offset = next_offset
            header.partition_leader_epoch = leader_epoch
            if append_time >= 0:
                set_log_append_time(buf, header.position, header.size, append_time)
                header.max_timestamp = append_time
                header.attributes |= 0x08
            next_offset = header.base_offset + header.last_offset_delta + 1
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, self.log_end_offset)
        return self._append(buf, headers, append_time, defer=True)

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, leader_epoch: int = -1
    ) -> LogAppendInfo:
        """Write a transaction's commit or abort marker (the leader's side of WriteTxnMarkers).

        Raises InvalidProducerEpochError for a fenced producer epoch and
        TransactionCoordinatorFencedError for a marker from an older coordinator, before writing.
        """
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        append_time = self.now_ms()
        buf = bytearray(build_control_batch(producer_id, producer_epoch, commit, coordinator_epoch, append_time))
        headers = validate_batches(buf, from_producer=False)
        patch_offset_and_epoch(buf, headers[0], self.log_end_offset, leader_epoch)
        headers[0].base_offset = self.log_end_offset
        headers[0].partition_leader_epoch = leader_epoch
        if leader_epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(leader_epoch, self.log_end_offset)
        return self._append(buf, headers, -1, defer=True)

    def _check_producer(self, headers: list[BatchHeader]) -> LogAppendInfo | None:
        """Idempotence: answer a retried batch with its original offsets; refuse sequence gaps."""
        state = self.producer_state
        for header in headers:
            if header.producer_id < 0:
                continue
            original = state.find_duplicate(header)
            if original is not None:
                return LogAppendInfo(
                    original.first_offset,
                    original.last_offset,
                    original.timestamp,
                    original.last_offset,
                    -1,
                    self.log_start_offset,
                    0,
                    [],
                    duplicate=True,
                )
            state.check(header)
        return None

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches whose offsets the leader assigned; epochs come from the batches."""
        headers = validate_batches(records, from_producer=False)
        if headers[0].base_offset < self.log_end_offset:
            raise InvalidRecordError(
                f"follower append at offset {headers[0].base_offset} is below the log end {self.log_end_offset}"
            )
        for header in headers:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch > self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(epoch, header.base_offset)
        return self._append(records, headers, -1)

    def _maybe_recompress(self, buf: bytearray, headers: list[BatchHeader]) -> tuple[bytearray, list[BatchHeader]]:
        """A topic with compression.type set to a codec stores every batch in that codec."""
        wanted = self.config.compression_type
        if wanted == "producer":
            return buf, headers
        codec = CompressionType.from_name(wanted)
        if all(h.compression == codec or h.is_control for h in headers):
            return buf, headers
        out = bytearray()
        for header in headers:
            if header.compression == codec or header.is_control:
                out += buf[header.position : header.position + header.size]
            else:
                batch_records = decode_batch_records(buf, header)
                for index, record in enumerate(batch_records):  # as Kafka: offsets are assigned afresh,
                    record.offset = header.base_offset + index  # whatever deltas the producer wrote
                out += rebuild_batch(header, batch_records, codec, self.config.compression_level)
        return out, validate_batches(out, None, from_producer=False)

    def _append(
        self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], append_time: int, defer: bool = False
    ) -> LogAppendInfo:
        markers: dict[int, tuple[bool, int] | None] | None = None
        for header in headers:  # read markers before writing: a bad one must leave the log untouched
            if header.is_control and header.producer_id >= 0:
                if markers is None:
                    markers = {}
                markers[header.base_offset] = self._read_marker(buf, header, header.position)
        segment = self._maybe_roll(len(buf), headers)
        segment.append(buf, headers, defer=defer)
        state = self.producer_state
        for header in headers:
            if header.producer_id >= 0:
                if not header.is_control:
                    state.update(header)
                # markers is set whenever a control batch is here; the test costs only markers
                elif markers is not None and (marker := markers[header.base_offset]) is not None:
                    aborted = state.complete_txn(header, *marker)
                    if aborted is not None:
                        segment.txn_index.append(aborted)
        last = headers[-1]
        self.log_end_offset = last.base_offset + last.last_offset_delta + 1
        if len(headers) == 1:
            records_count, max_header = last.records_count, last
        else:
            records_count = sum(h.records_count for h in headers)
            max_header = max(headers, key=lambda h: h.max_timestamp)
        self._unflushed_records += records_count
        info = LogAppendInfo(
            headers[0].base_offset,
            self.log_end_offset - 1,
            max_header.max_timestamp,
            max_header.last_offset,
            append_time,
            self.log_start_offset,
            records_count,
            headers,
        )
        config = self.config
        if self._unflushed_records >= config.flush_messages or (
            config.flush_ms < 2**62 and self.since_flush_ms() >= config.flush_ms
        ):
            self.flush()
        return info

    def _maybe_roll(self, size: int, headers: list[BatchHeader]) -> LogSegment:
        segment = self.segments[-1]
        if segment.size == 0:
            return segment
        config = self.config
        last = headers[-1]
        reason = None
        if segment.size + size > config.segment_bytes:
            reason = "segment.bytes"
        elif segment.index.entries >= segment.index.max_entries or (
            segment.time_index.entries >= segment.time_index.max_entries
        ):
            reason = "full index"
        elif last.base_offset + last.last_offset_delta - segment.base_offset > 2**31 - 1:
            reason = "relative offset overflow"
        else:
            max_timestamp = last.max_timestamp if len(headers) == 1 else max(h.max_timestamp for h in headers)
            if self._waited_for_roll(segment, max_timestamp) > config.max_segment_ms - config.segment_jitter_ms:
                reason = "segment.ms" if config.max_segment_ms == config.segment_ms else "max.compaction.lag.ms"
        if reason is None:
            return segment
        return self.roll(reason)

    def _waited_for_roll(self, segment: LogSegment, max_timestamp: int) -> int:
        rolling = segment.rolling_timestamp()
        if rolling != segment.created_ms and max_timestamp >= 0:
            return max_timestamp - rolling
        return self.now_ms() - segment.created_ms

    def roll(self, reason: str = "requested") -> LogSegment:
        """Start a new active segment at the log end; the old one is trimmed and flushed."""
        old = self.active_segment
        if old.size == 0:
            return old
        base = self.log_end_offset
        old.on_roll()
        new = self._new_segment(base, active=True)
        self.segments.append(new)
        self._bases.append(base)
        self.recovery_point = max(self.recovery_point, base)
        self.take_snapshot(base)
        log.debug("rolled %s at offset %d (%s)", self.directory, base, reason)
        return new

    def update_high_watermark(self, offset: int) -> int:
        """Set the committed end (the partition decides it); kept within [log start, log end]."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    # -- reads -------------------------------------------------------------------------------------
    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None = None, min_one_message: bool = True
    ) -> FetchData:
        """File slices from ``start_offset``, never past ``max_offset`` (exclusive: HW or LEO)."""
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {self.log_end_offset}] "
                f"of {self.topic}-{self.partition}"
            )
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if start_offset >= upper:
            return FetchData([])
        i = self.segment_for(start_offset)
        while i < len(self.segments):
            segment = self.segments[i]
            max_position = None
            if upper < self.log_end_offset and upper < (
                self.segments[i + 1].base_offset if i + 1 < len(self.segments) else 2**63
            ):
                max_position = self._position_of(segment, upper)
            found = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if found is not None:
                return FetchData([found], start_offset)
            if max_position is not None:
                break
            i += 1
        return FetchData([])

    def iter_batches(self, chunk_bytes: int = 4 * 1024 * 1024) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from the log start to the log end, as (header, the buffer holding it).

        The coordinators load their state by replaying an internal topic this way; a chunk is
        read at a time, so a large partition is never in memory at once.
        """
        offset = self.log_start_offset
        while offset < self.log_end_offset:
            data = self.read(offset, chunk_bytes, self.log_end_offset)
            if not data.slices:
                return
            chunk = b"".join(s.read() for s in data.slices)
            last = offset - 1
            for header in iter_batch_headers(chunk):
                if header.last_offset >= offset:
                    last = header.last_offset
                    yield header, chunk
            if last < offset:
                return
            offset = last + 1

    def _position_of(self, segment: LogSegment, offset: int) -> int:
        """File position where ``offset``'s batch starts; remembered, since fetches ask for the HW repeatedly."""
        cached = self._bound_cache
        if cached is not None and cached[0] is segment and cached[1] == offset and cached[3] == segment.size:
            return cached[2]
        bound = segment.translate_offset(offset)
        position = bound.position if bound is not None else segment.size
        self._bound_cache = (segment, offset, position, segment.size)
        return position

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (timestamp, offset) for EARLIEST(-2), LATEST(-1), MAX_TIMESTAMP(-3) or a time."""
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for segment in self.segments:
            if segment.max_timestamp >= timestamp or segment is self.active_segment:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def _max_timestamp_offset(self) -> tuple[int, int] | None:
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return None
        header = best.translate_offset(best.offset_of_max_timestamp)
        if header is None:
            return best.max_timestamp, best.offset_of_max_timestamp
        data = os.pread(best.fd, header.size, header.position)
        header.position = 0
        for record in decode_batch_records(data, header):
            if record.timestamp == best.max_timestamp:
                return record.timestamp, record.offset
        return best.max_timestamp, header.last_offset

    # -- retention and deletion --------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Retention: delete whole non-active segments past retention.ms, retention.bytes or the log start."""
        self._close_pending_deletes()
        now = self.now_ms()
        doomed: list[LogSegment] = []
        candidates = self.segments[:-1]
        for segment in candidates:  # below the log start (DeleteRecords)
            next_base = self._bases[self.segments.index(segment) + 1]
            if next_base <= self.log_start_offset:
                doomed.append(segment)
        if self.config.delete:
            if self.config.retention_ms >= 0:
                for segment in candidates:
                    if segment in doomed:
                        continue
                    largest = (
                        segment.max_timestamp
                        if segment.max_timestamp >= 0
                        else int(os.stat(segment.log_path).st_mtime * 1000)
                    )
                    if now - largest > self.config.retention_ms:
                        doomed.append(segment)
                    else:
                        break
            if self.config.retention_bytes >= 0:
                excess = self.size_in_bytes - sum(s.size for s in doomed) - self.config.retention_bytes
                for segment in candidates:
                    if segment in doomed:
                        continue
                    if excess - segment.size < 0:
                        break
                    doomed.append(segment)
                    excess -= segment.size
        doomed = [s for s in self.segments[:-1] if s in doomed]
        # only a prefix can go: a log has no holes between segments
        prefix = 0
        while prefix < len(doomed) and doomed[prefix] is self.segments[prefix]:
            prefix += 1
        doomed = doomed[:prefix]
        if not doomed:
            return 0
        self._remove_segments(doomed)
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
        self.high_watermark = max(self.high_watermark, self.log_start_offset)
        return len(doomed)

    def _remove_segments(self, doomed: list[LogSegment]) -> None:
        """Rename to .deleted now and close later (file.delete.delay.ms) so in-flight sendfiles finish."""
        deadline = self.monotonic_ms() + self.config.file_delete_delay_ms
        for segment in doomed:
            index = self.segments.index(segment)
            del self.segments[index]
            del self._bases[index]
            segment.change_suffix(DELETED_SUFFIX)
            self._pending_deletes.append((deadline, segment))
            log.info("deleted segment %d of %s", segment.base_offset, self.directory)

    def _close_pending_deletes(self, force: bool = False) -> None:
        now = self.monotonic_ms()
        keep = []
        for deadline, segment in self._pending_deletes:
            if force or now >= deadline:
                segment.delete_files()
            else:
                keep.append((deadline, segment))
        self._pending_deletes = keep

    def advance_log_start_offset(self, offset: int) -> None:
        """A follower follows the leader's log start (retention or DeleteRecords on the leader)."""
        offset = min(offset, self.log_end_offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.delete_old_segments()

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (at most the high watermark)."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: the high watermark is {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.recovery_point = max(self.recovery_point, min(offset, self.log_end_offset))
            self.delete_old_segments()
        return self.log_start_offset

    # -- truncation (replication) ------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Drop everything at and after ``offset``; returns whether anything was removed."""
        if offset >= self.log_end_offset:
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        producer_snapshot.delete_snapshots_after(self.directory, offset)  # before the data goes
        keep = bisect.bisect_right(self._bases, offset)
        for segment in self.segments[keep:]:
            segment.delete_files()
        del self.segments[keep:]
        del self._bases[keep:]
        self.truncations += 1
        segment = self.active_segment
        segment.truncate_to(offset)
        segment.make_active()
        self.log_end_offset = segment.read_next_offset()
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.truncations += 1
        producer_snapshot.delete_snapshots_after(self.directory, -1)
        for segment in self.segments:
            segment.delete_files()
        self.segments = [self._new_segment(offset, active=True)]
        self._bases = [offset]
        self.log_end_offset = self.log_start_offset = self.high_watermark = self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate()

    # -- replacing segments (the cleaner) ----------------------------------------------------------
    def replace_segments(
        self,
        cleaned: LogSegment,
        old: list[LogSegment],
        crash_hook: Callable[[str], None] | None = None,
        *,
        durable: bool = False,
    ) -> None:
        """Swap a .cleaned segment in for ``old`` the way Kafka does: .cleaned → .swap → live.

        Each step is a rename, and a crash between any two leaves files that ``_load`` turns into
        a readable log: before .swap exists the old segments are intact; once it does, the swap
        wins over whatever it covers.
        """
        hook = crash_hook or (lambda step: None)
        if not durable:  # the cleaner process fsyncs its files: an fsync here could stall the event loop
            cleaned.flush()
        cleaned.index.trim_to_valid_size()
        cleaned.time_index.trim_to_valid_size()
        hook("cleaned-written")
        cleaned.change_suffix(SWAP_SUFFIX)
        hook("renamed-to-swap")
        deadline = self.monotonic_ms() + self.config.file_delete_delay_ms
        for segment in old:
            segment.change_suffix(DELETED_SUFFIX)
            self._pending_deletes.append((deadline, segment))
            hook("old-segment-deleted")
        cleaned.change_suffix("")
        hook("swap-renamed")
        first = self.segments.index(old[0])
        self.segments[first : first + len(old)] = [cleaned]
        self._bases = [s.base_offset for s in self.segments]

    # -- durability --------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment holding data past the recovery point, then advance it."""
        start = self.segment_for(self.recovery_point)
        for segment in self.segments[start:]:
            segment.flush()
        self.recovery_point = self.log_end_offset
        self._unflushed_records = 0
        self._last_flush_ms = self.monotonic_ms()

    def close(self) -> None:
        self.flush()
        if self.log_end_offset > self.segments[0].base_offset or self.producer_state.producers:
            # a log without batches has no producer state to keep: no file (Kafka writes none either)
            self.take_snapshot()
        self.leader_epoch_cache.flush_if_changed()
        self._close_pending_deletes(force=True)
        for segment in self.segments:
            segment.close()

    def close_crashlike(self) -> None:
        """Drop file handles without flushing or trimming: what a kill -9 leaves (tests)."""
        for segment in self.segments:
            segment.close_crashlike()
        for _, segment in self._pending_deletes:
            segment.close_crashlike()

    def delete(self) -> None:
        """Remove the partition's files (topic deletion)."""
        for segment in self.segments:
            segment.delete_files()
        self._close_pending_deletes(force=True)
        for name in os.listdir(self.directory):
            os.unlink(os.path.join(self.directory, name))
        os.rmdir(self.directory)
