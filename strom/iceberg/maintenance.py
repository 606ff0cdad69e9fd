"""Table maintenance of an Iceberg topic: small files compacted, old snapshots expired.

Translation commits a snapshot every ``iceberg.target.lag.ms`` per topic, each with files as small
as the records of one round, so a table gathers many small files and many snapshots. Every
``iceberg.maintenance.interval.ms`` the broker that leads the topic's partition 0 (one broker per
table) runs this in its translation worker, off the event loop, for the table and its dead-letter table.

**Compaction** (pyiceberg 0.12 has no rewrite_data_files): the small files of each table partition
with at least ``iceberg.compaction.min-input-files`` of them are read with pyiceberg's own Arrow
scan, sorted by (partition, offset), written as new files and swapped for the old ones in one
overwrite snapshot. What keeps it exactly once:

- the snapshot carries the ``strom.offsets.*`` of the snapshot it was planned from, so the
  translators resume where they would have (they read only the current snapshot's summary);
- the commit is conditional on that snapshot (pyiceberg's AssertRefSnapshotId, with the table's
  own commit retries off): a translation that committed meanwhile makes the compaction fail, and
  it plans again from the new snapshot; a compaction that commits first makes the translation's
  commit fail, and the translator plans again from the compaction's offsets, which are its own;
- the rows written are counted against the files' record counts before anything is committed.

**Expiry**: snapshots older than ``history.expire.max-snapshot-age-ms`` are removed from the
table's metadata, except the newest ``history.expire.min-snapshots-to-keep`` of the current
snapshot's ancestry (Iceberg's table properties of those names). pyiceberg removes them from the
metadata only; then the files that only they referenced are deleted (strom.iceberg.expired_files),
the small files a compaction replaced among them. The topic's ``write.metadata.*`` configs are
kept as the table's properties of those names, so pyiceberg's commits delete old metadata files
as Iceberg's do.

**Orphan files** (what no metadata references: a lost commit's files, a dead worker's) older than
the topic's ``iceberg.orphan.files.older.than.ms`` (Iceberg's removeOrphanFiles ``older_than``,
3 days by default) are deleted last (strom.iceberg.orphan_files).
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any

from strom.iceberg import table as tables
from strom.iceberg.expired_files import delete_unreachable
from strom.iceberg.orphan_files import DEFAULT_OLDER_THAN_MS, remove_orphans

log = logging.getLogger("strom.iceberg")

COMMIT_ATTEMPTS = 8
# one rewrite reads at most this many bytes of Parquet into memory (a bin of small files; a
# partition with more gets several bins, each its own new file)
MAX_REWRITE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class MaintenanceJob:
    topic: str
    catalog: tables.CatalogSettings
    compaction: bool = True
    min_input_files: int = 5
    max_snapshot_age_ms: int = 5 * 24 * 3600 * 1000
    min_snapshots_to_keep: int = 1
    delete_expired_files: bool = True
    # Iceberg's table properties, set on the table (pyiceberg's commits delete old metadata.json by them)
    metadata_delete_after_commit: bool = False
    metadata_previous_versions_max: int = 100
    # the topic's iceberg.orphan.files.older.than.ms: orphans older than this are deleted (-1: never)
    orphan_older_than_ms: int = DEFAULT_OLDER_THAN_MS


@dataclass
class MaintenanceResult:
    compactions: int = 0  # compaction commits
    files_rewritten: int = 0  # small files replaced
    files_written: int = 0  # the files that replaced them
    bytes_rewritten: int = 0
    bytes_written: int = 0
    snapshots_expired: int = 0
    data_files_deleted: int = 0  # files only expired snapshots referenced, deleted from the warehouse
    data_bytes_deleted: int = 0
    manifests_deleted: int = 0
    manifest_lists_deleted: int = 0
    commits_lost: int = 0  # maintenance commits planned again because another writer committed first
    cleanup_failures: int = 0  # expiries whose files could not be deleted (they stay, referenced by nothing)
    orphan_files_deleted: int = 0  # files no metadata referenced, older than the margin (strom.iceberg.orphan_files)
    orphan_bytes_deleted: int = 0

    @property
    def files_deleted(self) -> int:
        return self.data_files_deleted + self.manifests_deleted + self.manifest_lists_deleted


def maintain_topic(job: MaintenanceJob) -> MaintenanceResult:
    """Compact and expire the topic's table and its dead-letter table (in the worker process)."""
    catalog = tables.open_catalog(job.catalog)
    result = MaintenanceResult()
    for name in (tables.identifier(job.topic), tables.dlq_identifier(job.topic)):
        table = tables.load_existing(catalog, name)
        if table is None:
            continue
        keep_metadata_properties(table, job.metadata_delete_after_commit, job.metadata_previous_versions_max)
        if job.compaction:
            compact(
                lambda name=name: catalog.load_table(name),
                job.catalog.target_file_size_bytes,
                job.min_input_files,
                result,
            )
        expire(
            lambda name=name: catalog.load_table(name),
            job.max_snapshot_age_ms,
            job.min_snapshots_to_keep,
            result,
            job.delete_expired_files,
        )
        if job.orphan_older_than_ms >= 0:
            removed = remove_orphans(catalog, catalog.load_table(name), job.orphan_older_than_ms)
            result.orphan_files_deleted += removed.orphan_files
            result.orphan_bytes_deleted += removed.orphan_bytes
    return result


