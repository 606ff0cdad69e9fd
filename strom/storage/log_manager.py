"""All partition logs of a broker across its ``log.dirs``, plus the periodic storage work.

Startup reads each log dir's checkpoints and clean-shutdown marker, opens every
``<topic>-<partition>`` directory (recovering after a crash) and removes the marker, so a crash
from then on is detected next time. The scheduler runs retention, flushing, checkpointing and
compaction on the broker's event loop; shutdown flushes, checkpoints and writes the marker.
Compaction itself runs in ``log.cleaner.threads`` cleaner processes (processes, not threads:
see strom.storage.cleaner): the event loop picks the dirtiest logs and takes each round's inputs,
a cleaner process reads and writes the segments, and the event loop swaps the result in.

A write that fails in a log dir (a full disk, an I/O error) takes that whole dir offline, as
Kafka's LogDirFailureChannel does: its logs are never written or read again by this process
(their in-memory state may run ahead of their files), the listeners (the replica manager) stop
serving its partitions, and shutdown leaves it without a clean-shutdown marker so that the next
start recovers it from what is really on disk.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import multiprocessing
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from strom.clock import wall_time
from strom.protocol.errors import ErrorCode, InvalidTopicError, KafkaError, KafkaStorageError, ResourceExhaustedError
from strom.resources import describe_exhaustion, exhaustion
from strom.storage import checkpoint, cleaner, cleaner_process
from strom.storage.checkpoint import (
    CLEANER_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetCheckpointFile,
)
from strom.storage.log import Log, future_dir_name, parse_future_dir, parse_partition_dir
from strom.storage.log_config import LogConfig
from strom.storage.write_behind import WriteBehind

log = logging.getLogger("strom.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"
DEFERRED_CHECKPOINTS_WAIT_S = 30.0

TopicPartition = tuple[str, int]


class LogDirError(RuntimeError):
    pass


@dataclass(frozen=True)
class SchedulerIntervals:
    """Broker-level periods of the storage tasks, from server.properties."""

    retention_check_ms: int = 300_000
    flush_check_ms: int = 1_000
    checkpoint_ms: int = 60_000
    cleaner_backoff_ms: int = 15_000
    cleaner_enabled: bool = True


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        *,
        broker_id: int = 0,
        cluster_id: str | None = None,
        intervals: SchedulerIntervals = SchedulerIntervals(),
        topic_overrides: Callable[[str], Mapping[str, str]] = lambda topic: {},
        clock: Callable[[], float] = wall_time,
        cleaner_settings: cleaner.CleanerSettings = cleaner.DEFAULT_SETTINGS,
    ):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.intervals = intervals
        self.topic_overrides = topic_overrides
        self.clock = clock
        # the connection writes it out before sending responses; segments report failed writes to it
        self.write_behind = WriteBehind(self._on_write_failure)
        self.logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._logs_in_dir: Counter[str] = Counter()  # a new log goes to the emptiest dir, found in O(dirs)
        # Replicas moving to another log dir (AlterReplicaLogDirs): the copy being made there, and
        # the dir a replica not yet created here goes to (Kafka's preferred log dir).
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self.preferred_dirs: dict[TopicPartition, str] = {}
        self._found_futures: list[tuple[TopicPartition, str, str, bool]] = []
        self.offline_dirs: set[str] = set()
        # one descriptor held back, for cleaning up after running out of them
        self._spare_fd = os.open(os.devnull, os.O_RDONLY)
        # called with the log dir, on the thread that saw the failure, once per dir
        self.failure_listeners: list[Callable[[str], None]] = []
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self.cleaner_settings = cleaner_settings
        self._cleaner_stopped = False
        self._cleaner_pool: ProcessPoolExecutor | None = None
        self._cleaner_pool_stop: object | None = None  # the pool's multiprocessing Event
        self._pool_stale = False  # the cleaner settings changed: a new pool once no round runs
        self._cleaning: dict[TopicPartition, Log] = {}  # rounds in a cleaner process now
        self._checkpoint_lock = threading.Lock()  # cleaner checkpoints written off the event loop
        self.had_clean_shutdown = True

    # -- startup -----------------------------------------------------------------------------------
    def startup(self) -> None:
        for log_dir in self.log_dirs:
            try:
                self._load_dir(log_dir)
            except OSError as exc:
                self.fail_dir(log_dir, exc, f"loading {log_dir}")
            except KafkaStorageError:
                pass  # a segment reported it
        self._load_futures()
        log.info("loaded %d partition logs from %s", len(self.logs), ", ".join(self.log_dirs))

    def _load_dir(self, log_dir: str) -> None:
        os.makedirs(log_dir, exist_ok=True)
        # New only without partitions too: a lost meta.properties says nothing of how the broker stopped.
        fresh = not os.path.exists(os.path.join(log_dir, META_PROPERTIES)) and not any(
            parse_partition_dir(name) for name in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, name))
        )
        self._check_meta_properties(log_dir)
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = fresh or os.path.exists(marker)
        self.had_clean_shutdown = self.had_clean_shutdown and clean
        recovery = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT)).read()
        starts = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT)).read()
        watermarks = OffsetCheckpointFile(os.path.join(log_dir, REPLICATION_CHECKPOINT)).read()
        self._cleaner_offsets.update(OffsetCheckpointFile(os.path.join(log_dir, CLEANER_CHECKPOINT)).read())
        if not clean:
            log.warning("no clean shutdown marker in %s: recovering unflushed segments", log_dir)
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            future = parse_future_dir(name)
            if future is not None:
                self._found_futures.append((future, log_dir, path, clean))
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            if tp in self.logs:
                raise LogDirError(f"partition {tp[0]}-{tp[1]} exists in both {self._log_dir_of[tp]} and {log_dir}")
            self.logs[tp] = Log(
                path,
                self.config_for(tp[0]),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=watermarks.get(tp),
                had_clean_shutdown=clean,
                clock=self.clock,
                write_behind=self.write_behind,
            )
            self._log_dir_of[tp] = log_dir
            self._logs_in_dir[log_dir] += 1
        if os.path.exists(marker):
            os.unlink(marker)

    def _check_meta_properties(self, log_dir: str) -> None:
        """meta.properties ties a log dir to one broker, as in Kafka, so dirs are never mixed up."""
        path = os.path.join(log_dir, META_PROPERTIES)
        if os.path.exists(path):
            props = {}
            try:
                with open(path, encoding="utf-8") as handle:
                    for line in handle:
                        if "=" in line and not line.startswith("#"):
                            key, value = line.strip().split("=", 1)
                            props[key] = value
                found = props.get("broker.id")
                if found is not None:
                    int(found)
            except ValueError as exc:  # not UTF-8, or a broker.id that is no number
                # Which broker owns the dir cannot be told, and guessing could mix two brokers' data.
                raise LogDirError(
                    f"log dir {log_dir}: {META_PROPERTIES} is damaged ({exc}); if this directory belongs to "
                    f"broker.id={self.broker_id}, delete {path} and start again"
                ) from None
            if found is not None and int(found) != self.broker_id:
                raise LogDirError(
                    f"log dir {log_dir} belongs to broker.id={found}, not broker.id={self.broker_id} (meta.properties)"
                )
            self.cluster_id = self.cluster_id or props.get("cluster.id")
            return
        lines = ["#strom meta.properties", "version=0", f"broker.id={self.broker_id}"]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")

    # -- log dir failures --------------------------------------------------------------------------
    def _on_write_failure(self, partition_dir: str, exc: OSError, doing: str) -> None:
        self.fail_dir(os.path.dirname(os.path.abspath(partition_dir)), exc, doing)

    def fail_dir(self, log_dir: str, exc: OSError, doing: str) -> None:
        """Take ``log_dir`` offline for good (until a restart), once, and tell the listeners.

        Running out of descriptors or memory is not a disk failure: it is logged, naming the
        resource, and the dir stays online (the operation that hit it fails and is retried).
        """
        if exhaustion(exc):
            log.error("%s", describe_exhaustion(exc, doing))
            return
        if log_dir in self.offline_dirs:
            return
        self.offline_dirs.add(log_dir)
        try:  # a marker read at startup must not survive into the next one
            os.unlink(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
        except OSError:
            pass
        doomed = [tp for tp, d in self._log_dir_of.items() if d == log_dir]
        log.error(
            "log dir %s is offline: %s failed: %s; its %d partitions are no longer served by this broker "
            "(free space or replace the disk, then restart the broker)",
            log_dir,
            doing,
            exc.strerror or exc,
            len(doomed),
        )
        for tp in doomed:
            for segment in self.logs[tp].segments:
                segment.discard_pending()
        for tp in [tp for tp, d in self._future_dir_of.items() if d == log_dir or self._log_dir_of.get(tp) == log_dir]:
            # the move stops; a restart starts it again from the replica's current log, if that is online
            log.warning("moving %s-%d to %s stopped: log dir %s is offline", *tp, self._future_dir_of[tp], log_dir)
            future = self.future_logs.pop(tp)
            del self._future_dir_of[tp]
            for segment in future.segments:
                segment.discard_pending()
            future.close_crashlike()
        for listener in list(self.failure_listeners):
            listener(log_dir)

    def storage_error(self, tp: TopicPartition, exc: OSError, doing: str) -> KafkaStorageError:
        """Take the dir of ``tp`` offline after ``exc``; returns the error to answer with."""
        log_dir = self._log_dir_of.get(tp)
        if exhaustion(exc):
            message = describe_exhaustion(exc, f"{doing} {tp[0]}-{tp[1]}")
            log.error("%s", message)
            return ResourceExhaustedError(message)
        if log_dir is not None:
            self.fail_dir(log_dir, exc, f"{doing} {tp[0]}-{tp[1]}")
        return KafkaStorageError(
            f"{doing} {tp[0]}-{tp[1]} failed: {exc.strerror or exc}; its log dir {log_dir} is offline"
        )

    def _online_logs(self) -> list[tuple[TopicPartition, Log]]:
        offline = self.offline_dirs
        return [(tp, log_) for tp, log_ in self.logs.items() if not offline or self._log_dir_of[tp] not in offline]

    # -- logs --------------------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self.default_config.with_overrides(self.topic_overrides(topic))

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        if self.offline_dirs:
            # Kafka's rule: the replica's log may be in the failed dir, and a fresh empty one
            # elsewhere would pass for it
            raise KafkaStorageError(
                f"cannot create the log of {tp[0]}-{tp[1]}: log dirs {', '.join(sorted(self.offline_dirs))} are offline"
            )
        log_dir = self.preferred_dirs.pop(tp, None) or min(self.log_dirs, key=self._logs_in_dir.__getitem__)
        path = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
        existed = os.path.exists(path)
        try:
            created = Log(path, config or self.config_for(tp[0]), clock=self.clock, write_behind=self.write_behind)
        except OSError as exc:
            if exhaustion(exc):
                # nothing half-made stays behind: the next metadata pass creates it from scratch
                if not existed:
                    self._remove_half_made(path)
                message = describe_exhaustion(exc, f"creating {path}")
                log.error("%s", message)
                raise ResourceExhaustedError(message) from exc
            self.fail_dir(log_dir, exc, f"creating {path}")
            raise KafkaStorageError(f"creating {path} failed: {exc.strerror or exc}") from exc
        self.logs[tp] = created
        self._log_dir_of[tp] = log_dir
        self._logs_in_dir[log_dir] += 1
        return created

    def _remove_half_made(self, path: str) -> None:
        """Remove a partition dir whose creation ran out of descriptors, with the one held in
        reserve for this: at the limit, even listing a directory needs a descriptor."""
        if self._spare_fd >= 0:
            os.close(self._spare_fd)
            self._spare_fd = -1
        try:
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
            os.rmdir(path)
        except OSError as exc:
            log.warning("could not remove the half-made %s: %s", path, exc.strerror or exc)
        finally:
            try:
                self._spare_fd = os.open(os.devnull, os.O_RDONLY)
            except OSError:
                pass  # taken again on the next shortage's cleanup, if any is free by then

    def log_dir_of(self, tp: TopicPartition) -> str:
        return self._log_dir_of[tp]

    def reconfigure(self, default_config: LogConfig, cleaner_settings: cleaner.CleanerSettings) -> None:
        """New broker-wide topic defaults and cleaner settings (dynamic broker configs, KIP-226).

        Every log takes the new defaults at once for the keys its topic does not override. New
        cleaner settings (log.cleaner.threads, the I/O rate) start a new pool of cleaner processes
        once no round is under way in the old one: a round is never cut short.
        """
        self.default_config = default_config
        for (topic, _), partition_log in self.logs.items():
            partition_log.config = self.config_for(topic)
        if cleaner_settings != self.cleaner_settings:
            self.cleaner_settings = cleaner_settings
            self._pool_stale = self._cleaner_pool is not None

    def update_topic_config(self, topic: str) -> None:
        config = self.config_for(topic)
        for (t, _), partition_log in self.logs.items():
            if t == topic:
                partition_log.config = config

    def delete_log(self, tp: TopicPartition) -> None:
        """Rename the partition dir to ``<name>.<uuid>-delete`` first, so a crash mid-delete is finished at startup."""
        if tp in self.future_logs:  # first: a future left alone would be taken for the replica at startup
            self.remove_future_log(tp)
        self.preferred_dirs.pop(tp, None)
        partition_log = self.logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        if log_dir is not None:
            self._logs_in_dir[log_dir] -= 1
        self._cleaner_offsets.pop(tp, None)
        if partition_log is None or log_dir is None:
            return
        if log_dir in self.offline_dirs:
            return  # its files stay until the dir is back; Kafka deletes them then
        partition_log.close_crashlike()
        doomed = os.path.join(log_dir, f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(partition_log.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    # -- moving a replica to another log dir (AlterReplicaLogDirs) ---------------------------------
    # As Kafka: the replica is copied into ``<topic>-<p>.<uuid>-future`` in the destination dir while
    # the current log keeps serving; once the copy has caught up, replace_current_with_future swaps
    # it in. The swap's order makes every crash point recoverable: the future is complete and
    # flushed before the current dir is renamed to ``-delete``, and a start that finds a future with
    # no current log promotes it (one with a current log is copied again from scratch).
    def future_log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._future_dir_of.get(tp)

    def alter_log_dir(self, tp: TopicPartition, log_dir: str) -> Log | None:
        """Move ``tp``'s replica to ``log_dir`` (Kafka's ReplicaManager.alterReplicaLogDirs).

        Returns the future log when a move starts, None when there is nothing to copy (already
        there, or moving there now). A replica not hosted here is created in ``log_dir`` when it
        comes (REPLICA_NOT_AVAILABLE is still the answer, as in Kafka). Naming the current dir
        cancels a move in progress.
        """
        if log_dir not in self.log_dirs:
            raise KafkaError(
                f"log dir {log_dir} is not in log.dirs ({', '.join(self.log_dirs)}); paths must be absolute",
                error_code=ErrorCode.LOG_DIR_NOT_FOUND,
            )
        if log_dir in self.offline_dirs:
            raise KafkaStorageError(f"log dir {log_dir} is offline")
        name = future_dir_name(tp[0], tp[1], uuid.uuid4().hex)
        if len(name) > 255:  # KAFKA-4893: the future dir's name must fit in a file name
            raise InvalidTopicError(f"the topic name {tp[0]!r} is too long to move its replicas between log dirs")
        moving_to = self._future_dir_of.get(tp)
        if moving_to is not None and moving_to != log_dir:
            self.remove_future_log(tp)  # a new destination replaces the move in progress
        self.preferred_dirs[tp] = log_dir
        current = self.logs.get(tp)
        if current is None:
            raise KafkaError(
                f"broker {self.broker_id} has no replica of {tp[0]}-{tp[1]}; it goes to {log_dir} when created here",
                error_code=ErrorCode.REPLICA_NOT_AVAILABLE,
            )
        del self.preferred_dirs[tp]
        current_dir = self._log_dir_of[tp]
        if current_dir in self.offline_dirs:
            raise KafkaStorageError(f"the replica of {tp[0]}-{tp[1]} is in the offline log dir {current_dir}")
        if current_dir == log_dir or tp in self.future_logs:
            return None
        if self.offline_dirs:
            # Kafka's rule: a future replica is never made while a dir is offline, which might hold another
            raise KafkaStorageError(f"log dirs {', '.join(sorted(self.offline_dirs))} are offline")
        path = os.path.join(log_dir, name)
        try:
            future = self._open_future(tp, path, current)
        except OSError as exc:
            raise self.future_storage_error(log_dir, exc, f"creating {path}") from exc
        log.info("moving %s-%d from %s to %s", tp[0], tp[1], current_dir, log_dir)
        return future

    def _open_future(self, tp: TopicPartition, path: str, current: Log) -> Log:
        """An empty future log at ``path``, starting where ``current`` starts."""
        future = Log(path, self.config_for(tp[0]), clock=self.clock, write_behind=self.write_behind)
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
        self.fail_dir(log_dir, exc, doing)
        return KafkaStorageError(f"{doing} failed: {exc.strerror or exc}; log dir {log_dir} is offline")

    def restart_future_log(self, tp: TopicPartition) -> None:
        """The current log lost records the copy holds (a truncation): copy again from its start."""
        future, current = self.future_logs[tp], self.logs[tp]
        future.truncate_fully_and_start_at(current.log_start_offset)

    def remove_future_log(self, tp: TopicPartition) -> None:
        """Cancel ``tp``'s move: its copy goes (renamed to ``-delete`` first, as Kafka does)."""
        future = self.future_logs.pop(tp, None)
        log_dir = self._future_dir_of.pop(tp, None)
        if future is None or log_dir is None:
            return
        future.close_crashlike()
        if log_dir in self.offline_dirs:
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
        current, future = self.logs[tp], self.future_logs[tp]
        src_dir, dst_dir = self._log_dir_of[tp], self._future_dir_of[tp]
        self.write_behind.write_all()
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
            raise self.storage_error(tp, exc, "moving") from exc
        try:
            os.rename(future.directory, final)
            _sync_dir(dst_dir)
            _sync_dir(src_dir)
        except OSError as exc:  # the next start finds the complete copy without a current log, and promotes it
            self.future_storage_error(dst_dir, exc, f"renaming {future.directory}")
            raise self.storage_error(tp, exc, "moving") from exc
        del self.future_logs[tp], self._future_dir_of[tp]
        moved = Log(
            final,
            current.config,
            recovery_point=end,
            log_start_offset=start,
            high_watermark=high_watermark,
            clock=self.clock,
            write_behind=self.write_behind,
        )
        self.logs[tp] = moved
        self._log_dir_of[tp] = dst_dir
        self._logs_in_dir[src_dir] -= 1
        self._logs_in_dir[dst_dir] += 1
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

    def _load_futures(self) -> None:
        """Futures found at startup: copied again beside a current log, promoted without one."""
        found, self._found_futures = self._found_futures, []
        for tp, log_dir, path, clean in found:
            if self.offline_dirs:
                # the current log may be in the dir that failed: promoting a copy could lose its tail
                log.warning("leaving %s as it is: log dirs %s are offline", path, ", ".join(sorted(self.offline_dirs)))
                continue
            current = self.logs.get(tp)
            try:
                if tp in self.future_logs or (current is not None and self._log_dir_of[tp] == log_dir):
                    shutil.rmtree(path, ignore_errors=True)  # a leftover: the move goes on elsewhere, or is done
                elif current is not None:
                    log.info("moving %s-%d to %s again after a restart: copying from the start", tp[0], tp[1], log_dir)
                    shutil.rmtree(path)
                    self._open_future(tp, path, current)
                else:
                    final = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
                    log.info("completing the interrupted move of %s-%d: %s becomes %s", tp[0], tp[1], path, final)
                    os.rename(path, final)
                    _sync_dir(log_dir)
                    self.logs[tp] = Log(
                        final,
                        self.config_for(tp[0]),
                        had_clean_shutdown=clean,
                        clock=self.clock,
                        write_behind=self.write_behind,
                    )
                    self._log_dir_of[tp] = log_dir
                    self._logs_in_dir[log_dir] += 1
            except OSError as exc:
                self.fail_dir(log_dir, exc, f"loading {path}")

    # -- periodic work -----------------------------------------------------------------------------
    def cleanup_logs(self) -> int:
        """Retention on every log; returns the number of segments deleted."""
        deleted = 0
        for tp, partition_log in self._online_logs():
            try:
                deleted += partition_log.delete_old_segments()
            except OSError as exc:
                self.storage_error(tp, exc, "deleting old segments of")
        return deleted

    def _guarded(self, tp: tuple[str, int], step: Callable[[], object], what: str) -> None:
        """Run a background step on one log; an I/O error takes its dir offline instead of escaping."""
        try:
            step()
        except OSError as exc:
            self.storage_error(tp, exc, what)
        except KafkaStorageError:
            pass  # a segment reported it

    def flush_dirty_logs(self) -> None:
        for tp, partition_log in self._online_logs():
            flush_ms = partition_log.config.flush_ms
            if flush_ms < 2**62 and partition_log.since_flush_ms() >= flush_ms:
                self._guarded(tp, partition_log.flush, "flushing")

    def clean_logs(self, skip: TopicPartition | None = None) -> int:
        """Start a round in a free cleaner process for each of the dirtiest compacted logs whose dirty
        ratio is above min.cleanable.dirty.ratio, or whose oldest dirty record is past
        max.compaction.lag.ms (Kafka's LogCleanerManager.grabFilthiestCompactedLog); returns the
        rounds started (or, without a running event loop, done on this thread)."""
        threads = self.cleaner_settings.threads
        if threads <= 0 or self._cleaner_stopped:
            return 0
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        candidates = []
        for tp, partition_log in self._online_logs():
            if not partition_log.config.compact or tp in self._cleaning or tp == skip:
                continue
            first_dirty = max(self._cleaner_offsets.get(tp, 0), partition_log.log_start_offset)
            try:
                dirty, total = cleaner.dirty_bytes(partition_log, first_dirty)
                ratio = dirty / total if total else 0.0
                overdue = dirty > 0 and cleaner.max_compaction_delay(partition_log, first_dirty) > 0
            except OSError as exc:
                self.storage_error(tp, exc, "compacting")
                continue
            except KafkaStorageError:
                continue  # a segment reported it
            if ratio > partition_log.config.min_cleanable_dirty_ratio or overdue:
                candidates.append((ratio, tp, partition_log, first_dirty))
        candidates.sort(key=lambda c: c[0], reverse=True)  # Kafka cleans the filthiest log first
        started = 0
        for ratio, tp, partition_log, first_dirty in candidates:
            if loop is not None and len(self._cleaning) >= threads:
                break
            try:
                plan = cleaner.plan_cleaning(partition_log, first_dirty, self.cleaner_settings)
            except OSError as exc:
                self.storage_error(tp, exc, "compacting")
                continue
            except KafkaStorageError:
                continue  # a segment reported it
            if plan is None:
                continue
            started += 1
            if loop is None:
                try:
                    self._finish_cleaning(tp, partition_log, plan, None, cleaner.run_cleaning(plan.job), None)
                except Exception as exc:  # noqa: BLE001 - judged as the cleaner process's errors are
                    self._finish_cleaning(tp, partition_log, plan, None, None, exc)
                continue
            sources = plan.job.sources
            log.info(
                "cleaning %s from offset %d in a cleaner process: %d segments, %d bytes, dirty ratio %.2f%s",
                partition_log.directory,
                first_dirty,
                len(sources),
                sum(source.size for source in sources),
                ratio,
                ""
                if ratio > partition_log.config.min_cleanable_dirty_ratio
                else f" (past max.compaction.lag.ms={partition_log.config.max_compaction_lag_ms})",
            )
            try:
                future = self._pool().submit(cleaner.worker_clean, plan.job)
            except RuntimeError as exc:  # a broken pool (a cleaner process died): the next pass makes a new one
                log.error("could not start cleaning %s: %s", partition_log.directory, exc)
                self._cleaner_pool = None
                continue
            self._cleaning[tp] = partition_log
            # The future completes on the pool's thread; the swap is done on the event loop, the only
            # place that changes a log's segment list.
            future.add_done_callback(functools.partial(self._cleaning_done, loop, tp, partition_log, plan))
        return started

    def _pool(self) -> ProcessPoolExecutor:
        if self._pool_stale and not self._cleaning and self._cleaner_pool is not None:
            retired, self._cleaner_pool = self._cleaner_pool, None  # sized for the old settings
            retired.shutdown(wait=False, cancel_futures=True)
            self._pool_stale = False
        if self._cleaner_pool is None:
            settings = self.cleaner_settings
            context = multiprocessing.get_context("spawn")  # never fork a process that runs an event loop
            stop = context.Event()
            self._cleaner_pool_stop = stop
            init: Callable[..., None] = cleaner_process.init
            self._cleaner_pool = ProcessPoolExecutor(
                settings.threads,
                mp_context=context,
                initializer=init,
                initargs=(stop, settings.io_max_bytes_per_second / settings.threads),
            )
        return self._cleaner_pool

    def _start_cleaner_processes(self) -> None:
        """Start the cleaner processes with the broker, as Kafka starts its cleaner threads, and not
        with the first round.

        A process's start (Python's own, then the storage modules: about a tenth of a second of
        CPU) holds a CPU that a woken broker thread can wait behind for a few milliseconds
        (strom.storage.cleaner_process says why). Paid with the first round, it lands in the
        middle of traffic; `python -m strom.bench.compaction` showed fetch p99 over that round's
        first half second of 0.8-1.6 ms against 0.5-0.6 ms with the processes started here. The
        cost is an idle process per cleaner thread. A start that fails (no process or memory to
        be had) is logged, and the first round tries again."""
        if self.cleaner_settings.threads <= 0:
            return  # log.cleaner.threads=0: no compaction, no process
        try:
            pool = self._pool()
            for _ in range(self.cleaner_settings.threads):
                # no worker is idle yet, so each submission starts one more process
                pool.submit(os.getpid)
        except (OSError, RuntimeError) as exc:
            where = " (their semaphores are files in /dev/shm)" if getattr(exc, "errno", None) == errno.ENOSPC else ""
            log.warning("could not start the cleaner processes: %s%s; the first round tries again", exc, where)
            failed, self._cleaner_pool = self._cleaner_pool, None
            if failed is not None:
                failed.shutdown(wait=False, cancel_futures=True)

    def _cleaning_done(
        self,
        loop: asyncio.AbstractEventLoop,
        tp: TopicPartition,
        partition_log: Log,
        plan: cleaner.CleanPlan,
        done: Future[cleaner.CleanOutcome],
    ) -> None:
        """On the pool's thread: hand the result to the event loop, which does the swap."""
        try:
            loop.call_soon_threadsafe(self._finish_cleaning, tp, partition_log, plan, done, None, None)
        except RuntimeError:  # the loop is closed (the broker stopped): the next start removes .cleaned files
            pass

    def _finish_cleaning(
        self,
        tp: TopicPartition,
        partition_log: Log,
        plan: cleaner.CleanPlan,
        done: Future[cleaner.CleanOutcome] | None,
        outcome: cleaner.CleanOutcome | None,
        error: BaseException | None,
    ) -> None:
        self._cleaning.pop(tp, None)
        if done is not None:
            if done.cancelled():
                return
            error = done.exception()
            if error is None:
                outcome = done.result()
        current = self.logs.get(tp) is partition_log and self._log_dir_of.get(tp) not in self.offline_dirs
        if error is not None or outcome is None:
            cause = cleaner.storage_cause(error) if error is not None else None
            if isinstance(error, cleaner.CleaningAborted):
                log.info("cleaning of %s stopped: %s", partition_log.directory, error)
            elif cause is not None and current:
                self.storage_error(tp, cause, "compacting")
            elif cause is None and current:
                log.error("cleaning of %s failed: %s", partition_log.directory, error)
                if isinstance(error, BrokenProcessPool):
                    self._cleaner_pool = None  # a cleaner process died; the next pass starts a new pool
            return
        if not current or self._cleaner_stopped:
            outcome.discard()  # deleted, offline or shutting down: what it replaces is no longer served
            return
        try:
            result = cleaner.install(partition_log, plan, outcome)
        except OSError as exc:
            self.storage_error(tp, exc, "compacting")
            return
        except KafkaStorageError:
            return  # a segment reported it
        if result is None:
            return
        self._cleaner_offsets[tp] = result.first_dirty_offset
        if self._cleaner_pool is None:
            self._write_checkpoint(CLEANER_CHECKPOINT, lambda tp, _log: self._cleaner_offsets.get(tp))
        else:  # fsyncs, off the event loop (Kafka's cleaner thread writes it too)
            self._write_cleaner_checkpoint_off_loop()
        if self._cleaner_pool is not None:
            self.clean_logs(skip=tp)  # as Kafka's threads, go straight on to the next dirty log

    def _write_cleaner_checkpoint_off_loop(self) -> None:
        """The offsets are taken here, on the event loop; the files are written on a thread, one
        write at a time, and a failure takes the dir offline on the event loop."""
        loop = asyncio.get_running_loop()
        files = {}
        for log_dir in self.log_dirs:
            if log_dir not in self.offline_dirs:
                files[os.path.join(log_dir, CLEANER_CHECKPOINT)] = (
                    log_dir,
                    {tp: offset for tp, offset in self._cleaner_offsets.items() if self._log_dir_of.get(tp) == log_dir},
                )

        def write() -> None:
            with self._checkpoint_lock:
                for path, (log_dir, offsets) in files.items():
                    try:
                        OffsetCheckpointFile(path).write(offsets)
                    except OSError as exc:
                        self._call_soon(loop, self.fail_dir, log_dir, exc, f"writing {path}")

        loop.run_in_executor(None, write)

    @staticmethod
    def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: object) -> None:
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass  # the loop is closed: the broker stopped

    def stop_cleaner(self) -> None:
        """Stop the cleaner processes at their next batch and wait for them; their rounds are dropped
        (a round's own .cleaned files are removed by it, or else by the next start)."""
        self._cleaner_stopped = True
        pool, self._cleaner_pool = self._cleaner_pool, None
        if pool is not None:
            self._cleaner_pool_stop.set()  # type: ignore[union-attr]
            pool.shutdown(wait=True, cancel_futures=True)
        self._cleaning.clear()

    def _write_checkpoint(self, name: str, value: Callable[[TopicPartition, Log], int | None]) -> None:
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue  # what its logs hold in memory may never have reached the files
            offsets = {}
            for tp, partition_log in self.logs.items():
                if self._log_dir_of.get(tp) == log_dir:
                    found = value(tp, partition_log)
                    if found is not None:
                        offsets[tp] = found
            path = os.path.join(log_dir, name)
            try:
                OffsetCheckpointFile(path).write(offsets)
            except OSError as exc:
                self.fail_dir(log_dir, exc, f"writing {path}")

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda tp, log_: log_.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda tp, log_: log_.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_CHECKPOINT, lambda tp, log_: log_.high_watermark)

    def checkpoint_all(self) -> None:
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    async def run_scheduler(self, stop: asyncio.Event) -> None:
        """Run the periodic storage tasks until ``stop`` is set. Each task's failure is logged, not fatal."""
        tasks = [
            (self.intervals.retention_check_ms, self.cleanup_logs),
            (self.intervals.flush_check_ms, self.flush_dirty_logs),
            (self.intervals.checkpoint_ms, self.checkpoint_all),
        ]
        if self.intervals.cleaner_enabled:
            tasks.append((self.intervals.cleaner_backoff_ms, self.clean_logs))
            self._cleaner_stopped = False
            self._start_cleaner_processes()
        try:
            await self._run_tasks(tasks, stop)
        finally:
            self.stop_cleaner()

    async def _run_tasks(self, tasks: list[tuple[int, Callable[[], int | None]]], stop: asyncio.Event) -> None:
        now = time.monotonic()
        next_run = [now + interval / 1000 for interval, _ in tasks]
        while not stop.is_set():
            wait = max(0.0, min(next_run) - time.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
                return
            except TimeoutError:
                pass
            now = time.monotonic()
            for i, (interval, task) in enumerate(tasks):
                if now >= next_run[i]:
                    try:
                        task()
                    except Exception:  # a storage task must never take the broker down
                        log.exception("storage task %s failed", task.__name__)
                    next_run[i] = now + interval / 1000

    # -- shutdown ----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker last.

        An offline dir is left as a crash leaves it (no flush, no checkpoint, no marker), and so
        is a dir whose flush fails now: the next start recovers both from their files.
        """
        self.stop_cleaner()
        # leader-epoch checkpoints still on the checkpoint thread (a close rewrites each anyway)
        if not checkpoint.wait_for_deferred(DEFERRED_CHECKPOINTS_WAIT_S):
            log.warning("leader-epoch checkpoints still being written after %.0fs", DEFERRED_CHECKPOINTS_WAIT_S)
        for tp, future in list(self.future_logs.items()):
            try:
                future.close()
            except (OSError, KafkaStorageError) as exc:  # the copy is redone at the next start
                log.warning("could not close the future log %s: %s", future.directory, exc)
        for tp, partition_log in self.logs.items():
            if self._log_dir_of[tp] in self.offline_dirs:
                for segment in partition_log.segments:
                    segment.discard_pending()
                partition_log.close_crashlike()
                continue
            self._guarded(tp, partition_log.close, "closing")
            if self._log_dir_of[tp] in self.offline_dirs:
                for segment in partition_log.segments:
                    segment.discard_pending()
                partition_log.close_crashlike()
        self.checkpoint_all()
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                log.warning("log dir %s was offline: no clean-shutdown marker, the next start recovers it", log_dir)
                continue
            try:
                with open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "w"):
                    pass
            except OSError as exc:
                log.error(
                    "could not write the clean-shutdown marker in %s (%s): the next start recovers it",
                    log_dir,
                    exc.strerror or exc,
                )
        if self._spare_fd >= 0:
            os.close(self._spare_fd)
            self._spare_fd = -1
        log.info(
            "log manager shut down%s",
            " cleanly" if not self.offline_dirs else f"; offline log dirs: {', '.join(sorted(self.offline_dirs))}",
        )


def _sync_dir(path: str) -> None:
    """fsync a directory, so that renames in it survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
