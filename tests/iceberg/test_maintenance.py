"""Table maintenance on a real broker: many small translation commits are compacted into fewer
files holding exactly the same rows, the snapshot keeps the offsets translation resumes from (also
after kill -9), expiry keeps history.expire.min-snapshots-to-keep snapshots, and a compaction racing
the broker's translation (run from this process against the broker's catalog) loses nothing."""

from __future__ import annotations

import threading
import time

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from strom.iceberg.maintenance import MaintenanceResult, compact
from strom.iceberg.table import committed_offsets, identifier, open_catalog
from tests.iceberg.support import assert_exactly, create_topic, produce, table_rows, wait_for_rows
from tests.iceberg.test_translator import ICEBERG, catalog_of

HOUR_MS = "3600000"


def set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the result: a collected client cancels it
    admin.incremental_alter_configs([resource])[resource].result(30)


def load(data, topic: str):
    return open_catalog(catalog_of(data)).load_table(identifier(topic))


def data_files(table) -> int:
    return len(list(table.scan().plan_files()))


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"no {what} after {timeout_s}s"
        time.sleep(0.2)


def test_small_files_compacted_same_rows_offsets_kept_and_snapshots_expired(iceberg_broker):
    configs = {
        "iceberg.maintenance.interval.ms": HOUR_MS,  # none until the test has its small files
        "iceberg.compaction.min-input-files": "3",
        "history.expire.max-snapshot-age-ms": "0",
        "history.expire.min-snapshots-to-keep": "2",
    }
    broker, settings = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "small", 2, **configs)
    committed: dict = {}
    for round_ in range(8):  # a translation commit each: at least a small file per partition
        committed |= produce(broker.bootstrap, "small", 25, f"r{round_}")
        wait_for_rows(settings, "small", len(committed))
    before = load(broker.data_dir, "small")
    files_before, offsets_before = data_files(before), committed_offsets(before)
    assert files_before >= 8 and len(before.metadata.snapshots) >= 8

    set_topic_config(broker.bootstrap, "small", "iceberg.maintenance.interval.ms", "500")
    after = wait_for(
        lambda: (
            (t := load(broker.data_dir, "small"))
            and data_files(t) < files_before
            and len(t.metadata.snapshots) == 2
            and t
        ),
        30,
        "compaction and expiry",
    )
    assert data_files(after) <= 2  # one hour, two partitions' rows: one file unless the hour turned
    assert committed_offsets(after) == offsets_before
    assert after.current_snapshot().summary.operation.value == "overwrite"
    assert_exactly(table_rows(settings, "small"), committed, {})

    # translation resumes from the compaction's offsets, also in a broker killed with kill -9
    committed |= produce(broker.bootstrap, "small", 40, "after")
    wait_for_rows(settings, "small", len(committed))
    broker.kill()
    broker.start()
    committed |= produce(broker.bootstrap, "small", 40, "restarted")
    wait_for_rows(settings, "small", len(committed))
    time.sleep(1.5)  # more rounds and maintenance: nothing more may arrive
    assert_exactly(table_rows(settings, "small"), committed, {})
    assert len(load(broker.data_dir, "small").metadata.snapshots) <= 2
    log = broker.read_log()
    assert "small's table:" in log and "small files compacted into" in log
    assert not [line for line in log.splitlines() if "iceberg:" in line and "failed" in line]


