"""Coalesces the small leader appends of one event-loop turn into one write per segment.

A client that sends one message per Produce request (``linger.ms=0``) pipelines hundreds of tiny
requests, which the broker handles in one turn of the event loop. Writing each to its segment
file costs a system call that is most of the request's cost, so leader appends are held in the
segment's buffer and written together: by the connection before it sends the responses of the
requests it just handled (so nothing is acknowledged before it reaches the page cache, Kafka's
acks=1 guarantee), by any read of the segment, and, for appends made elsewhere (the group
coordinator, the controller), by a callback at the end of the turn.

It is also where segments report a failed write (Kafka's LogDirFailureChannel): the owner of the
log dirs takes the directory offline, and the connection answers KAFKA_STORAGE_ERROR instead of
the success it had queued for an append that may not have reached the file.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from strom.protocol.errors import KafkaStorageError

# Past this, a segment writes its buffer at once: memory held by deferred appends stays small.
MAX_PENDING_BYTES = 1024 * 1024

log = logging.getLogger("strom.storage")

# (partition directory, the error, what was being done): takes the partition's log dir offline
FailureHandler = Callable[[str, OSError, str], None]


class Buffering(Protocol):
    """A segment holding appends not yet written (strom.storage.segment.LogSegment, which imports this module)."""

    def write_pending(self) -> None: ...


class WriteBehind:
    __slots__ = ("_segments", "_scheduled", "on_failure")

    def __init__(self, on_failure: FailureHandler | None = None) -> None:
        self._segments: list[Buffering] = []
        self._scheduled = False
        self.on_failure = on_failure

    def defer(self, segment: Buffering) -> bool:
        """Register a segment that has started buffering; False when there is no event loop to flush it."""
        if not self._scheduled:
            try:
                asyncio.get_running_loop().call_soon(self.write_all)
            except RuntimeError:
                return False
            self._scheduled = True
        self._segments.append(segment)
        return True

    def write_all(self) -> None:
        """Write every buffered append to its file (a no-op when nothing is pending).

        A failed write leaves a log whose offsets and indexes run ahead of its file. The segment
        has reported it (``failed``), so its directory is offline and serves nothing more; the
        other segments are still written. Nothing pending was acknowledged, and the next start's
        recovery truncates whatever part reached the file torn.
        """
        segments = self._segments
        if segments:
            self._segments = []
            for segment in segments:
                try:
                    segment.write_pending()
                except KafkaStorageError:
                    pass  # reported by the segment; its log dir is offline now
        self._scheduled = False

    def failed(self, partition_dir: str, exc: OSError, doing: str) -> None:
        """A write under ``partition_dir`` failed; without an owner to tell, say so loudly."""
        if self.on_failure is not None:
            self.on_failure(partition_dir, exc, doing)
        else:
            log.error("%s failed: %s", doing, exc)