METADATA_DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
METADATA_PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"


def keep_metadata_properties(table: Any, delete_after_commit: bool, previous_versions_max: int) -> None:
    """The topic's ``write.metadata.*`` as the table's properties (Iceberg's defaults, false and
    100, need none); a property-only commit, which changes no snapshot."""
    wanted = {METADATA_DELETE_AFTER_COMMIT: str(delete_after_commit).lower()}
    wanted[METADATA_PREVIOUS_VERSIONS_MAX] = str(previous_versions_max)
    defaults = {METADATA_DELETE_AFTER_COMMIT: "false", METADATA_PREVIOUS_VERSIONS_MAX: "100"}
    if all(table.properties.get(key, defaults[key]).lower() == value for key, value in wanted.items()):
        return
    with table.transaction() as transaction:
        transaction.set_properties(wanted)


def _small_file_groups(
    table: Any, target_file_size_bytes: int, min_input_files: int, max_bytes: int = MAX_REWRITE_BYTES
) -> list[list[Any]]:
    """The scan tasks of the small files, grouped by (spec, partition) and packed, smallest first,
    into bins of at most ``max_bytes`` (or the target size, if smaller); the bins of at least
    ``min_input_files`` files, each rewritten into new files of its own."""
    groups: dict[tuple[int, Any], list[Any]] = {}
    for task in table.scan().plan_files():
        data = task.file
        if task.delete_files or data.file_size_in_bytes >= target_file_size_bytes:
            continue
        groups.setdefault((data.spec_id, data.partition), []).append(task)
    limit = min(max_bytes, target_file_size_bytes)
    bins: list[list[Any]] = []
    for group in groups.values():
        current: list[Any] = []
        size = 0
        for task in sorted(group, key=lambda t: t.file.file_size_in_bytes):
            if current and size + task.file.file_size_in_bytes > limit:
                bins.append(current)
                current, size = [], 0
            current.append(task)
            size += task.file.file_size_in_bytes
        bins.append(current)
    return [found for found in bins if len(found) >= min_input_files]


