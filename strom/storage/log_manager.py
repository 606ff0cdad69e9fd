"""All partition logs of a broker across its ``log.dirs``, plus the periodic storage work.

Startup reads each log dir's checkpoints and clean-shutdown marker, opens every
``<topic>-<partition>`` directory (recovering after a crash) and removes the marker, so a crash
from then on is detected next time. The scheduler runs retention, flushing, checkpointing and
compaction on the broker's event loop; shutdown flushes, checkpoints and writes the marker.
Compaction itself runs in ``log.cleaner.threads`` cleaner processes; strom.storage.compaction_rounds
picks the logs and swaps the results in.

A write that fails in a log dir (a full disk, an I/O error) takes that whole dir offline, as
Kafka's LogDirFailureChannel does: its logs are never written or read again by this process
(their in-memory state may run ahead of their files), the listeners (the replica manager) stop
serving its partitions, and shutdown leaves it without a clean-shutdown marker so that the next
start recovers it from what is really on disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from strom.clock import wall_time
from strom.protocol.errors import KafkaStorageError, ResourceExhaustedError
from strom.resources import describe_exhaustion, exhaustion
from strom.storage import checkpoint, cleaner
from strom.storage.checkpoint import (
    CLEANER_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetCheckpointFile,
)
from strom.storage.compaction_rounds import CompactionRounds
from strom.storage.log import Log, parse_future_dir, parse_partition_dir
from strom.storage.log_config import LogConfig
from strom.storage.log_dir_error import LogDirError
from strom.storage.log_dir_moves import DELETE_DIR_SUFFIX, LogDirMoves
from strom.storage.write_behind import WriteBehind

log = logging.getLogger("strom.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DEFERRED_CHECKPOINTS_WAIT_S = 30.0

TopicPartition = tuple[str, int]


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
        self.moves = LogDirMoves(self)  # replicas moving to another log dir (AlterReplicaLogDirs)
        self.offline_dirs: set[str] = set()
        # one descriptor held back, for cleaning up after running out of them
        self._spare_fd = os.open(os.devnull, os.O_RDONLY)
        # called with the log dir, on the thread that saw the failure, once per dir
        self.failure_listeners: list[Callable[[str], None]] = []
        self.compaction = CompactionRounds(self, cleaner_settings)
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
        self.moves.load_found()
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
        self.compaction.offsets.update(OffsetCheckpointFile(os.path.join(log_dir, CLEANER_CHECKPOINT)).read())
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
                self.moves.found.append((future, log_dir, path, clean))
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            if tp in self.logs:
                raise LogDirError(f"partition {tp[0]}-{tp[1]} exists in both {self._log_dir_of[tp]} and {log_dir}")
            loaded = Log(
                path,
                self.config_for(tp[0]),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=watermarks.get(tp),
                had_clean_shutdown=clean,
                clock=self.clock,
                write_behind=self.write_behind,
            )
            self.place(tp, loaded, log_dir)
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
        self.moves.stop_in(log_dir)
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

    def online_logs(self) -> list[tuple[TopicPartition, Log]]:
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
        log_dir = self.moves.preferred_dirs.pop(tp, None) or min(self.log_dirs, key=self._logs_in_dir.__getitem__)
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
        self.place(tp, created, log_dir)
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

    def place(self, tp: TopicPartition, partition_log: Log, log_dir: str) -> None:
        """``partition_log`` is now ``tp``'s log, in ``log_dir`` (created, loaded or moved there)."""
        previous = self._log_dir_of.get(tp)
        if previous is not None:
            self._logs_in_dir[previous] -= 1
        self.logs[tp] = partition_log
        self._log_dir_of[tp] = log_dir
        self._logs_in_dir[log_dir] += 1

    def dir_of(self, tp: TopicPartition) -> str | None:
        """The log dir of ``tp``, None when this broker has no log of it."""
        return self._log_dir_of.get(tp)

    def reconfigure(self, default_config: LogConfig, cleaner_settings: cleaner.CleanerSettings) -> None:
        """New broker-wide topic defaults and cleaner settings (dynamic broker configs, KIP-226).

        Every log takes the new defaults at once for the keys its topic does not override. New
        cleaner settings (log.cleaner.threads, the I/O rate) start a new pool of cleaner processes
        once no round is under way in the old one: a round is never cut short.
        """
        self.default_config = default_config
        for (topic, _), partition_log in self.logs.items():
            partition_log.config = self.config_for(topic)
        self.compaction.reconfigure(cleaner_settings)

    def update_topic_config(self, topic: str) -> None:
        config = self.config_for(topic)
        for (t, _), partition_log in self.logs.items():
            if t == topic:
                partition_log.config = config

    def delete_log(self, tp: TopicPartition) -> None:
        """Rename the partition dir to ``<name>.<uuid>-delete`` first, so a crash mid-delete is finished at startup."""
        self.moves.forget(tp)
        partition_log = self.logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        if log_dir is not None:
            self._logs_in_dir[log_dir] -= 1
        self.compaction.offsets.pop(tp, None)
        if partition_log is None or log_dir is None:
            return
        if log_dir in self.offline_dirs:
            return  # its files stay until the dir is back; Kafka deletes them then
        partition_log.close_crashlike()
        doomed = os.path.join(log_dir, f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(partition_log.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    # -- periodic work -----------------------------------------------------------------------------
    def cleanup_logs(self) -> int:
        """Retention on every log; returns the number of segments deleted."""
        deleted = 0
        for tp, partition_log in self.online_logs():
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
        for tp, partition_log in self.online_logs():
            flush_ms = partition_log.config.flush_ms
            if flush_ms < 2**62 and partition_log.since_flush_ms() >= flush_ms:
                self._guarded(tp, partition_log.flush, "flushing")

    def write_checkpoint(self, name: str, value: Callable[[TopicPartition, Log], int | None]) -> None:
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
        self.write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda tp, log_: log_.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self.write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda tp, log_: log_.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self.write_checkpoint(REPLICATION_CHECKPOINT, lambda tp, log_: log_.high_watermark)

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
            tasks.append((self.intervals.cleaner_backoff_ms, self.compaction.clean_logs))
            self.compaction.stopped = False
            self.compaction.start_processes()
        try:
            await self._run_tasks(tasks, stop)
        finally:
            self.compaction.stop()

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
        self.compaction.stop()
        # leader-epoch checkpoints still on the checkpoint thread (a close rewrites each anyway)
        if not checkpoint.wait_for_deferred(DEFERRED_CHECKPOINTS_WAIT_S):
            log.warning("leader-epoch checkpoints still being written after %.0fs", DEFERRED_CHECKPOINTS_WAIT_S)
        for tp, future in list(self.moves.future_logs.items()):
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
