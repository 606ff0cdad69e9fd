"""One log segment: a .log file of record batches plus its sparse .index and .timeindex.

The .log holds v2 batches exactly as produced (offsets patched), back to back, so a range of it
can go to a socket with sendfile. Files are named by the segment's base offset, 20 digits.

A new segment creates only its .log (Kafka's LazyIndex defers its indexes too, but its log
loader touches them at once). The .index and .timeindex are made by their first entry, and at
the latest when a segment with data is rolled or closed (empty if it has no entries); the
.txnindex by the first aborted transaction. A segment with data but without an index file was
therefore cut short by a crash, or lost the file: its indexes are rebuilt from the .log.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, overload

from strom.clock import wall_time
from strom.protocol.errors import CorruptRecordError, InvalidRecordError, KafkaStorageError
from strom.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    batch_crc,
    decode_batch_records,
    read_batch_header,
)
from strom.storage.index_file import CorruptIndexError
from strom.storage.offset_index import OffsetIndex
from strom.storage.time_index import TimeIndex
from strom.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from strom.storage.write_behind import MAX_PENDING_BYTES, WriteBehind

log = logging.getLogger("strom.storage")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_SCAN_CHUNK = 1024 * 1024


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FileSlice:
    """A byte range of a segment file, for sendfile (or a plain read for TLS and tools)."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        return os.pread(self.fd, self.length, self.position)


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        suffix: str = "",
        active: bool = True,
        write_behind: WriteBehind | None = None,
        clock: Callable[[], float] = wall_time,
    ):
        self.directory = directory
        self.base_offset = base_offset
        self._clock = clock
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.suffix = suffix
        self.log_path = os.path.join(directory, file_name(base_offset, LOG_SUFFIX) + suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size  # includes appends still pending in _pending
        self.write_behind = write_behind
        self._pending = bytearray()  # leader appends not yet written (see strom.storage.write_behind)
        self.bytes_since_last_index_entry = 0
        self.created_ms = int(self._clock() * 1000)
        self._first_batch_timestamp: int | None = None
        self.active = active
        try:
            self.index, self.time_index = self._open_indexes(active)
            self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
            self.txn_index = TransactionIndex(self._txn_index_path())
        except BaseException:
            # out of descriptors, say: what was opened is closed, or the shortage would last
            for opened in ("index", "time_index"):
                if opened in self.__dict__:
                    self.__dict__[opened].close_without_trim()
            os.close(self._fd)
            self._fd = -1
            raise

    # -- files -------------------------------------------------------------------------------------
    @property
    def fd(self) -> int:
        if self._pending:
            self.write_pending()
        return self._fd

    def write_pending(self) -> None:
        """Write buffered appends to the file; every reader of the file calls this first."""
        pending = self._pending
        try:
            if pending and self._fd >= 0:
                self._write_fully(pending)
        finally:
            pending.clear()

    def discard_pending(self) -> None:
        """Drop buffered appends: their log dir failed, and none of them was acknowledged."""
        self._pending.clear()

    def _write_fully(self, data: bytes | bytearray | memoryview) -> None:
        """One write, and more only if the kernel took less (O_APPEND: each lands at the end).

        A failure (ENOSPC, EIO) is reported and becomes KafkaStorageError: the file may now end
        in a torn batch, so this log dir serves nothing more until a restart recovers it.
        """
        try:
            written = os.write(self._fd, data)
            if written < len(data):
                with memoryview(data) as view:
                    while written < len(data):
                        written += os.write(self._fd, view[written:])
        except OSError as exc:
            raise self._failed(exc, f"writing {self.log_path}") from exc

    def _failed(self, exc: OSError, doing: str) -> KafkaStorageError:
        if self.write_behind is not None:
            self.write_behind.failed(self.directory, exc, doing)
        return KafkaStorageError(f"{doing} failed: {exc.strerror or exc}")

    def _index_paths(self) -> tuple[str, str]:
        return (
            os.path.join(self.directory, file_name(self.base_offset, INDEX_SUFFIX) + self.suffix),
            os.path.join(self.directory, file_name(self.base_offset, TIME_INDEX_SUFFIX) + self.suffix),
        )

    def _txn_index_path(self) -> str:
        return os.path.join(self.directory, file_name(self.base_offset, TXN_INDEX_SUFFIX) + self.suffix)

    def _open_indexes(self, active: bool) -> tuple[OffsetIndex, TimeIndex]:
        index_path, time_index_path = self._index_paths()
        self.needs_index_rebuild = False
        try:
            index = OffsetIndex(index_path, self.base_offset, self.max_index_size, writable=active)
        except CorruptIndexError as exc:
            log.warning("rebuilding corrupt index: %s", exc)
            os.unlink(index_path)
            index = OffsetIndex(index_path, self.base_offset, self.max_index_size, writable=active)
            self.needs_index_rebuild = True
        try:
            try:
                time_index = TimeIndex(time_index_path, self.base_offset, self.max_index_size, writable=active)
            except CorruptIndexError as exc:
                log.warning("rebuilding corrupt time index: %s", exc)
                os.unlink(time_index_path)
                time_index = TimeIndex(time_index_path, self.base_offset, self.max_index_size, writable=active)
                self.needs_index_rebuild = True
        except BaseException:
            index.close_without_trim()
            raise
        # An index file missing next to a non-empty log was lost (see the module's docstring) or,
        # after a crash, never made: it is rebuilt (the caller sees `needs_index_rebuild`).
        if self.size > 0 and not (index.on_disk and time_index.on_disk):
            self.needs_index_rebuild = True
        if not self.needs_index_rebuild:
            try:
                index.sanity_check(self.size)
                self._check_last_index_entry(index)
            except CorruptIndexError as exc:
                log.warning("rebuilding index that disagrees with its log: %s", exc)
                index.reset()
                time_index.reset()
                self.needs_index_rebuild = True
        return index, time_index

    def _check_last_index_entry(self, index: OffsetIndex) -> None:
        """The last entry must name the batch at its position (one read): the log end is found
        by scanning from it, and a wrong start would put the next append at a wrong offset."""
        if not index.entries:
            return
        relative, position = index.entry(index.entries - 1)
        offset = self.base_offset + relative
        try:
            header = read_batch_header(os.pread(self._fd, BATCH_HEADER_SIZE, position), 0, self.size - position)
        except (CorruptRecordError, InvalidRecordError) as exc:
            raise CorruptIndexError(f"{index.path}: last entry points at no batch: {exc}") from None
        if header.last_offset != offset:
            raise CorruptIndexError(
                f"{index.path}: last entry says offset {offset}, its batch ends at {header.last_offset}"
            )

    def make_active(self) -> None:
        """Preallocate the indexes again: this segment takes appends now."""
        self.active = True
        self.index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)

    def on_roll(self) -> None:
        """Trim and flush on roll, as Kafka does, so an inactive segment's files are final."""
        self.active = False
        self._index_max_timestamp()
        self._seal_indexes()
        self.flush()

    def _seal_indexes(self) -> None:
        """Trim both indexes to their entries and make sure a segment with data has both files
        (empty ones if it has no entries): a missing file then means a lost one."""
        for index in (self.index, self.time_index):
            index.trim_to_valid_size()
            if self.size > 0:
                index.materialize()

    def _index_max_timestamp(self) -> None:
        """The time index's last entry must be the segment's max timestamp, so it survives a reopen."""
        if self.max_timestamp >= 0 and self.time_index.last_entry[0] < self.max_timestamp:
            if self.time_index.is_full:
                self.time_index.resize((self.time_index.entries + 1) * self.time_index.entry_size)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self) -> None:
        self.write_pending()
        try:
            os.fsync(self._fd)
            self.index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as exc:  # a failed fsync may have lost written pages (EIO): never retry it
            raise self._failed(exc, f"fsync of {self.log_path}") from exc

    def close(self) -> None:
        if self._fd < 0:
            return
        self.write_pending()
        self._index_max_timestamp()
        self._seal_indexes()
        self.index.close()
        self.time_index.close()
        os.close(self._fd)
        self._fd = -1

    def close_crashlike(self) -> None:
        """Close without trimming indexes (tests use it to leave what a crash leaves)."""
        self.write_pending()  # acknowledged appends reached the page cache, which a crash keeps
        self.index.close_without_trim()
        self.time_index.close_without_trim()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def change_suffix(self, new_suffix: str) -> None:
        """Rename all three files from the current suffix to ``new_suffix`` (.cleaned/.swap/.deleted/'')."""
        old_index, old_time = self._index_paths()
        old_log = self.log_path
        self.suffix = new_suffix
        new_index, new_time = self._index_paths()
        self.log_path = os.path.join(self.directory, file_name(self.base_offset, LOG_SUFFIX) + new_suffix)
        os.rename(old_log, self.log_path)
        self.index.rename(new_index)
        self.time_index.rename(new_time)
        self.txn_index.rename(self._txn_index_path())

    def delete_files(self) -> None:
        self.close_crashlike()
        for path in (self.log_path, *self._index_paths()):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.txn_index.delete()

    # -- appends -----------------------------------------------------------------------------------
    def append(self, buf: bytes | bytearray | memoryview, headers: list[BatchHeader], *, defer: bool = False) -> None:
        """Write validated, offset-assigned batches and index them.

        With ``defer`` (leader appends) small batches wait in a buffer that the segment's
        WriteBehind writes once per event-loop turn. Index entries are added per batch once
        ``index.interval.bytes`` have accumulated; the time index gets an entry whenever the max
        timestamp grows.
        """
        position = self.size
        total = len(buf)
        pending = self._pending
        if (
            defer
            and self.write_behind is not None
            and len(pending) + total <= MAX_PENDING_BYTES
            and (pending or self.write_behind.defer(self))
        ):
            pending += buf
        else:
            if pending:
                self.write_pending()
            self._write_fully(buf)
        if self.size == 0 and self._first_batch_timestamp is None:
            self._first_batch_timestamp = headers[0].max_timestamp
        interval = self.index_interval_bytes
        for header in headers:
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset + header.last_offset_delta
            if self.bytes_since_last_index_entry > interval:
                self.index.append(header.base_offset + header.last_offset_delta, position + header.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += header.batch_length + 12
        self.size += total

    def can_index(self, last_offset: int) -> bool:
        """Relative offsets are uint32 in both indexes; Kafka also keeps them below Int.MaxValue."""
        return 0 <= last_offset - self.base_offset <= 2**31 - 1

    @property
    def indexes_full(self) -> bool:
        return self.index.is_full or self.time_index.is_full

    def rolling_timestamp(self) -> int:
        """Kafka rolls by the first batch's timestamp when it has one, else the segment's creation."""
        first = self.first_batch_timestamp()
        return first if first >= 0 else self.created_ms

    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp (-1: none); max.compaction.lag.ms is measured from it too."""
        if self._first_batch_timestamp is None and self.size > 0:
            first = next(self.iter_batches(), None)
            self._first_batch_timestamp = first.max_timestamp if first is not None else -1
        return self._first_batch_timestamp if self._first_batch_timestamp is not None else -1

    # -- reads -------------------------------------------------------------------------------------
    @overload
    def iter_batches(
        self, start_position: int = 0, end_position: int | None = None, *, with_data: Literal[False] = False
    ) -> Iterator[BatchHeader]: ...
    @overload
    def iter_batches(
        self, start_position: int = 0, end_position: int | None = None, *, with_data: Literal[True]
    ) -> Iterator[tuple[BatchHeader, memoryview]]: ...

    def iter_batches(
        self, start_position: int = 0, end_position: int | None = None, *, with_data: bool = False
    ) -> Iterator[BatchHeader | tuple[BatchHeader, memoryview]]:
        """Batches from ``start_position``, read in large chunks; stops at the first bad header.

        Yields headers with absolute file positions (and their bytes when ``with_data``). Callers
        that must tell damage from a clean end (recovery) use ``scan_valid_prefix``.
        """
        if self._pending:
            self.write_pending()
        end = self.size if end_position is None else min(end_position, self.size)
        position = start_position
        while position < end:
            want = min(_SCAN_CHUNK, end - position) if with_data else min(BATCH_HEADER_SIZE * 64, end - position)
            chunk = os.pread(self._fd, want, position)
            if not chunk:
                return
            offset_in_chunk = 0
            while offset_in_chunk + BATCH_HEADER_SIZE <= len(chunk):
                try:
                    header = read_batch_header(chunk, offset_in_chunk, end - position - offset_in_chunk)
                except (CorruptRecordError, InvalidRecordError):
                    return
                header.position = position + offset_in_chunk
                if with_data:
                    if offset_in_chunk + header.size > len(chunk):
                        if offset_in_chunk == 0:  # a single batch larger than the chunk
                            data = os.pread(self._fd, header.size, header.position)
                            yield header, memoryview(data)
                            offset_in_chunk += header.size
                        break
                    yield header, memoryview(chunk)[offset_in_chunk : offset_in_chunk + header.size]
                else:
                    yield header
                offset_in_chunk += header.size
                if not with_data and offset_in_chunk + BATCH_HEADER_SIZE > len(chunk):
                    break
            if offset_in_chunk == 0 and len(chunk) < BATCH_HEADER_SIZE:
                return
            position += offset_in_chunk
            if offset_in_chunk == 0:
                return

    def read_batch(self, header: BatchHeader) -> bytes:
        """The whole batch ``header`` describes (its position is in this file)."""
        return os.pread(self.fd, header.size, header.position)

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset is >= ``offset`` (index lookup, then a short scan)."""
        _, position = self.index.lookup(offset)
        candidate = None
        for header in self.iter_batches(max(position, start_position)):
            if candidate is not None:
                if header.base_offset > candidate.last_offset:
                    return candidate
                # The CRC does not cover baseOffset: a batch whose offsets run past its successor's
                # is damaged, and returning it would hide every offset up to its claimed end.
                log.warning(
                    "%s: batch at position %d claims offsets %d..%d, beyond the next batch's %d; skipped",
                    self.log_path,
                    candidate.position,
                    candidate.base_offset,
                    candidate.last_offset,
                    header.base_offset,
                )
                candidate = None
            if header.last_offset >= offset:
                if header.base_offset <= offset:
                    return header
                candidate = header  # the offset lies in a gap (compaction), or this batch is damaged
        return candidate

    def read(
        self, start_offset: int, max_size: int, max_position: int | None = None, min_one_message: bool = False
    ) -> FileSlice | None:
        """The bytes from the batch holding ``start_offset`` up to ``max_size``, as Kafka sends them.

        With ``min_one_message`` the first batch goes out whole even when larger than max_size,
        so a consumer never gets stuck behind an oversized batch. The end may cut a batch short;
        clients drop a partial trailing batch, as with Kafka.
        """
        header = self.translate_offset(start_offset)
        if header is None:
            return None
        end = self.size if max_position is None else min(max_position, self.size)
        if header.position >= end:
            return None
        limit = max(max_size, header.size) if min_one_message else max_size
        length = min(end - header.position, limit)
        if length <= 0:
            return None
        return FileSlice(self.fd, header.position, length)

    def read_next_offset(self) -> int:
        """The offset after the last batch (scans from the last index entry only)."""
        _, position = self.index.lookup(2**63 - 1)
        next_offset = self.base_offset
        for header in self.iter_batches(position):
            next_offset = header.next_offset
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= target at or after start_offset."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        header = self.translate_offset(max(indexed_offset, start_offset))
        if header is None:
            return None
        for batch, data in self.iter_batches(header.position, with_data=True):
            if batch.max_timestamp < timestamp:
                continue
            batch.position = 0
            for record in decode_batch_records(data, batch):
                if record.timestamp >= timestamp and record.offset >= start_offset:
                    return record.timestamp, record.offset
        return None

    # -- recovery and truncation -------------------------------------------------------------------
    def _checked_batches(self, position: int) -> Iterator[BatchHeader]:
        """Whole batches that pass their CRC, from ``position``; stops, logging why, at the first damaged one."""
        self.write_pending()
        previous = self.base_offset - 1  # the CRC does not cover baseOffset: offsets must increase too
        while position < self.size:
            try:
                head = os.pread(self._fd, BATCH_HEADER_SIZE, position)
                header = read_batch_header(head, 0, self.size - position)
                data = os.pread(self._fd, header.size, position)
                if batch_crc(data, 0, header.size) != header.crc:
                    raise CorruptRecordError(f"CRC mismatch in batch at offset {header.base_offset}")
                if not self.can_index(header.last_offset) or header.base_offset < self.base_offset:
                    raise CorruptRecordError(f"batch offset {header.base_offset} does not belong in this segment")
                if header.base_offset <= previous or header.last_offset < header.base_offset:
                    raise CorruptRecordError(
                        f"batch offsets {header.base_offset}..{header.last_offset} do not follow offset {previous}"
                    )
            except (CorruptRecordError, InvalidRecordError, ValueError) as exc:
                log.warning("damaged batch in %s at position %d: %s", self.log_path, position, exc)
                return
            header.position = position
            previous = header.last_offset
            yield header
            position += header.size

    def tail_is_valid(self) -> bool:
        """Whether the offset index is in order and the batches after its last entry are whole
        and pass their CRC.

        At most index.interval.bytes plus one batch: cheap enough for every start, clean or not.
        A clean-shutdown marker says the broker stopped in order, not that nothing touched the
        file since, and appending after a torn batch would hide everything appended later.
        """
        if not self.index.in_order():  # lookups would land anywhere, the next append's included
            return False
        _, position = self.index.lookup(2**63 - 1)
        end = position
        for header in self._checked_batches(position):
            end = header.position + header.size
        return end == self.size

    def recover(self) -> int:
        """Rebuild both indexes by scanning the .log, truncating at the first torn or corrupt batch.

        Returns the number of bytes truncated. Everything before the damage is kept.
        """
        self.index.reset()
        self.time_index.reset()
        self.index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.bytes_since_last_index_entry = 0
        valid_end = 0
        for header in self._checked_batches(0):
            position = header.position
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if self.bytes_since_last_index_entry > self.index_interval_bytes:
                self.index.append(header.last_offset, position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += header.size
            valid_end = position + header.size
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
        self._index_max_timestamp()
        if not self.active:
            self._seal_indexes()
        self.needs_index_rebuild = False
        self._first_batch_timestamp = None
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (whole batches); returns bytes removed."""
        header = self.translate_offset(offset)
        if header is None:
            return 0
        position = header.position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        self.bytes_since_last_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if position == 0:
            self._first_batch_timestamp = None
            self.created_ms = int(self._clock() * 1000)
        return removed
