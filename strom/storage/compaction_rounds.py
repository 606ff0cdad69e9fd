"""Compaction rounds: which compacted logs to clean, in which cleaner process, and swapping the
result in.

The event loop picks the dirtiest logs (Kafka's LogCleanerManager.grabFilthiestCompactedLog) and
takes each round's inputs; a cleaner process (``log.cleaner.threads`` of them: processes, not
threads, see strom.storage.cleaner and cleaner_process) reads and writes the segments; the event
loop, the only place that changes a log's segment list, installs the result and records how far
each log is clean (the cleaner-offset-checkpoint). The log manager owns the logs and their dirs and
hands this its view of them (``LogDirs``).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol

from strom.protocol.errors import KafkaStorageError
from strom.storage import cleaner, cleaner_process
from strom.storage.checkpoint import CLEANER_CHECKPOINT, OffsetCheckpointFile
from strom.storage.log import Log

log = logging.getLogger("strom.storage")

TopicPartition = tuple[str, int]


class LogDirs(Protocol):
    """What compaction needs of the log manager: its logs and dirs, and its failure handling."""

    log_dirs: list[str]
    offline_dirs: set[str]
    logs: dict[TopicPartition, Log]

    def online_logs(self) -> list[tuple[TopicPartition, Log]]: ...
    def dir_of(self, tp: TopicPartition) -> str | None: ...
    def storage_error(self, tp: TopicPartition, exc: OSError, doing: str) -> KafkaStorageError: ...
    def fail_dir(self, log_dir: str, exc: OSError, doing: str) -> None: ...
    def write_checkpoint(self, name: str, value: Callable[[TopicPartition, Log], int | None]) -> None: ...


class CompactionRounds:
    """Compaction of the logs in ``dirs`` with ``settings`` (log.cleaner.threads, its I/O rate)."""

    def __init__(self, dirs: LogDirs, settings: cleaner.CleanerSettings):
        self.dirs = dirs
        self.settings = settings
        self.offsets: dict[TopicPartition, int] = {}  # where each log's dirty part starts
        self.stopped = False
        self._executor: ProcessPoolExecutor | None = None
        self._pool_stop: object | None = None  # the pool's multiprocessing Event
        self._pool_stale = False  # the cleaner settings changed: a new pool once no round runs
        self._cleaning: dict[TopicPartition, Log] = {}  # rounds in a cleaner process now
        self._checkpoint_lock = threading.Lock()  # cleaner checkpoints written off the event loop

    def reconfigure(self, settings: cleaner.CleanerSettings) -> None:
        """New cleaner settings (dynamic broker configs) start a new pool of cleaner processes: at
        once when no round is under way, else with the next round once the old pool's are done
        (a round is never cut short)."""
        if settings == self.settings:
            return
        self.settings = settings
        if self._executor is None:
            return
        if self._cleaning:
            self._pool_stale = True
            return
        self._retire_pool()
        if not self.stopped:
            self.start_processes()

    def _retire_pool(self) -> None:
        retired, self._executor = self._executor, None  # sized for the old settings: its processes end
        if retired is not None:
            retired.shutdown(wait=False, cancel_futures=True)
        self._pool_stale = False

    def clean_logs(self, skip: TopicPartition | None = None) -> int:
        """Start a round in a free cleaner process for each of the dirtiest compacted logs whose dirty
        ratio is above min.cleanable.dirty.ratio, or whose oldest dirty record is past
        max.compaction.lag.ms (Kafka's LogCleanerManager.grabFilthiestCompactedLog); returns the
        rounds started (or, without a running event loop, done on this thread)."""
        threads = self.settings.threads
        if threads <= 0 or self.stopped:
            return 0
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        candidates = []
        for tp, partition_log in self.dirs.online_logs():
            if not partition_log.config.compact or tp in self._cleaning or tp == skip:
                continue
            first_dirty = max(self.offsets.get(tp, 0), partition_log.log_start_offset)
            try:
                dirty, total = cleaner.dirty_bytes(partition_log, first_dirty)
                ratio = dirty / total if total else 0.0
                overdue = dirty > 0 and cleaner.max_compaction_delay(partition_log, first_dirty) > 0
            except OSError as exc:
                self.dirs.storage_error(tp, exc, "compacting")
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
                plan = cleaner.plan_cleaning(partition_log, first_dirty, self.settings)
            except OSError as exc:
                self.dirs.storage_error(tp, exc, "compacting")
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
                self._executor = None
                continue
            self._cleaning[tp] = partition_log
            # The future completes on the pool's thread; the swap is done on the event loop, the only
            # place that changes a log's segment list.
            future.add_done_callback(functools.partial(self._cleaning_done, loop, tp, partition_log, plan))
        return started

    def _pool(self) -> ProcessPoolExecutor:
        if self._pool_stale and not self._cleaning:
            self._retire_pool()
        if self._executor is None:
            settings = self.settings
            context = multiprocessing.get_context("spawn")  # never fork a process that runs an event loop
            stop = context.Event()
            self._pool_stop = stop
            init: Callable[..., None] = cleaner_process.init
            self._executor = ProcessPoolExecutor(
                settings.threads,
                mp_context=context,
                initializer=init,
                initargs=(stop, settings.io_max_bytes_per_second / settings.threads),
            )
        return self._executor

    def start_processes(self) -> None:
        """Start the cleaner processes with the broker, as Kafka starts its cleaner threads, and not
        with the first round.

        A process's start (Python's own, then the storage modules: about a tenth of a second of
        CPU) holds a CPU that a woken broker thread can wait behind for a few milliseconds
        (strom.storage.cleaner_process says why). Paid with the first round, it lands in the
        middle of traffic; `python -m strom.bench.compaction` showed fetch p99 over that round's
        first half second of 0.8-1.6 ms against 0.5-0.6 ms with the processes started here. The
        cost is an idle process per cleaner thread. A start that fails (no process or memory to
        be had) is logged, and the first round tries again."""
        if self.settings.threads <= 0:
            return  # log.cleaner.threads=0: no compaction, no process
        try:
            pool = self._pool()
            for _ in range(self.settings.threads):
                # no worker is idle yet, so each submission starts one more process
                pool.submit(os.getpid)
        except (OSError, RuntimeError) as exc:
            where = " (their semaphores are files in /dev/shm)" if getattr(exc, "errno", None) == errno.ENOSPC else ""
            log.warning("could not start the cleaner processes: %s%s; the first round tries again", exc, where)
            failed, self._executor = self._executor, None
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
        current = self.dirs.logs.get(tp) is partition_log and self.dirs.dir_of(tp) not in self.dirs.offline_dirs
        if error is not None or outcome is None:
            cause = cleaner.storage_cause(error) if error is not None else None
            if isinstance(error, cleaner.CleaningAborted):
                log.info("cleaning of %s stopped: %s", partition_log.directory, error)
            elif cause is not None and current:
                self.dirs.storage_error(tp, cause, "compacting")
            elif cause is None and current:
                log.error("cleaning of %s failed: %s", partition_log.directory, error)
                if isinstance(error, BrokenProcessPool):
                    self._executor = None  # a cleaner process died; the next pass starts a new pool
            return
        if not current or self.stopped:
            outcome.discard()  # deleted, offline or shutting down: what it replaces is no longer served
            return
        try:
            result = cleaner.install(partition_log, plan, outcome)
        except OSError as exc:
            self.dirs.storage_error(tp, exc, "compacting")
            return
        except KafkaStorageError:
            return  # a segment reported it
        if result is None:
            return
        self.offsets[tp] = result.first_dirty_offset
        if self._executor is None:
            self.dirs.write_checkpoint(CLEANER_CHECKPOINT, lambda tp, _log: self.offsets.get(tp))
        else:  # fsyncs, off the event loop (Kafka's cleaner thread writes it too)
            self._write_cleaner_checkpoint_off_loop()
        if self._executor is not None:
            self.clean_logs(skip=tp)  # as Kafka's threads, go straight on to the next dirty log

    def _write_cleaner_checkpoint_off_loop(self) -> None:
        """The offsets are taken here, on the event loop; the files are written on a thread, one
        write at a time, and a failure takes the dir offline on the event loop."""
        loop = asyncio.get_running_loop()
        files = {}
        for log_dir in self.dirs.log_dirs:
            if log_dir not in self.dirs.offline_dirs:
                files[os.path.join(log_dir, CLEANER_CHECKPOINT)] = (
                    log_dir,
                    {tp: offset for tp, offset in self.offsets.items() if self.dirs.dir_of(tp) == log_dir},
                )

        def write() -> None:
            with self._checkpoint_lock:
                for path, (log_dir, offsets) in files.items():
                    try:
                        OffsetCheckpointFile(path).write(offsets)
                    except OSError as exc:
                        self._call_soon(loop, self.dirs.fail_dir, log_dir, exc, f"writing {path}")

        loop.run_in_executor(None, write)

    @staticmethod
    def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: object) -> None:
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            pass  # the loop is closed: the broker stopped

    def stop(self) -> None:
        """Stop the cleaner processes at their next batch and wait for them; their rounds are dropped
        (a round's own .cleaned files are removed by it, or else by the next start)."""
        self.stopped = True
        pool, self._executor = self._executor, None
        if pool is not None:
            self._pool_stop.set()  # type: ignore[union-attr]
            pool.shutdown(wait=True, cancel_futures=True)
        self._cleaning.clear()