def _sorted_rows(rows: Any) -> Any:
    """Rows by (partition, offset): files whose offsets are ranges prune well (read_topic's offset filters)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kafka = rows.column("kafka").combine_chunks()
    keys = pa.table({"p": kafka.field("partition"), "o": kafka.field("offset")})
    return rows.take(pc.sort_indices(keys, sort_keys=[("p", "ascending"), ("o", "ascending")]))


def compact(
    load: Any,
    target_file_size_bytes: int,
    min_input_files: int,
    result: MaintenanceResult,
    max_bytes: int = MAX_REWRITE_BYTES,
) -> None:
    """Rewrite the small files of a table (``load`` reads it afresh); see the module docstring."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    for _attempt in range(COMMIT_ATTEMPTS):
        table = load()
        snapshot = table.current_snapshot()
        if snapshot is None:
            return
        groups = _small_file_groups(table, target_file_size_bytes, min_input_files, max_bytes)
        if not groups:
            return
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        offsets = {k: v for k, v in summary.items() if k.startswith(tables.OFFSET_PREFIX)}
        transaction = table.transaction()
        replaced = written = bytes_in = bytes_out = 0
        scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
        counter = itertools.count()  # one numbering for every bin: the files' names include it
        paths: set[str] = set()
        with transaction.update_snapshot(snapshot_properties=offsets).overwrite() as rewrite:
            for group in groups:
                rows = scan.to_table(group)
                expected = sum(task.file.record_count for task in group)
                if rows.num_rows != expected:  # never commit a rewrite that would lose or add rows
                    raise RuntimeError(f"compaction read {rows.num_rows} rows of files that hold {expected}")
                files = list(
                    _dataframe_to_data_files(
                        table_metadata=transaction.table_metadata,
                        write_uuid=rewrite.commit_uuid,
                        df=_sorted_rows(rows),
                        io=table.io,
                        counter=counter,
                    )
                )
                names = {f.file_path for f in files}
                if len(names) != len(files) or names & paths:  # a file written over another loses its rows
                    raise RuntimeError("compaction wrote two files to one path")
                paths |= names
                if sum(f.record_count for f in files) != expected:
                    raise RuntimeError("compaction wrote a different number of rows than it read")
                for task in group:
                    rewrite.delete_data_file(task.file)
                for data_file in files:
                    rewrite.append_data_file(data_file)
                replaced += len(group)
                written += len(files)
                bytes_in += sum(task.file.file_size_in_bytes for task in group)
                bytes_out += sum(f.file_size_in_bytes for f in files)
        try:
            transaction.commit_transaction()
        except CommitFailedException as exc:
            result.commits_lost += 1
            log.info("%s: a compaction lost a race (%s); planning again", table.name(), exc)
            continue
        result.compactions += 1
        result.files_rewritten += replaced
        result.files_written += written
        result.bytes_rewritten += bytes_in
        result.bytes_written += bytes_out
        return


def expire(
    load: Any,
    max_snapshot_age_ms: int,
    min_snapshots_to_keep: int,
    result: MaintenanceResult,
    delete_files: bool = True,
) -> None:
    """Expire the snapshots older than the age, keeping the newest ``min_snapshots_to_keep``
    ancestors, then (``delete_files``) delete the files only they referenced."""
    from pyiceberg.exceptions import CommitFailedException

    for _attempt in range(COMMIT_ATTEMPTS):
        table = load()
        current = table.current_snapshot()
        if current is None:
            return
        kept: set[int] = set()
        snapshot = current
        while snapshot is not None and len(kept) < min_snapshots_to_keep:
            kept.add(snapshot.snapshot_id)
            parent = snapshot.parent_snapshot_id
            snapshot = table.snapshot_by_id(parent) if parent is not None else None
        protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
        cutoff = int(time.time() * 1000) - max_snapshot_age_ms
        old = [
            s.snapshot_id
            for s in table.metadata.snapshots
            if s.timestamp_ms < cutoff and s.snapshot_id not in kept and s.snapshot_id not in protected
        ]
        if not old:
            return
        expired = [s for s in table.metadata.snapshots if s.snapshot_id in set(old)]
        try:
            table.maintenance.expire_snapshots().by_ids(old).commit()
        except CommitFailedException:
            result.commits_lost += 1
            continue
        except ValueError as exc:  # applied onto a newer metadata: another broker expired some of them
            if "does not exist" not in str(exc):
                raise
            result.commits_lost += 1
            continue
        result.snapshots_expired += len(old)
        if delete_files:
            try:
                deleted = delete_unreachable(load(), expired)  # reachability as committed, read afresh
            except Exception as exc:  # noqa: BLE001  (the expiry stands; its files stay, unreferenced)
                result.cleanup_failures += 1
                log.warning("iceberg: the files of %d expired snapshots were not deleted: %r", len(expired), exc)
                return
            result.data_files_deleted += deleted.data_files
            result.data_bytes_deleted += deleted.data_bytes
            result.manifests_deleted += deleted.manifests
            result.manifest_lists_deleted += deleted.manifest_lists
        return
