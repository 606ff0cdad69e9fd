"""The .timeindex file: maps timestamps to offsets for ListOffsets by time."""

from __future__ import annotations

import struct

from strom.storage.index_file import CorruptIndexError, IndexFile


class TimeIndex(IndexFile):
    """Entry: >q timestamp, >I relative_offset; added only when the segment's max timestamp grows.

    The offset of an entry is the last offset of the batch that carried the new max timestamp,
    so every message before it has a smaller timestamp, which makes a binary search valid even
    though producers' CreateTime timestamps are not monotonic.
    """

    ENTRY = struct.Struct(">qI")

    def key_of(self, entry: tuple[int, int]) -> int:
        return entry[0]

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the newest entry, or (-1, base) when empty."""
        if self.entries == 0:
            return -1, self.base_offset
        timestamp, relative = self.entry(self.entries - 1)
        return timestamp, self.base_offset + relative

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        last_timestamp, last_offset = self.last_entry
        if self.entries and (timestamp <= last_timestamp or offset < last_offset):
            return False
        relative = offset - self.base_offset
        if not 0 <= relative < 2**32:
            raise CorruptIndexError(f"{self.path}: offset {offset} is out of range for base {self.base_offset}")
        self._append_entry(timestamp, relative)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target; (-1, base) if none."""
        slot = self.largest_at_or_below(timestamp)
        if slot < 0:
            return -1, self.base_offset
        found, relative = self.entry(slot)
        return found, self.base_offset + relative

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        keep = 0
        while keep < self.entries and self.entry(keep)[1] + self.base_offset < offset:
            keep += 1
        self.truncate_entries(keep)
