"""Expiry deletes the files only expired snapshots referenced, on a real broker's table: the small
files a compaction replaced, and the expired snapshots' manifests and manifest lists, are gone from
the warehouse; every file a remaining snapshot reaches is still there and every remaining snapshot
reads back; translation commits that land while the expiry runs (before its commit and between its
commit and its cleanup) keep their files; a file no snapshot references yet is left alone; and
write.metadata.delete-after-commit.enabled keeps write.metadata.previous-versions-max metadata files."""

from __future__ import annotations

import os

from strom.iceberg.expired_files import referenced
from strom.iceberg.maintenance import MaintenanceJob, MaintenanceResult, compact, expire, maintain_topic
from strom.iceberg.table import identifier, open_catalog
from tests.iceberg.support import assert_exactly, create_topic, produce, table_rows, wait_for_rows
from tests.iceberg.test_maintenance import HOUR_MS
from tests.iceberg.test_translator import ICEBERG


def local(path: str) -> str:
    return path.removeprefix("file://")


def metadata_files(table) -> set[str]:
    directory = local(table.location()) + "/metadata"
    return {os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".metadata.json")}


def test_expired_snapshots_files_are_deleted_and_racing_commits_keep_theirs(iceberg_broker):
    broker, settings = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "history", 2, **{"iceberg.maintenance.interval.ms": HOUR_MS})
    catalog = open_catalog(settings)
    committed: dict = {}
    for round_ in range(6):  # a translation commit each: small files
        committed |= produce(broker.bootstrap, "history", 25, f"r{round_}")
        wait_for_rows(settings, "history", len(committed))
    before = catalog.load_table(identifier("history"))
    small = {local(t.file.file_path) for t in before.scan().plan_files()}
    compaction = MaintenanceResult()
    compact(lambda: catalog.load_table(identifier("history")), 64 * 1024 * 1024, 2, compaction)
    # a file alone in its hour (the hour turned during the test) is not compacted
    assert compaction.compactions == 1 and compaction.files_rewritten >= len(small) - 1 >= 5, compaction
    compacted = catalog.load_table(identifier("history"))
    live = {local(t.file.file_path) for t in compacted.scan().plan_files()}
    replaced = small - live
    assert len(replaced) == compaction.files_rewritten
    old_lists = {local(s.manifest_list) for s in compacted.metadata.snapshots[:-1]}

    # a data file a writer has written and not committed yet: no snapshot references it
    stray = local(compacted.location()) + "/data/uncommitted-by-a-racing-writer.parquet"
    os.makedirs(os.path.dirname(stray), exist_ok=True)
    with open(stray, "wb") as out:
        out.write(b"PAR1")

    calls = []

    def load_racing():
        """The expiry's first load is overtaken by a translation commit before the expiry
        commits; its second (what stays, after the commit) comes after another one."""
        calls.append(1)
        if len(calls) == 1:
            table = catalog.load_table(identifier("history"))
        nonlocal committed
        committed |= produce(broker.bootstrap, "history", 30, f"race{len(calls)}")
        wait_for_rows(settings, "history", len(committed))
        return table if len(calls) == 1 else catalog.load_table(identifier("history"))

    result = MaintenanceResult()
    expire(load_racing, 0, 1, result)
    assert len(calls) == 2
    assert result.snapshots_expired == len(compacted.metadata.snapshots) - 1, result

    after = catalog.load_table(identifier("history"))
    assert len(after.metadata.snapshots) == 3  # the compaction's, and the two racing translations'
    gone = [path for path in replaced | old_lists if os.path.exists(path)]
    assert not gone, f"files only expired snapshots referenced are still there: {gone}"
    assert result.data_files_deleted == len(replaced) and result.manifest_lists_deleted == len(old_lists)
    assert result.manifests_deleted > 0
    # what a reader of a remaining snapshot reads (the compaction's manifest lists the files it
    # replaced as deleted entries: those are gone, as Iceberg's own expiry deletes them)
    reached = referenced(after.io, after.metadata.snapshots, live_only=True, missing_ok=False)
    missing = [
        p for p in {*reached.data_files, *reached.manifests, *reached.manifest_lists} if not os.path.exists(local(p))
    ]
    assert not missing, f"files of remaining snapshots were deleted: {missing}"
    assert os.path.exists(stray)
    for snapshot in after.metadata.snapshots:  # each remaining snapshot reads back
        after.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    assert_exactly(table_rows(settings, "history"), committed, {})

    # old metadata files: Iceberg's properties, set by the maintenance, applied by every commit
    assert len(metadata_files(after)) > 3
    job = MaintenanceJob("history", settings, compaction=False, metadata_delete_after_commit=True)
    maintain_topic(MaintenanceJob(**{**job.__dict__, "metadata_previous_versions_max": 2}))
    for round_ in range(2):
        committed |= produce(broker.bootstrap, "history", 20, f"after{round_}")
        wait_for_rows(settings, "history", len(committed))
    table = catalog.load_table(identifier("history"))
    assert table.properties["write.metadata.delete-after-commit.enabled"] == "true"
    logged = {local(entry.metadata_file) for entry in table.metadata.metadata_log}
    assert len(logged) == 2 and metadata_files(table) == logged | {local(table.metadata_location)}
    assert_exactly(table_rows(settings, "history"), committed, {})


def test_a_remaining_snapshot_that_cannot_be_read_stops_the_cleanup(tmp_path):
    """The current snapshot's manifest list is gone: the expiry stands, nothing is deleted (what
    stays cannot be known), and the failure is counted."""
    import pyarrow as pa

    from strom.iceberg.table import CatalogSettings

    catalog = open_catalog(CatalogSettings(f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/warehouse"))
    catalog.create_namespace("strom")
    table = catalog.create_table(("strom", "t"), schema=pa.schema([pa.field("n", pa.int64())]))
    for n in range(3):
        table.append(pa.table({"n": [n]}))
    table.overwrite(pa.table({"n": [9]}))  # the first three files are referenced by older snapshots only
    files = {os.path.join(root, name) for root, _dirs, names in os.walk(tmp_path / "warehouse") for name in names}
    os.remove(local(table.current_snapshot().manifest_list))
    result = MaintenanceResult()
    expire(lambda: catalog.load_table(("strom", "t")), 0, 1, result)
    assert result.snapshots_expired >= 3 and result.cleanup_failures == 1, result
    assert result.files_deleted == 0
    left = {os.path.join(root, name) for root, _dirs, names in os.walk(tmp_path / "warehouse") for name in names}
    assert files - left == {local(table.current_snapshot().manifest_list)}
