"""Moving a replica to another log dir (AlterReplicaLogDirs), as Kafka does it.

The replica is copied into ``<topic>-<p>.<uuid>-future`` in the destination dir while the current
log keeps serving (strom.replication.log_dir_mover copies); once the copy has caught up,
replace_current_with_future swaps it in. The swap's order makes every crash point recoverable: the
future is complete and flushed before the current dir is renamed to ``-delete``, and a start that
finds a future with no current log promotes it (one with a current log is copied again from
scratch). The log manager owns the logs and their dirs and hands this its view of them
(``ManagedDirs``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from typing import Protocol

from strom.protocol.errors import ErrorCode, InvalidTopicError, KafkaError, KafkaStorageError, ResourceExhaustedError
from strom.resources import describe_exhaustion, exhaustion
from strom.storage.log import Log, future_dir_name
from strom.storage.log_config import LogConfig
from strom.storage.log_dir_error import LogDirError
from strom.storage.write_behind import WriteBehind

log = logging.getLogger("strom.storage")

DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]


class ManagedDirs(Protocol):
    """What moves need of the log manager: its logs and dirs, placing a log in a dir, and its
    failure handling."""

    log_dirs: list[str]
    offline_dirs: set[str]
    logs: dict[TopicPartition, Log]
    broker_id: int
    clock: Callable[[], float]
    write_behind: WriteBehind

    def config_for(self, topic: str) -> LogConfig: ...
    def dir_of(self, tp: TopicPartition) -> str | None: ...
    def log_dir_of(self, tp: TopicPartition) -> str: ...
    def place(self, tp: TopicPartition, partition_log: Log, log_dir: str) -> None: ...
    def storage_error(self, tp: TopicPartition, exc: OSError, doing: str) -> KafkaStorageError: ...
    def fail_dir(self, log_dir: str, exc: OSError, doing: str) -> None: ...


class LogDirMoves:
    """The replicas of ``dirs`` moving to another of its log dirs: their future logs, and the dir
    a replica not yet created here goes to (Kafka's preferred log dir)."""

    def __init__(self, dirs: ManagedDirs):
        self.dirs = dirs
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self.preferred_dirs: dict[TopicPartition, str] = {}
        # futures found by the startup's scan of each dir: (partition, dir, path, clean shutdown)
        self.found: list[tuple[TopicPartition, str, str, bool]] = []

    def stop_in(self, log_dir: str) -> None:
        """``log_dir`` went offline: the moves to it, and of replicas in it, stop; a restart starts
        them again from the replica's current log, if that is online."""
        for tp in [t for t, d in self._future_dir_of.items() if d == log_dir or self.dirs.dir_of(t) == log_dir]:
            log.warning("moving %s-%d to %s stopped: log dir %s is offline", *tp, self._future_dir_of[tp], log_dir)
            future = self.future_logs.pop(tp)
            del self._future_dir_of[tp]
            for segment in future.segments:
                segment.discard_pending()
            future.close_crashlike()

    def forget(self, tp: TopicPartition) -> None:
        """``tp``'s replica is deleted: its move, and where it was to be created, go with it."""
        if tp in self.future_logs:  # first: a future left alone would be taken for the replica at startup
            self.remove_future_log(tp)
        self.preferred_dirs.pop(tp, None)

    def future_log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._future_dir_of.get(tp)

    def alter_log_dir(self, tp: TopicPartition, log_dir: str) -> Log | None:
        """Move ``tp``'s replica to ``log_dir`` (Kafka's ReplicaManager.alterReplicaLogDirs).

        Returns the future log when a move starts, None when there is nothing to copy (already
        there, or moving there now). A replica not hosted here is created in ``log_dir`` when it
        comes (REPLICA_NOT_AVAILABLE is still the answer, as in Kafka). Naming the current dir
        cancels a move in progress.
        """
        if log_dir not in self.dirs.log_dirs:
            raise KafkaError(
                f"log dir {log_dir} is not in log.dirs ({', '.join(self.dirs.log_dirs)}); paths must be absolute",
                error_code=ErrorCode.LOG_DIR_NOT_FOUND,
            )
        if log_dir in self.dirs.offline_dirs:
            raise KafkaStorageError(f"log dir {log_dir} is offline")
        name = future_dir_name(tp[0], tp[1], uuid.uuid4().hex)
        if len(name) > 255:  # KAFKA-4893: the future dir's name must fit in a file name
            raise InvalidTopicError(f"the topic name {tp[0]!r} is too long to move its replicas between log dirs")
        moving_to = self._future_dir_of.get(tp)
        if moving_to is not None and moving_to != log_dir:
            self.remove_future_log(tp)  # a new destination replaces the move in progress
        self.preferred_dirs[tp] = log_dir
        current = self.dirs.logs.get(tp)
        if current is None:
            raise KafkaError(
                f"broker {self.dirs.broker_id} has no replica of {tp[0]}-{tp[1]}; it goes to {log_dir} when created here",
                error_code=ErrorCode.REPLICA_NOT_AVAILABLE,
            )
        del self.preferred_dirs[tp]
        current_dir = self.dirs.log_dir_of(tp)
        if current_dir in self.dirs.offline_dirs:
            raise KafkaStorageError(f"the replica of {tp[0]}-{tp[1]} is in the offline log dir {current_dir}")
        if current_dir == log_dir or tp in self.future_logs:
            return None
        if self.dirs.offline_dirs:
            # Kafka's rule: a future replica is never made while a dir is offline, which might hold another
            raise KafkaStorageError(f"log dirs {', '.join(sorted(self.dirs.offline_dirs))} are offline")
        path = os.path.join(log_dir, name)
        try:
            future = self._open_future(tp, path, current)
        except OSError as exc:
            raise self.future_storage_error(log_dir, exc, f"creating {path}") from exc
        log.info("moving %s-%d from %s to %s", tp[0], tp[1], current_dir, log_dir)
        return future

    def _open_future(self, tp: TopicPartition, path: str, current: Log) -> Log:
        """An empty future log at ``path``, starting where ``current`` starts."""
        future = Log(path, self.dirs.config_for(tp[0]), clock=self.dirs.clock, write_behind=self.dirs.write_behind)
        if future.log_end_offset != current.log_start_offset or future.segments[0].size:
            future.truncate_fully_and_start_at(current.log_start_offset)
        self.future_logs[tp] = future
        self._future_dir_of[tp] = os.path.dirname(path)
        return future

    def future_storage_error(self, log_dir: str, exc: OSError, doing: str) -> KafkaStorageError:
        if exhaustion(exc):
            message = describe_exhaustion(exc, doing)
            log.error("%s", message)
            return ResourceExhaustedError(message)
        self.dirs.fail_dir(log_dir, exc, doing)
        return KafkaStorageError(f"{doing} failed: {exc.strerror or exc}; log dir {log_dir} is offline")

    def restart_future_log(self, tp: TopicPartition) -> None:
        """The current log lost records the copy holds (a truncation): copy again from its start."""
        future, current = self.future_logs[tp], self.dirs.logs[tp]
        future.truncate_fully_and_start_at(current.log_start_offset)

    def remove_future_log(self, tp: TopicPartition) -> None:
        """Cancel ``tp``'s move: its copy goes (renamed to ``-delete`` first, as Kafka does)."""
        future = self.future_logs.pop(tp, None)
        log_dir = self._future_dir_of.pop(tp, None)
        if future is None or log_dir is None:
            return
        future.close_crashlike()
        if log_dir in self.dirs.offline_dirs:
            return  # its files stay until the dir is back; the next start copies again
        doomed = future.directory[: -len("-future")] + DELETE_DIR_SUFFIX
        try:
            os.rename(future.directory, doomed)
        except OSError as exc:
            self.future_storage_error(log_dir, exc, f"deleting {future.directory}")
            return
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("move of %s-%d to %s cancelled", tp[0], tp[1], log_dir)

    def replace_current_with_future(self, tp: TopicPartition) -> Log:
        """Swap the caught-up future log in for the current one; returns the log now serving ``tp``.

        Synchronous, on the event loop: no append can come between the last copied batch and the
        swap. The old log's files are removed at once, its descriptors closed after
        file.delete.delay.ms, so that a sendfile already handed a slice of it still completes.
        """
        current, future = self.dirs.logs[tp], self.future_logs[tp]
        src_dir, dst_dir = self.dirs.log_dir_of(tp), self._future_dir_of[tp]
        self.dirs.write_behind.write_all()
        if future.log_end_offset != current.log_end_offset:
            raise LogDirError(
                f"future log of {tp[0]}-{tp[1]} ends at {future.log_end_offset}, the log at {current.log_end_offset}"
            )
        end, start, high_watermark = current.log_end_offset, current.log_start_offset, current.high_watermark
        final = os.path.join(dst_dir, f"{tp[0]}-{tp[1]}")
        try:
            future.advance_log_start_offset(start)
            # epochs that began with no records (a leader that appended nothing) are in no batch
            future.leader_epoch_cache.entries = list(current.leader_epoch_cache.entries)
            future.close()  # flushed, snapshot, epochs: the copy is complete on disk before anything is renamed
        except (OSError, KafkaStorageError) as exc:
            self.future_logs.pop(tp, None)
            self._future_dir_of.pop(tp, None)
            if isinstance(exc, OSError):
                raise self.future_storage_error(dst_dir, exc, f"flushing {future.directory}") from exc
            raise
        doomed = os.path.join(src_dir, f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.rename(current.directory, doomed)
        except OSError as exc:
            raise self.dirs.storage_error(tp, exc, "moving") from exc
        try:
            os.rename(future.directory, final)
            sync_dir(dst_dir)
            sync_dir(src_dir)
        except OSError as exc:  # the next start finds the complete copy without a current log, and promotes it
            self.future_storage_error(dst_dir, exc, f"renaming {future.directory}")
            raise self.dirs.storage_error(tp, exc, "moving") from exc
        del self.future_logs[tp], self._future_dir_of[tp]
        moved = Log(
            final,
            current.config,
            recovery_point=end,
            log_start_offset=start,
            high_watermark=high_watermark,
            clock=self.dirs.clock,
            write_behind=self.dirs.write_behind,
        )
        self.dirs.place(tp, moved, dst_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        self._close_later(current)
        log.info("moved %s-%d from %s to %s at offset %d", tp[0], tp[1], src_dir, dst_dir, end)
        return moved

    def _close_later(self, retired: Log) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            retired.close_crashlike()
            return
        loop.call_later(retired.config.file_delete_delay_ms / 1000, retired.close_crashlike)

    def load_found(self) -> None:
        """Futures found at startup: copied again beside a current log, promoted without one."""
        found, self.found = self.found, []
        for tp, log_dir, path, clean in found:
            if self.dirs.offline_dirs:
                # the current log may be in the dir that failed: promoting a copy could lose its tail
                log.warning(
                    "leaving %s as it is: log dirs %s are offline", path, ", ".join(sorted(self.dirs.offline_dirs))
                )
                continue
            current = self.dirs.logs.get(tp)
            try:
                if tp in self.future_logs or (current is not None and self.dirs.dir_of(tp) == log_dir):
                    shutil.rmtree(path, ignore_errors=True)  # a leftover: the move goes on elsewhere, or is done
                elif current is not None:
                    log.info("moving %s-%d to %s again after a restart: copying from the start", tp[0], tp[1], log_dir)
                    shutil.rmtree(path)
                    self._open_future(tp, path, current)
                else:
                    final = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
                    log.info("completing the interrupted move of %s-%d: %s becomes %s", tp[0], tp[1], path, final)
                    os.rename(path, final)
                    sync_dir(log_dir)
                    promoted = Log(
                        final,
                        self.dirs.config_for(tp[0]),
                        had_clean_shutdown=clean,
                        clock=self.dirs.clock,
                        write_behind=self.dirs.write_behind,
                    )
                    self.dirs.place(tp, promoted, log_dir)
            except OSError as exc:
                self.dirs.fail_dir(log_dir, exc, f"loading {path}")


def sync_dir(path: str) -> None:
    """fsync a directory, so that renames in it survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
