"""Kafka's text checkpoint files, written atomically.

Format (every checkpoint Kafka writes in a log dir or partition dir)::

    <version>
    <entry count>
    <entry fields separated by one space>...

Offset checkpoints (recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint, cleaner-offset-checkpoint) hold ``topic partition offset`` lines;
leader-epoch-checkpoint holds ``epoch startOffset`` lines. A write goes to ``<file>.tmp``, is
fsynced, renamed over the old file and the directory fsynced, so a crash leaves either the old
or the new file, never a torn one. ``deferred_syncs`` keeps that promise for many files at once
at the cost of two filesystem syncs in all.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence

log = logging.getLogger("strom.storage")

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class CheckpointError(ValueError):
    pass


class DeferredSyncError(OSError):
    """The syncs or renames that end a ``deferred_syncs`` block failed (a disk failing under it)."""


def fsync_dir(path: str) -> None:
    """Make a rename or create durable: the directory entry itself must reach the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# While deferred_syncs() is open in a thread: checkpoint path -> its written, not yet synced, .tmp.
# Per thread: the cleaner checkpoint is written on an executor thread, and must not join a pass.
_local = threading.local()
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def deferred_syncs() -> Iterator[None]:
    """Checkpoint writes inside the block share two filesystem syncs instead of two fsyncs each.

    A broker that takes over the leadership of thousands of partitions at once (a 10,000-partition
    cluster losing a broker) writes a leader-epoch checkpoint for each; an fsync of the file and
    of its directory per partition kept the event loop busy for 15 s on this machine. Inside the
    block a write goes to its ``.tmp`` unsynced and its rename waits; on leaving, one syncfs per
    filesystem makes every ``.tmp`` durable, the renames happen, and a second syncfs makes them
    durable. A crash at any point leaves the old file or the new one, never a torn one, as with
    a single write. The caller holds the event loop for the whole block, so nothing acts on the
    new contents (an append at a new leader epoch) before they are on disk. A ``.tmp`` whose
    directory went away meanwhile (a replica deleted in the same pass) is dropped.
    """
    if getattr(_local, "pending", None) is not None:  # nested: the outer block syncs
        yield
        return
    _local.pending = {}
    try:
        yield
    finally:
        pending: dict[str, str] = _local.pending
        _local.pending = None
        if pending:
            try:
                _sync_filesystems({os.path.dirname(tmp) for tmp in pending.values()})
                for path, tmp in pending.items():
                    try:
                        os.replace(tmp, path)
                    except FileNotFoundError:
                        pass  # its partition dir was renamed for deletion in the same pass
                _sync_filesystems({os.path.dirname(path) for path in pending})
            except OSError as exc:
                raise DeferredSyncError(exc.errno, exc.strerror, exc.filename) from exc


def _sync_filesystems(directories: Iterable[str]) -> None:
    """syncfs once for each filesystem holding one of ``directories`` (those gone are skipped)."""
    devices: set[int] = set()
    for directory in sorted(directories):
        try:
            fd = os.open(directory, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            device = os.fstat(fd).st_dev
            if device not in devices:
                devices.add(device)
                if _libc.syncfs(fd) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code), directory)
        finally:
            os.close(fd)


def write_lines_atomically(path: str, lines: Iterable[str], version: int = CHECKPOINT_VERSION) -> None:
    entries = list(lines)
    text = f"{version}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        pending = getattr(_local, "pending", None)
        if pending is not None:
            pending[path] = tmp
            return
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_lines(path: str, fields: int, version: int = CHECKPOINT_VERSION) -> list[list[str]]:
    """Entries of a checkpoint; a missing file is empty, a malformed one raises CheckpointError."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2:
        raise CheckpointError(f"{path}: truncated checkpoint header")
    try:
        found_version = int(lines[0])
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed checkpoint header") from None
    if found_version != version:
        raise CheckpointError(f"{path}: unsupported checkpoint version {found_version}")
    body = [line.split(" ") for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    for entry in body:
        if len(entry) != fields:
            raise CheckpointError(f"{path}: malformed entry {' '.join(entry)!r}")
    return body


class OffsetCheckpointFile:
    """``topic partition offset`` per line; topics may contain dots, underscores and dashes."""

    def __init__(self, path: str):
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_lines_atomically(self.path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))

    def read(self) -> dict[tuple[str, int], int]:
        try:
            return {(t, int(p)): int(o) for t, p, o in read_lines(self.path, 3)}
        except (CheckpointError, ValueError) as exc:
            # A damaged checkpoint only costs recovery work (Kafka treats it the same way).
            log.warning("ignoring unreadable checkpoint %s: %s", self.path, exc)
            return {}


class LeaderEpochCheckpointFile:
    """``epoch startOffset`` per line, in epoch order."""

    def __init__(self, path: str):
        self.path = path

    def write(self, entries: Sequence[tuple[int, int]]) -> None:
        write_lines_atomically(self.path, (f"{e} {o}" for e, o in entries))

    def read(self) -> list[tuple[int, int]]:
        try:
            return [(int(e), int(o)) for e, o in read_lines(self.path, 2)]
        except (CheckpointError, ValueError) as exc:
            log.warning("ignoring unreadable leader epoch checkpoint %s: %s", self.path, exc)
            return []
