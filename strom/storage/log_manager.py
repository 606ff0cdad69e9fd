"""All partition logs of a broker across its ``log.dirs``, plus the periodic storage work.

Startup reads each log dir's checkpoints and clean-shutdown marker, opens every
``<topic>-<partition>`` directory (recovering after a crash) and removes the marker, so a crash
from then on is detected next time. The scheduler runs retention, flushing, checkpointing and
compaction on the broker's event loop; shutdown flushes, checkpoints and writes the marker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping

from strom.storage import cleaner
from strom.storage.checkpoint import (
    CLEANER_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    OffsetCheckpointFile,
)
from strom.storage.log import Log, parse_partition_dir
from strom.storage.log_config import LogConfig
from strom.storage.write_behind import WriteBehind

log = logging.getLogger("strom.storage")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"

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
        clock: Callable[[], float] = time.time,
    ):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.intervals = intervals
        self.topic_overrides = topic_overrides
        self.clock = clock
        self.write_behind = WriteBehind()  # the connection writes it out before sending responses
        self.logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self.had_clean_shutdown = True

    # -- startup -----------------------------------------------------------------------------------
    def startup(self) -> None:
        for log_dir in self.log_dirs:
            os.makedirs(log_dir, exist_ok=True)
            fresh = not os.path.exists(os.path.join(log_dir, META_PROPERTIES))
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
            if os.path.exists(marker):
                os.unlink(marker)
        log.info("loaded %d partition logs from %s", len(self.logs), ", ".join(self.log_dirs))

    def _check_meta_properties(self, log_dir: str) -> None:
        """meta.properties ties a log dir to one broker, as in Kafka, so dirs are never mixed up."""
        path = os.path.join(log_dir, META_PROPERTIES)
        if os.path.exists(path):
            props = {}
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if "=" in line and not line.startswith("#"):
                        key, value = line.strip().split("=", 1)
                        props[key] = value
            found = props.get("broker.id")
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

    # -- logs --------------------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self.default_config.with_overrides(self.topic_overrides(topic))

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        log_dir = min(self.log_dirs, key=lambda d: sum(1 for v in self._log_dir_of.values() if v == d))
        path = os.path.join(log_dir, f"{tp[0]}-{tp[1]}")
        created = Log(path, config or self.config_for(tp[0]), clock=self.clock, write_behind=self.write_behind)
        self.logs[tp] = created
        self._log_dir_of[tp] = log_dir
        return created

    def log_dir_of(self, tp: TopicPartition) -> str:
        return self._log_dir_of[tp]

    def update_topic_config(self, topic: str) -> None:
        config = self.config_for(topic)
        for (t, _), partition_log in self.logs.items():
            if t == topic:
                partition_log.config = config

    def delete_log(self, tp: TopicPartition) -> None:
        """Rename the partition dir to ``<name>.<uuid>-delete`` first, so a crash mid-delete is finished at startup."""
        partition_log = self.logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        self._cleaner_offsets.pop(tp, None)
        if partition_log is None or log_dir is None:
            return
        partition_log.close_crashlike()
        doomed = os.path.join(log_dir, f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.rename(partition_log.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    # -- periodic work -----------------------------------------------------------------------------
    def cleanup_logs(self) -> int:
        """Retention on every log; returns the number of segments deleted."""
        return sum(partition_log.delete_old_segments() for partition_log in list(self.logs.values()))

    def flush_dirty_logs(self) -> None:
        now = int(self.clock() * 1000)
        for partition_log in list(self.logs.values()):
            flush_ms = partition_log.config.flush_ms
            if flush_ms < 2**62 and now - partition_log._last_flush_ms >= flush_ms:
                partition_log.flush()

    def clean_logs(self) -> int:
        """Compact every log whose dirty ratio passed min.cleanable.dirty.ratio; returns logs cleaned."""
        cleaned = 0
        for tp, partition_log in list(self.logs.items()):
            if not partition_log.config.compact:
                continue
            first_dirty = max(self._cleaner_offsets.get(tp, 0), partition_log.log_start_offset)
            if cleaner.dirty_ratio(partition_log, first_dirty) < partition_log.config.min_cleanable_dirty_ratio:
                continue
            result = cleaner.clean_log(partition_log, first_dirty)
            self._cleaner_offsets[tp] = result.first_dirty_offset
            cleaned += 1
        if cleaned:
            self._write_checkpoint(CLEANER_CHECKPOINT, lambda tp, l: self._cleaner_offsets.get(tp))
        return cleaned

    def _write_checkpoint(self, name: str, value: Callable[[TopicPartition, Log], int | None]) -> None:
        for log_dir in self.log_dirs:
            offsets = {}
            for tp, partition_log in self.logs.items():
                if self._log_dir_of.get(tp) == log_dir:
                    found = value(tp, partition_log)
                    if found is not None:
                        offsets[tp] = found
            OffsetCheckpointFile(os.path.join(log_dir, name)).write(offsets)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, lambda tp, l: l.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda tp, l: l.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoint(REPLICATION_CHECKPOINT, lambda tp, l: l.high_watermark)

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
        now = time.monotonic()
        next_run = [now + interval / 1000 for interval, _ in tasks]
        while not stop.is_set():
            wait = max(0.0, min(next_run) - time.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), timeout=wait)
                return
            except asyncio.TimeoutError:
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
        """Flush and close every log, write checkpoints, then the clean-shutdown marker last."""
        for partition_log in self.logs.values():
            partition_log.close()
        self.checkpoint_all()
        for log_dir in self.log_dirs:
            with open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "w"):
                pass
        log.info("log manager shut down cleanly")
