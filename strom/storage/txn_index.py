"""A segment's ``.txnindex``: the aborted transactions whose abort marker lies in that segment.

Entry (34 bytes, big-endian, Kafka's layout): >h version (0), >q producer_id, >q first_offset,
>q last_offset (the marker's offset), >q last_stable_offset (the LSO once this abort completed).

A read_committed fetch sends the aborted transactions that overlap the fetched range, so the
client can drop their batches; the index is what makes that a lookup rather than a scan. Aborts
are rare, so the entries are also kept in memory. Unlike Kafka, which creates the file only when
the first abort arrives, strom creates it (empty) with its segment: then a missing file means a
lost one, and the log rebuilds it from the markers instead of silently serving aborted data as
committed (see ``Log._rebuild_producer_state``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

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
    def __init__(self, path: str, *, create: bool):
        self.path = path
        self.entries: list[AbortedTxn] = []
        self.needs_rebuild = False  # missing or corrupt next to a segment with data
        if os.path.exists(path):
            try:
                self.entries = self.read_entries(path)
            except CorruptTxnIndexError:
                self.needs_rebuild = True
        elif create:
            open(path, "ab").close()
        else:
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
        self.entries.append(entry)
        with open(self.path, "ab") as handle:
            handle.write(_ENTRY.pack(0, *entry))

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Rewrite the file with exactly ``entries`` (recovery, truncation, cleaning)."""
        self.entries = list(entries)
        self.needs_rebuild = False
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as handle:
            handle.write(b"".join(_ENTRY.pack(0, *e) for e in self.entries))
        os.replace(tmp, self.path)

    def truncate_to(self, offset: int) -> None:
        """Forget aborts whose marker is at or after ``offset`` (the log was truncated there)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.replace(kept)

    def collect(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_offset)."""
        return [e for e in self.entries if e.last_offset >= start_offset and e.first_offset < upper_offset]

    def flush(self) -> None:
        if self.entries and os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