def test_compaction_racing_translation_loses_and_duplicates_nothing(iceberg_broker):
    """Two compactors in this process race each other and the broker's translation rounds (every 50 ms)."""
    broker, settings = iceberg_broker({**ICEBERG, "iceberg.target.lag.ms": "50"})
    create_topic(broker.bootstrap, "raced", 3, **{"iceberg.maintenance.interval.ms": HOUR_MS})
    committed: dict = {}
    done = threading.Event()

    def producing():
        try:
            for round_ in range(40):
                committed.update(produce(broker.bootstrap, "raced", 20, f"r{round_}"))
                time.sleep(0.05)
        finally:
            done.set()

    results = [MaintenanceResult(), MaintenanceResult()]
    calls = [0, 0]
    errors: list[BaseException] = []

    def compacting(i: int):
        catalog = open_catalog(settings)
        try:
            while not done.is_set():
                compact(lambda: catalog.load_table(identifier("raced")), 64 * 1024 * 1024, 2, results[i])
                calls[i] += 1
        except BaseException as exc:  # the assertion below shows it
            errors.append(exc)

    producer = threading.Thread(target=producing, daemon=True)
    producer.start()
    wait_for_rows(settings, "raced", 1)
    compactors = [threading.Thread(target=compacting, args=(i,), daemon=True) for i in range(2)]
    for thread in compactors:
        thread.start()
    for thread in (producer, *compactors):
        thread.join(90)
        assert not thread.is_alive()
    assert not errors, errors
    assert len(committed) == 800
    wait_for_rows(settings, "raced", len(committed), timeout_s=60)
    time.sleep(1.0)
    assert_exactly(table_rows(settings, "raced"), committed, {})
    assert sum(r.files_rewritten for r in results) > 0, results
    translation_lost = sum(
        int(line.split("iceberg: ")[1].split()[0])
        for line in broker.read_log().splitlines()
        if "lost a race to another writer" in line
    )
    print(f"compaction calls {calls}: {results}; translation commits that lost a race: {translation_lost}")
    # the broker's translation lost races to the compactions and planned again, never gave up
    assert "commits in a row lost their race" not in broker.read_log()


def test_a_partitions_small_files_are_packed_into_bins_of_at_most_max_bytes(iceberg_broker):
    """One table partition of 8 small files, bins of about three files' bytes: several new files,
    each from a bin of at least min-input-files, the same rows."""
    broker, settings = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "binned", 1, **{"iceberg.maintenance.interval.ms": HOUR_MS})
    committed: dict = {}
    for round_ in range(8):
        committed |= produce(broker.bootstrap, "binned", 25, f"r{round_}")
        wait_for_rows(settings, "binned", len(committed))
    sizes = sorted(task.file.file_size_in_bytes for task in load(broker.data_dir, "binned").scan().plan_files())
    assert len(sizes) >= 8  # a round's records in two translation rounds make one more
    result = MaintenanceResult()
    catalog = open_catalog(settings)
    compact(lambda: catalog.load_table(identifier("binned")), 64 * 1024 * 1024, 2, result, sum(sizes[:3]))
    assert result.files_rewritten >= 6 and 2 <= result.files_written <= len(sizes) // 2, result
    assert data_files(load(broker.data_dir, "binned")) == len(sizes) - result.files_rewritten + result.files_written
    assert_exactly(table_rows(settings, "binned"), committed, {})


def test_files_of_an_old_partition_spec_are_compacted_into_the_current_one(iceberg_broker):
    """Small files of hour(kafka.timestamp) and of () after an alter: both groups are rewritten
    into the current (unpartitioned) spec in one commit, to distinct files, the same rows."""
    broker, settings = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "respec", 1, **{"iceberg.maintenance.interval.ms": HOUR_MS})
    committed: dict = {}
    for round_ in range(8):
        if round_ == 4:
            set_topic_config(broker.bootstrap, "respec", "iceberg.partition.spec", "()")
        committed |= produce(broker.bootstrap, "respec", 25, f"r{round_}")
        wait_for_rows(settings, "respec", len(committed))
    table = load(broker.data_dir, "respec")
    tasks = list(table.scan().plan_files())
    assert {task.file.spec_id for task in tasks} == {0, table.spec().spec_id} and table.spec().fields == ()
    result = MaintenanceResult()
    catalog = open_catalog(settings)
    compact(lambda: catalog.load_table(identifier("respec")), 64 * 1024 * 1024, 2, result)
    assert result.files_rewritten == len(tasks) and result.files_written == 2, result
    table = load(broker.data_dir, "respec")
    assert {task.file.spec_id for task in table.scan().plan_files()} == {table.spec().spec_id}
    assert_exactly(table_rows(settings, "respec"), committed, {})
