"""The .index file: maps offsets to positions in the segment's .log."""

from __future__ import annotations

import struct

from strom.storage.index_file import CorruptIndexError, IndexFile


class OffsetIndex(IndexFile):
    """Entry: >I relative_offset, >I position; sparse, one per log.index.interval.bytes of batches.

    Entries point at the start of a batch; the relative offset is the batch's last offset minus
    the segment's base offset (as Kafka writes it), so a lookup lands on a batch at or before
    the target and the reader scans forward from there.
    """

    ENTRY = struct.Struct(">II")

    def key_of(self, entry: tuple) -> int:
        return entry[0]

    @property
    def last_offset(self) -> int:
        if self.entries == 0:
            return self.base_offset
        return self.base_offset + self.entry(self.entries - 1)[0]

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not 0 <= relative < 2**32:
            raise CorruptIndexError(f"{self.path}: offset {offset} is out of range for base {self.base_offset}")
        if self.entries and offset <= self.last_offset:
            raise CorruptIndexError(
                f"{self.path}: append of offset {offset} <= last offset {self.last_offset}"
            )
        self._append_entry(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``; (base, 0) when none is."""
        slot = self.largest_at_or_below(offset - self.base_offset)
        if slot < 0:
            return self.base_offset, 0
        relative, position = self.entry(slot)
        return self.base_offset + relative, position

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset`` (their batches are being truncated)."""
        self.truncate_entries(self.smallest_at_or_above(offset - self.base_offset))

    def sanity_check(self, log_size: int) -> None:
        if self.entries and self.entry(self.entries - 1)[1] > log_size:
            raise CorruptIndexError(f"{self.path}: last entry points past the end of the log ({log_size} bytes)")
