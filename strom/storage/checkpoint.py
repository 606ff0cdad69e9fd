"""Kafka's text checkpoint files, written atomically.

Format (every checkpoint Kafka writes in a log dir or partition dir)::

    <version>
    <entry count>
    <entry fields separated by one space>...

Offset checkpoints (recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint, cleaner-offset-checkpoint) hold ``topic partition offset`` lines;
leader-epoch-checkpoint holds ``epoch startOffset`` lines. A write goes to ``<file>.tmp``, is
fsynced, renamed over the old file and the directory fsynced, so a crash leaves either the old
or the new file, never a torn one. ``deferred_syncs`` keeps that promise for many files at once,
written by several threads, and off the caller's thread if it wishes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
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


# While deferred_syncs() is open in a thread: its batch of checkpoint writes, not yet on disk.
# Per thread: the cleaner checkpoint is written on an executor thread, and must not join a pass.
_local = threading.local()
# checkpoint path -> the newest batch that will write it; a later write of the path (another
# batch, or a plain write) takes it over, and the older batch then leaves the file alone. A
# path's claim is taken, checked and given up under its stripe of _claim_locks.
_claims: dict[str, DeferredBatch] = {}
_claim_locks = [threading.Lock() for _ in range(64)]
# One thread hands each batch to the file workers and waits, so that batches land in order.
_writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="strom-checkpoints")
# Writes of many files at once: measured here with 1,000 leader-epoch checkpoints, 16 threads
# each doing write, fsync, rename, fsync of the directory took 0.95 s where one thread with two
# syncfs in all took 2.8 s (renames are ~2 ms each on a busy disk, and overlap across threads;
# ext4 commits concurrent fsyncs together); and a syncfs waits for every other writer's dirty data.
FILE_WORKERS = 16
_files = concurrent.futures.ThreadPoolExecutor(max_workers=FILE_WORKERS, thread_name_prefix="strom-checkpoint-file")
_in_flight: set[concurrent.futures.Future[None]] = set()
DEFERRED_TMP_SUFFIX = ".deferred.tmp"  # not Kafka's .tmp: a plain write of the same file may run meanwhile


def _claim_lock(path: str) -> threading.Lock:
    return _claim_locks[hash(path) % len(_claim_locks)]


class DeferredBatch:
    """The checkpoint writes of one ``deferred_syncs`` block: path -> the file's new text.

    ``sync`` writes each file as a plain write does (``.tmp``, fsync, rename, fsync of the
    directory), ``FILE_WORKERS`` files at a time, so a crash leaves the old file or the new
    one, never a torn one. A path that a newer write took over meanwhile is skipped (its newer
    text is, or will be, on disk), and so is one whose directory went away (a replica deleted
    meanwhile).
    """

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.future: concurrent.futures.Future[None] | None = None

    def sync(self) -> None:
        writes = [_files.submit(self._write, path, text) for path, text in self.texts.items()]
        concurrent.futures.wait(writes)  # every file is tried before the first error is raised
        try:
            for done in writes:
                done.result()
        except OSError as exc:
            raise DeferredSyncError(exc.errno, exc.strerror, exc.filename) from exc

    def _write(self, path: str, text: str) -> None:
        lock = _claim_lock(path)
        if _claims.get(path) is not self:
            return
        tmp = path + DEFERRED_TMP_SUFFIX
        try:
            try:
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(text)
                    handle.flush()
                    os.fsync(handle.fileno())
            except FileNotFoundError:
                return  # its partition dir was renamed for deletion meanwhile
            with lock:  # a plain write or a newer batch takes the claim under this lock
                ours = _claims.get(path) is self
                if ours:
                    del _claims[path]
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(tmp, path)
            if not ours:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                return
            with contextlib.suppress(FileNotFoundError):
                fsync_dir(os.path.dirname(path))
        finally:
            with lock:
                if _claims.get(path) is self:
                    del _claims[path]

    def _claim(self) -> None:
        for path in self.texts:
            with _claim_lock(path):
                _claims[path] = self


@contextlib.contextmanager
def deferred_syncs(background_from: int | None = None) -> Iterator[DeferredBatch]:
    """Checkpoint writes inside the block are made durable together, many files at a time.

    A broker that takes over the leadership of thousands of partitions at once (a 10,000-partition
    cluster losing a broker) writes a leader-epoch checkpoint for each; an fsync of the file and
    of its directory per partition kept the event loop busy for 15 s on this machine, and even
    with two syncfs in all, writing and renaming thousands of files one by one took 5-10 s. Inside
    the block a write only records the file's new text in the batch. On leaving, it is made durable
    (``DeferredBatch.sync``): at once, or on the checkpoint thread if it holds ``background_from``
    files or more, batches in the order they were made; ``batch.future`` then says when it is
    done (a small batch costs the caller less than waiting for the thread). The caller must not act
    on the new contents (append at a new leader epoch) before that. A plain write of a file that
    a pending batch holds supersedes the batch's text for it; a nested block joins the outer one.
    """
    outer: DeferredBatch | None = getattr(_local, "pending", None)
    if outer is not None:
        yield outer
        return
    batch = _local.pending = DeferredBatch()
    try:
        yield batch
    finally:  # what the block wrote before an error still goes to disk, as a plain write would
        _local.pending = None
        if batch.texts:
            batch._claim()
            if background_from is not None and len(batch.texts) >= background_from:
                future = batch.future = _writer.submit(batch.sync)
                _in_flight.add(future)
                future.add_done_callback(_in_flight.discard)
            else:
                batch.sync()


def wait_for_deferred(timeout_s: float) -> bool:
    """Wait for every batch given to the checkpoint thread (a clean shutdown); False on timeout."""
    pending = list(_in_flight)
    if not pending:
        return True
    _done, not_done = concurrent.futures.wait(pending, timeout_s)
    return not not_done


def write_lines_atomically(path: str, lines: Iterable[str], version: int = CHECKPOINT_VERSION) -> None:
    entries = list(lines)
    text = f"{version}\n{len(entries)}\n" + "".join(line + "\n" for line in entries)
    batch: DeferredBatch | None = getattr(_local, "pending", None)
    if batch is not None:
        batch.texts[path] = text
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    if _claims:
        with _claim_lock(path):  # this text is newer than a pending batch's: the batch must not rename over it
            _claims.pop(path, None)
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
        self.readable = True  # whether the last read found the file well formed (or missing)

    def write(self, entries: Sequence[tuple[int, int]]) -> None:
        write_lines_atomically(self.path, (f"{e} {o}" for e, o in entries))

    def read(self) -> list[tuple[int, int]]:
        try:
            entries = [(int(e), int(o)) for e, o in read_lines(self.path, 2)]
        except (CheckpointError, ValueError) as exc:
            log.warning("ignoring unreadable leader epoch checkpoint %s: %s", self.path, exc)
            self.readable = False
            return []
        self.readable = True
        return entries
