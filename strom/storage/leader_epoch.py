"""Leader epoch cache (KIP-101): which leader epoch started at which offset, per partition.

A follower asks the leader "where did my latest epoch end?" (OffsetForLeaderEpoch) and truncates
to that answer rather than to its high watermark, which is what prevents the seeds' data-loss and
log-divergence scenarios. Persisted in the partition dir as leader-epoch-checkpoint.
"""

from __future__ import annotations

import os

from strom.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, partition_dir: str):
        self._file = LeaderEpochCheckpointFile(os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT))
        self.entries: list[tuple[int, int]] = self._file.read()
        # what the file holds (a missing file holds nothing); None: unreadable, so rewritten on close
        self._written: list[tuple[int, int]] | None = list(self.entries) if self._file.readable else None

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return self.entries[0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``, keeping both columns monotonic.

        An entry whose epoch or start offset is not below the new one can only come from a
        log that has since been truncated, so it is dropped (Kafka does the same).
        """
        if epoch < 0:
            return
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start_offset:
            return
        self.entries = [(e, s) for e, s in self.entries if e < epoch and s < start_offset]
        self.entries.append((epoch, start_offset))
        self.flush()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, start offset of the next epoch).

        The latest epoch ends at the log end offset; an epoch above every known one is
        undefined; an epoch below the first known one answers with the first start offset.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next(((e, s) for e, s in self.entries if e > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e, s in self.entries:
            if e <= requested_epoch:
                floor = (e, s)
        if floor is None:
            return requested_epoch, higher[1]
        return floor[0], higher[1]

    def epoch_for_offset(self, offset: int) -> int:
        epoch = UNDEFINED_EPOCH
        for e, s in self.entries:
            if s <= offset:
                epoch = e
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: forget epochs that started at or after it."""
        if end_offset >= 0 and self.entries and self.entries[-1][1] >= end_offset:
            self.entries = [(e, s) for e, s in self.entries if s < end_offset]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: the epoch covering it now starts there."""
        before = [(e, s) for e, s in self.entries if s <= start_offset]
        if not before:
            return
        floor_epoch = before[-1][0]
        rest = [(e, s) for e, s in self.entries if s > start_offset]
        updated = [(floor_epoch, start_offset)] + rest
        if updated != self.entries:
            self.entries = updated
            self.flush()

    def clear(self) -> None:
        self.entries = []
        self.flush()

    def flush(self) -> None:
        self._file.write(self.entries)
        self._written = list(self.entries)

    def flush_if_changed(self) -> None:
        """Write the file only if it does not hold the entries already: every change writes it,
        so a clean shutdown rewrites none, and a replica that never had a leader epoch (a new
        follower) gets no file at all."""
        if self.entries != self._written:
            self.flush()
