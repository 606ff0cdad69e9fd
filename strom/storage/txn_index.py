"""A segment's ``.txnindex``: the aborted transactions whose abort marker lies in that segment.

Entry (34 bytes, big-endian, Kafka's layout): >h version (0), >q producer_id, >q first_offset,
>q last_offset (the marker's offset), >q last_stable_offset (the LSO once this abort completed).

A read_committed fetch sends the aborted transactions that overlap the fetched range, so the
client can drop their batches; the index is what makes that a lookup rather than a scan. Aborts
are rare, so the entries are also kept in memory. As in Kafka, the file is made by the first
abort and a missing file means no aborts: most segments never have one, and a new partition
costs one inode fewer. The first flush after the file is made also syncs its directory, so a
file that a flush covered is not lost in a crash; one that no flush covered belongs to data past
the newest producer snapshot, which a restart replays and checks the index against (see
``Log._rebuild_producer_state``). A torn or corrupt file is rebuilt from the whole log.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from strom.storage.checkpoint import fsync_dir

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class CorruptTxnIndexError(ValueError):
    pass


class TransactionIndex:
    def __init__(self, path: str):
        self.path = path
        self.entries: list[AbortedTxn] = []
        self.needs_rebuild = False  # corrupt: rebuilt from the log's abort markers
        self._sync_dir = False  # made or replaced since the last flush: its directory entry too
        try:
            self.entries = self.read_entries(path)
        except FileNotFoundError:
            pass
        except CorruptTxnIndexError:
            self.needs_rebuild = True

    @staticmethod
    def read_entries(path: str) -> list[AbortedTxn]:
        with open(path, "rb") as handle:
            data = handle.read()
        if len(data) % ENTRY_SIZE:
            raise CorruptTxnIndexError(f"{path}: {len(data)} bytes is not a whole number of entries")
        entries = []
        for position in range(0, len(data), ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, position)
            if version != 0:
                raise CorruptTxnIndexError(f"{path}: entry version {version} at {position}")
            entries.append(AbortedTxn(*fields))
        return entries

    def append(self, entry: AbortedTxn) -> None:
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.path}: aborted txn ending at {entry.last_offset} is not after {self.entries[-1].last_offset}"
            )
        if not self.entries:
            self._sync_dir = True
        self.entries.append(entry)
        with open(self.path, "ab") as handle:
            handle.write(_ENTRY.pack(0, *entry))

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Rewrite the file with exactly ``entries`` (recovery, truncation, cleaning); none: no file."""
        self.entries = list(entries)
        self.needs_rebuild = False
        if not self.entries:
            self.delete()
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as handle:
            handle.write(b"".join(_ENTRY.pack(0, *e) for e in self.entries))
        os.replace(tmp, self.path)
        self._sync_dir = True

    def truncate_to(self, offset: int) -> None:
        """Forget aborts whose marker is at or after ``offset`` (the log was truncated there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.replace(kept)

    def collect(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_offset)."""
        return [e for e in self.entries if e.last_offset >= start_offset and e.first_offset < upper_offset]

    def flush(self) -> None:
        if not self.entries:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if self._sync_dir:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))
            self._sync_dir = False

    def rename(self, new_path: str) -> None:
        try:
            os.rename(self.path, new_path)
        except FileNotFoundError:
            pass  # no aborts in this segment
        self.path = new_path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
