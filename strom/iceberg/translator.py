"""The broker's Iceberg service: every ``iceberg.target.lag.ms``, one translation round per Iceberg
topic, for the partitions this broker leads, in a worker process.

It takes its collaborators, not the broker: ``leaders`` lists the partition logs this broker leads
now (an empty list while it cannot confirm its ZooKeeper session), and the catalog settings. On
the event loop it only reads what a log knows in memory (log start, last stable offset, aborted
transactions, all cheap) and writes the segment's buffered appends to its file; the records are
read, encoded and committed in the worker (strom.iceberg.worker). A topic in a schema mode also
takes the registry as this broker's view of ``_schemas`` knows it (``schemas``, a callable the
broker composes from its Schema Registry service): plain data, never the live registry, since the
worker is another process.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from strom.iceberg.maintenance import MaintenanceJob, MaintenanceResult, maintain_topic
from strom.iceberg.orphan_files import Removed
from strom.iceberg.schema_modes import MODES as SCHEMA_MODES
from strom.iceberg.schema_modes import SchemaSet
from strom.iceberg.segments import Aborted
from strom.iceberg.table import CatalogSettings
from strom.iceberg.worker import PartitionJob, TopicJob, TopicResult, drop_table, init_worker, translate_topic
from strom.storage.iceberg_mode import mode_name, parse_mode

log = logging.getLogger("strom.iceberg")

TRANSLATED_MODES = ("key_value", *SCHEMA_MODES)


class AbortedTxn(Protocol):
    producer_id: int
    first_offset: int
    last_offset: int


class Segment(Protocol):
    def write_pending(self) -> None: ...


class TranslatedLog(Protocol):
    """What the translator reads of a partition's log (strom.storage.log.Log)."""

    directory: str

    @property
    def log_start_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def active_segment(self) -> Segment: ...
    def aborted_transactions(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]: ...


class TopicSettings(Protocol):
    """A topic's Iceberg configs (strom.storage.log_config.LogConfig)."""

    @property
    def iceberg_mode(self) -> str: ...
    @property
    def iceberg_delete(self) -> bool: ...
    @property
    def iceberg_partition_spec(self) -> str: ...
    @property
    def iceberg_maintenance_interval_ms(self) -> int: ...
    @property
    def iceberg_compaction_enabled(self) -> bool: ...
    @property
    def iceberg_compaction_min_input_files(self) -> int: ...
    @property
    def history_expire_max_snapshot_age_ms(self) -> int: ...
    @property
    def history_expire_min_snapshots_to_keep(self) -> int: ...
    @property
    def write_metadata_delete_after_commit_enabled(self) -> bool: ...
    @property
    def write_metadata_previous_versions_max(self) -> int: ...
    @property
    def iceberg_orphan_files_older_than_ms(self) -> int: ...


