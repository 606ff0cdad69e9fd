"""The memory-mapped, preallocated, fixed-entry-size file that .index and .timeindex share.

An index is sparse and append-only with strictly increasing keys, so a lookup is a binary search
over the mapped bytes. The active segment's index is preallocated to ``segment.index.bytes`` so
appends never grow the file; it is trimmed to its entries when the segment rolls or the log
closes. A file left preallocated by a crash has a zero-filled tail, which ``_count_entries``
recognises because real entries are strictly increasing.

The file is created on first need, as Kafka's LazyIndex loads it on first use: a new partition
then costs one inode for its .log, not three (on ext4 without a journal, each inode allocation
scans past every recently deleted one, and a 512-partition topic made after another was deleted
spent 2 s of broker CPU there). Until then the index reads as empty, which is what an index
with no entries answers: every lookup falls back to the start of the segment.
"""

from __future__ import annotations

import errno
import os
import struct

from strom.storage.file_mapping import FileMapping

ALLOCATE_CHUNK = 64 * 1024


class CorruptIndexError(Exception):
    """The index does not match what its invariants allow; the log rebuilds it from the .log."""


class IndexFile:
    ENTRY: struct.Struct  # set by subclasses

    def __init__(self, path: str, base_offset: int, max_index_size: int, writable: bool = True):
        self.path = path
        self.base_offset = base_offset
        self.entry_size = self.ENTRY.size
        self._max_index_size = max(self.entry_size, max_index_size - max_index_size % self.entry_size)
        self._mapping: FileMapping | None = None
        self._mmap: memoryview | None = None  # the mapping's bytes; never handed out (see file_mapping)
        self.max_entries = 0
        self.entries = 0
        self._allocated = 0  # bytes from the start known to have blocks behind them
        self._fallocate = True
        self._closed = False
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            # not made yet: created by the first entry (or ``materialize``), with the size asked for
            self.on_disk = False
            if writable:
                self.resize(self._max_index_size)
            return
        self.on_disk = True
        try:
            length = os.fstat(fd).st_size
            if length % self.entry_size:
                raise CorruptIndexError(f"{path}: size {length} is not a multiple of {self.entry_size}")
            self._map(fd, length)
        except BaseException:
            self.close_without_trim()
            raise
        finally:
            os.close(fd)
        try:
            self.entries = self._count_entries(length // self.entry_size) if length else 0
            if writable:
                self.resize(self._max_index_size)
            self._check_order()
        except BaseException:
            self.close_without_trim()
            raise

    # -- mapping ---------------------------------------------------------------------------------
    # No descriptor is kept: the mapping needs none (FileMapping), and the rare operations that
    # need one (resize on roll, fallocate per 64 KiB) open the file for the call. A partition
    # replica then holds one descriptor, its .log, not five.
    def _map(self, fd: int, length: int) -> None:
        self._unmap()
        if length > 0:
            self._mapping = FileMapping(fd, length)
            self._mmap = self._mapping.view
        self.max_entries = length // self.entry_size
        self._allocated = min(self._allocated, length)  # a shrink gave the blocks past it back

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def resize(self, size: int) -> None:
        """Grow (preallocate, for the active segment) or shrink the file; entries are kept."""
        size = max(size - size % self.entry_size, self.entries * self.entry_size)
        if not self.on_disk:  # the size the file gets when it is made
            self.max_entries = size // self.entry_size
            return
        if self._mmap is not None and len(self._mmap) == size:
            return
        if self._mapping is not None:
            self._mapping.flush()
            self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.ftruncate(fd, size)
            self._map(fd, size)
        finally:
            os.close(fd)

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.entry_size)

    def materialize(self) -> None:
        """Create the file now if it is not there yet, at the size last asked for (``resize``)."""
        if self.on_disk or self._closed:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = self.max_entries * self.entry_size
            if size:
                os.ftruncate(fd, size)
            self.on_disk = True
            self._map(fd, size)
        finally:
            os.close(fd)

    def flush(self) -> None:
        if self._mapping is not None:
            self._mapping.flush()

    def _unmap(self) -> None:
        mapping, self._mapping, self._mmap = self._mapping, None, None
        if mapping is not None:
            mapping.close()

    def close(self) -> None:
        if self._closed:
            return
        self.trim_to_valid_size()
        self.close_without_trim()

    def close_without_trim(self) -> None:
        """Simulates or handles a crash-like close: the preallocated tail stays on disk."""
        self._unmap()
        self.max_entries = 0
        self._closed = True

    def rename(self, new_path: str) -> None:
        if self.on_disk:
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        self.close_without_trim()
        self.on_disk = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # -- entries ---------------------------------------------------------------------------------
    def entry(self, n: int) -> tuple[int, int]:
        # Mapped whenever there are entries; an assert would cost in every step of every lookup.
        return self.ENTRY.unpack_from(self._mmap, n * self.entry_size)  # type: ignore[arg-type]

    def key_of(self, entry: tuple[int, int]) -> int:
        """The field entries are sorted by (relative offset or timestamp)."""
        raise NotImplementedError

    def _append_entry(self, key: int, value: int) -> None:
        if self.is_full:  # also when unmapped: max_entries is 0 then
            raise CorruptIndexError(f"{self.path}: index is full ({self.entries} entries)")
        if not self.on_disk:
            self.materialize()
        mapped = self._mmap
        assert mapped is not None
        position = self.entries * self.entry_size
        if position + self.entry_size > self._allocated:
            self._allocate(position)
        self.ENTRY.pack_into(mapped, position, key, value)
        self.entries += 1

    def _allocate(self, position: int) -> None:
        """Reserve disk blocks for the next stretch of entries before storing into the mapping.

        The preallocated file is sparse; on a full disk the first store into a page that has no
        block behind it raises SIGBUS, which kills the process. posix_fallocate makes that an
        OSError (ENOSPC) the caller can turn into a log dir failure. One call per 64 KiB.
        """
        assert self._mmap is not None
        end = min(len(self._mmap), (position // ALLOCATE_CHUNK + 1) * ALLOCATE_CHUNK)
        if self._fallocate:
            try:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    os.posix_fallocate(fd, position, end - position)
                finally:
                    os.close(fd)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                self._fallocate = False  # a filesystem without it: stores stay unguarded, as before
        self._allocated = end

    def _count_entries(self, slots: int) -> int:
        """Entries in use: a crash leaves a zero tail after the strictly increasing entries."""
        zero = bytes(self.entry_size)
        mapped = self._mmap
        if mapped is None:  # an empty file is not mapped
            return 0
        low, high = 1, slots  # slot 0 may legitimately be all zeros (offset 0 at position 0)
        while low < high:
            mid = (low + high) // 2
            start = mid * self.entry_size
            if mapped[start : start + self.entry_size] == zero:
                high = mid
            else:
                low = mid + 1
        return min(low, slots)

    def _check_order(self) -> None:
        """Kafka's cheap sanity check: the last entries must increase (a full scan would slow startup)."""
        if self.entries >= 2:
            previous, last = self.key_of(self.entry(self.entries - 2)), self.key_of(self.entry(self.entries - 1))
            if last <= previous:
                raise CorruptIndexError(f"{self.path}: last entry key {last} does not increase (previous {previous})")

    def largest_at_or_below(self, target: int) -> int:
        """Slot of the last entry whose key is <= target, or -1 when every key is larger."""
        low, high = 0, self.entries - 1
        found = -1
        while low <= high:
            mid = (low + high) // 2
            if self.key_of(self.entry(mid)) <= target:
                found = mid
                low = mid + 1
            else:
                high = mid - 1
        return found

    def smallest_at_or_above(self, target: int) -> int:
        """Slot of the first entry whose key is >= target, or ``entries`` when none is."""
        low, high = 0, self.entries
        while low < high:
            mid = (low + high) // 2
            if self.key_of(self.entry(mid)) < target:
                low = mid + 1
            else:
                high = mid
        return low

    def truncate_entries(self, count: int) -> None:
        count = max(0, min(count, self.entries))
        if self._mmap is not None and count < self.entries:
            start = count * self.entry_size
            self._mmap[start : self.entries * self.entry_size] = bytes((self.entries - count) * self.entry_size)
        self.entries = count

    def reset(self) -> None:
        self.truncate_entries(0)