@dataclass
class TopicCounters:
    """What this broker's translation and maintenance did to one topic's tables (its table and its
    dead-letter table) since it started: the counters of the Prometheus metrics, never reset."""

    compactions: int = 0  # compaction commits
    files_rewritten: int = 0  # small files compacted (in)
    files_written: int = 0  # the files written in their place (out)
    bytes_rewritten: int = 0
    bytes_written: int = 0
    snapshots_expired: int = 0
    data_files_deleted: int = 0  # files that only expired snapshots referenced
    data_bytes_deleted: int = 0
    manifests_deleted: int = 0
    manifest_lists_deleted: int = 0
    metadata_files_deleted: int = 0  # a dropped table's metadata.json files, purged
    orphan_files_deleted: int = 0  # files no metadata referenced: old orphans, a dropped table's leftovers
    orphan_bytes_deleted: int = 0
    tables_purged: int = 0  # tables of deleted topics dropped and their files deleted (iceberg.delete)
    maintenance_failures: int = 0
    translation_failures: int = 0
    translation_conflicts: int = 0  # translation commits that lost a race and were planned again
    maintenance_conflicts: int = 0  # maintenance commits that lost a race and were planned again

    def add(self, result: MaintenanceResult) -> None:
        self.compactions += result.compactions
        self.files_rewritten += result.files_rewritten
        self.files_written += result.files_written
        self.bytes_rewritten += result.bytes_rewritten
        self.bytes_written += result.bytes_written
        self.snapshots_expired += result.snapshots_expired
        self.data_files_deleted += result.data_files_deleted
        self.data_bytes_deleted += result.data_bytes_deleted
        self.manifests_deleted += result.manifests_deleted
        self.manifest_lists_deleted += result.manifest_lists_deleted
        self.maintenance_conflicts += result.commits_lost
        self.maintenance_failures += result.cleanup_failures
        self.orphan_files_deleted += result.orphan_files_deleted
        self.orphan_bytes_deleted += result.orphan_bytes_deleted

    def purged(self, removed: Removed) -> None:
        """A dropped table's purge: its files deleted, by kind."""
        self.tables_purged += 1
        self.data_files_deleted += removed.data_files
        self.data_bytes_deleted += removed.data_bytes
        self.manifests_deleted += removed.manifests
        self.manifest_lists_deleted += removed.manifest_lists
        self.metadata_files_deleted += removed.metadata_files
        self.orphan_files_deleted += removed.orphan_files
        self.orphan_bytes_deleted += removed.orphan_bytes


class IcebergTranslator:
    def __init__(
        self,
        catalog: CatalogSettings,
        leaders: Callable[[], Iterable[tuple[str, int, TopicSettings, TranslatedLog]]],
        target_lag_ms: int,
        topic_exists: Callable[[str], bool] = lambda topic: True,
        schemas: Callable[..., SchemaSet] | None = None,
        topic_id: Callable[[str], str | None] | None = None,
        confirmed_topic_id: Callable[[str], str | None] | None = None,
    ):
        """``leaders``: (topic, partition, topic configs, log) of each partition this broker leads;
        ``topic_exists``: whether a topic is still in the cluster's metadata (a deleted one's table
        is dropped when its iceberg.delete was true); ``topic_id``: instead, the topic's id in the
        cluster's metadata (32 hex digits; None once deleted), which also tells a topic deleted and
        made again under its name from the one whose table this broker wrote; ``schemas``: the
        registry's schemas for a topic's round, called with the topic and, when its
        value_schema_latest names one, the subject (None: no registry, the schema modes' records wait);
        ``confirmed_topic_id``: the topic's id as the cluster's store has it now (not a cache that
        may be behind), asked before a table of another id is set aside (default ``topic_id``)."""
        self.catalog = catalog
        self._leaders = leaders
        self._topic_id = topic_id or (lambda topic: "" if topic_exists(topic) else None)
        self._ids: dict[str, str] = {}  # Iceberg topics led here -> their topic id when last led
        self._confirmed_topic_id = confirmed_topic_id or self._topic_id
        self._retired: dict[str, set[str]] = {}  # topic -> ids of earlier topics of its name, confirmed gone
        self._schemas = schemas
        self.target_lag_ms = target_lag_ms
        self._pool: ProcessPoolExecutor | None = None
        self._known: dict[tuple[str, int], int] = {}  # the table's committed offsets as last read
        self._read_topics: set[str] = set()
        self._translated: dict[
            str, bool
        ] = {}  # Iceberg topics led here -> their iceberg.delete  # topics whose table offsets a round read back
        self._maintainer: dict[str, TopicSettings] = {}  # topics whose partition 0 is led here: their configs
        self._maintained: dict[str, float] = {}  # topic -> when its table was last maintained (monotonic)
        self._spec_notes: dict[str, tuple[str, ...]] = {}  # the partition-spec fields last reported left out
        self._counters: dict[str, TopicCounters] = {}
        # (topic, partition) -> (last stable offset, when first seen that high) not yet in the table
        self._marks: dict[tuple[str, int], list[tuple[int, float]]] = {}
        self.rounds = 0
        self.rows = 0
        self.compactions = 0
        self.snapshots_expired = 0
        self.failures = 0
        self.dead_letters = 0

    def counters(self) -> dict[str, TopicCounters]:
        """A copy of every topic's counters (on the event loop, for a metrics scrape)."""
        return {topic: replace(counters) for topic, counters in self._counters.items()}

    def _of(self, topic: str) -> TopicCounters:
        return self._counters.setdefault(topic, TopicCounters())

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=init_worker)
        return self._pool

    def jobs(self) -> list[TopicJob]:
        """One job per Iceberg topic, from what the logs know in memory (on the event loop)."""
        by_topic: dict[str, list[PartitionJob]] = {}
        modes: dict[str, str] = {}
        specs: dict[str, str] = {}
        self._maintainer = {}
        now = time.monotonic()
        led: set[tuple[str, int]] = set()
        ids: dict[str, str | None] = {}
        for topic, partition, settings, log_ in self._leaders():
            if mode_name(settings.iceberg_mode) not in TRANSLATED_MODES:
                continue
            if topic not in ids:
                ids[topic] = self._topic_id(topic)
            if ids[topic] is None or ids[topic] != self._ids.setdefault(topic, ids[topic] or ""):
                continue  # deleted (or made again) since this round began: the next round sees to it
            led.add((topic, partition))
            modes[topic] = settings.iceberg_mode
            specs[topic] = settings.iceberg_partition_spec
            if partition == 0:  # one broker per table maintains it: the leader of partition 0
                self._maintainer[topic] = settings
            self._translated[topic] = settings.iceberg_delete
            log_.active_segment.write_pending()  # everything below the high watermark is in the file
            upper = log_.last_stable_offset
            self._observe((topic, partition), upper, now)
            start = max(self._known.get((topic, partition), log_.log_start_offset), log_.log_start_offset)
            aborted = tuple(
                Aborted(a.producer_id, a.first_offset, a.last_offset) for a in log_.aborted_transactions(start, upper)
            )
            by_topic.setdefault(topic, []).append(
                PartitionJob(partition, log_.directory, log_.log_start_offset, upper, start, aborted)
            )
        for key in [k for k in self._marks if k not in led]:  # led elsewhere now: its marks are stale
            del self._marks[key]
        jobs = []
        for topic, parts in sorted(by_topic.items()):
            mode = parse_mode(modes[topic])  # checked when the config was set: value_schema_latest's options
            schemas = None
            if mode.name in SCHEMA_MODES:
                try:
                    if self._schemas is None:
                        schemas = SchemaSet(settled=False)
                    else:  # the subject option instead of <topic>-value
                        schemas = self._schemas(topic, mode.subject) if mode.subject else self._schemas(topic)
                except Exception as exc:  # the registry's view failed: this topic waits, the others go on
                    self.failures += 1
                    log.warning("iceberg: the schemas for %s could not be read, next round tries again: %r", topic, exc)
                    continue
            jobs.append(
                TopicJob(
                    topic,
                    self.catalog,
                    tuple(parts),
                    mode.name,
                    schemas,
                    specs[topic],
                    topic_id=self._ids[topic],
                    delete=self._translated[topic],
                    protobuf_name=mode.protobuf_name,
                    mode_options=str(mode),
                    retired=tuple(sorted(self._retired.get(topic, ()))),
                )
            )
        return jobs

    def lag(self) -> list[tuple[str, int, int, float]]:
        """(topic, partition, committed records not yet in the table, seconds the oldest of them has
        waited) of each Iceberg partition this broker leads, from the table offsets the last round
        read back (none before it; on the event loop). The seconds count from when this broker first
        saw that record committed, at a round or a scrape (see ``_observe``): at least that long."""
        found = []
        now = time.monotonic()
        for topic, partition, settings, log_ in self._leaders():
            if mode_name(settings.iceberg_mode) not in TRANSLATED_MODES or topic not in self._read_topics:
                continue
            key = (topic, partition)
            translated = max(self._known.get(key, 0), log_.log_start_offset)
            self._observe(key, log_.last_stable_offset, now)
            found.append(
                (topic, partition, max(0, log_.last_stable_offset - translated), self._waited(key, translated, now))
            )
        return found

    def _observe(self, key: tuple[str, int], last_stable_offset: int, now: float) -> None:
        """Note when the last stable offset was first seen this high: the records below it were
        committed by then. The marks rise with the offset; the table's progress drops them."""
        marks = self._marks.setdefault(key, [])
        if not marks or last_stable_offset > marks[-1][0]:
            marks.append((last_stable_offset, now))

    def _waited(self, key: tuple[str, int], translated: int, now: float) -> float:
        """Seconds since the first mark above the table's offset: the record there was committed by then."""
        marks = self._marks.get(key, [])
        while marks and marks[0][0] <= translated:  # the table holds everything below that mark
            marks.pop(0)
        return now - marks[0][1] if marks else 0.0

    async def run_round(self) -> None:
        loop = asyncio.get_running_loop()
        # a topic deleted, or deleted and made again (another id), since it was last led here
        for topic in [t for t in self._translated if self._topic_id(t) != self._ids.get(t, self._topic_id(t))]:
            drop = self._translated.pop(topic)
            old_id = self._ids.pop(topic, "")
            self._read_topics.discard(topic)
            for key in [k for k in self._known if k[0] == topic]:
                del self._known[key]  # the offsets of the old topic's table: none of the new one's
            for key in [k for k in self._marks if k[0] == topic]:
                del self._marks[key]
            if not drop:
                log.info("iceberg: topic %s was deleted; its table is kept (iceberg.delete=false)", topic)
                continue
            try:
                purged: list[Removed] = await loop.run_in_executor(
                    self._executor(), drop_table, self.catalog, topic, old_id
                )
                for removed in purged:
                    self._of(topic).purged(removed)
                log.info(
                    "iceberg: topic %s was deleted, and its table with it (iceberg.delete=true): %d files purged",
                    topic,
                    sum(removed.files for removed in purged),
                )
            except Exception as exc:
                self.failures += 1
                log.warning("iceberg: dropping the table of deleted topic %s failed: %r", topic, exc)
        for job in self.jobs():
            try:
                result: TopicResult = await loop.run_in_executor(self._executor(), translate_topic, job)
                if result.foreign and self._confirm_gone(job.topic, job.topic_id, result.foreign):
                    job = replace(job, retired=(*job.retired, result.foreign))
                    result = await loop.run_in_executor(self._executor(), translate_topic, job)
            except Exception as exc:  # a round that fails is retried by the next one, from the table's offsets
                self.failures += 1
                self._of(job.topic).translation_failures += 1
                log.warning("iceberg: translating %s failed, next round tries again: %r", job.topic, exc)
                continue
            if result.foreign:
                log.warning(
                    "iceberg: the table of %s records topic id %s, this broker knows the topic as %s and the "
                    "cluster's store does not confirm it: the table is left, the next round asks again",
                    job.topic,
                    result.foreign,
                    job.topic_id,
                )
                continue
            for partition, offset in result.offsets.items():
                self._known[(job.topic, partition)] = offset
                self._waited((job.topic, partition), offset, 0.0)  # drops the marks the table has passed
            self._read_topics.add(job.topic)
            for note in result.set_aside:
                log.info("iceberg: topic %s was made again (topic id %s): %s", job.topic, job.topic_id, note)
            self.rows += result.rows
            self._of(job.topic).translation_conflicts += result.commits_lost
            self.dead_letters += result.dead_letters
            if result.dead_letters:
                log.info("iceberg: %d records of %s went to its dead-letter table", result.dead_letters, job.topic)
            if result.commits_lost:
                log.info(
                    "iceberg: %d commits of %s lost a race to another writer and were planned again",
                    result.commits_lost,
                    job.topic,
                )
            if result.spec_left_out != self._spec_notes.get(job.topic, ()):
                self._spec_notes[job.topic] = result.spec_left_out
                for note in result.spec_left_out:
                    log.warning(
                        "iceberg: %s's iceberg.partition.spec field %s; the table is partitioned without it",
                        job.topic,
                        note,
                    )
            for partition, offset in result.waiting.items():
                log.warning(
                    "iceberg: %s-%d waits at offset %d for a schema id this broker's view of _schemas has not "
                    "read (a registration in flight, or no replica of _schemas here to read it from)",
                    job.topic,
                    partition,
                    offset,
                )
        await self._maintain(loop)
        self.rounds += 1

    def _confirm_gone(self, topic: str, topic_id: str, found: str) -> bool:
        """Whether the cluster's store says ``topic`` is the topic of ``topic_id`` (the one this
        broker translates), so a table of ``found`` is an earlier topic's that may be set aside."""
        try:
            live = self._confirmed_topic_id(topic)
        except Exception as exc:  # the store did not answer: the table waits for the next round
            log.warning("iceberg: the topic id of %s could not be confirmed: %r", topic, exc)
            return False
        if live != topic_id or found == live:
            return False
        self._retired.setdefault(topic, set()).add(found)
        return True

    async def _maintain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Compact and expire the tables of the topics whose partition 0 this broker leads, each
        every ``iceberg.maintenance.interval.ms`` (the first one interval after it is first led here)."""
        now = time.monotonic()
        for topic, settings in sorted(self._maintainer.items()):
            last = self._maintained.setdefault(topic, now)
            if now - last < settings.iceberg_maintenance_interval_ms / 1000:
                continue
            self._maintained[topic] = now
            job = MaintenanceJob(
                topic,
                self.catalog,
                settings.iceberg_compaction_enabled,
                settings.iceberg_compaction_min_input_files,
                settings.history_expire_max_snapshot_age_ms,
                settings.history_expire_min_snapshots_to_keep,
                metadata_delete_after_commit=settings.write_metadata_delete_after_commit_enabled,
                metadata_previous_versions_max=settings.write_metadata_previous_versions_max,
                orphan_older_than_ms=settings.iceberg_orphan_files_older_than_ms,
            )
            try:
                result: MaintenanceResult = await loop.run_in_executor(self._executor(), maintain_topic, job)
            except Exception as exc:  # the next interval tries again; the table is as it was
                self.failures += 1
                self._of(topic).maintenance_failures += 1
                log.warning(
                    "iceberg: maintaining the table of %s failed, the next interval tries again: %r", topic, exc
                )
                continue
            self.compactions += result.files_rewritten > 0
            self.snapshots_expired += result.snapshots_expired
            self._of(topic).add(result)
            if result.orphan_files_deleted:
                log.info(
                    "iceberg: %s's tables: %d orphan files (%d bytes) no metadata referenced deleted",
                    topic,
                    result.orphan_files_deleted,
                    result.orphan_bytes_deleted,
                )
            if result.files_rewritten or result.snapshots_expired:
                log.info(
                    "iceberg: %s's table: %d small files compacted into %d, %d snapshots expired, "
                    "%d files only they referenced deleted (%d data files)",
                    topic,
                    result.files_rewritten,
                    result.files_written,
                    result.snapshots_expired,
                    result.files_deleted,
                    result.data_files_deleted,
                )

    async def run(self, stop: asyncio.Event) -> None:
        """A round every target lag until ``stop`` (the broker runs a last one before it gives up
        its leaderships)."""
        try:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=self.target_lag_ms / 1000)
                    break
                except TimeoutError:
                    pass
                await self.run_round()
        finally:
            self.close()

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
