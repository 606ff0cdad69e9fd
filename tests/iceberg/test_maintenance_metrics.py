"""The table maintenance's counters on a real broker's /metrics: zero per topic once translation has
run, then, after the broker compacted and expired the table, the small files rewritten (in and out,
files and bytes), the snapshots expired and the files deleted, which match the warehouse as a user
would list it."""

from __future__ import annotations

import os
import time

from strom.iceberg.table import identifier, open_catalog
from tests.iceberg.support import assert_exactly, create_topic, produce, table_rows, wait_for_rows
from tests.iceberg.test_maintenance import HOUR_MS, set_topic_config
from tests.iceberg.test_translator import ICEBERG
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

COUNTERS = [
    "strom_iceberg_compactions_total",
    "strom_iceberg_compaction_input_files_total",
    "strom_iceberg_compaction_output_files_total",
    "strom_iceberg_compaction_input_bytes_total",
    "strom_iceberg_compaction_output_bytes_total",
    "strom_iceberg_snapshots_expired_total",
    "strom_iceberg_deleted_data_bytes_total",
    "strom_iceberg_maintenance_failures_total",
    "strom_iceberg_translation_failures_total",
]


def test_maintenance_counters_move_on_the_brokers_metrics(iceberg_broker):
    broker, catalog = iceberg_broker({**ICEBERG, **METRICS_ON})
    configs = {
        "iceberg.maintenance.interval.ms": HOUR_MS,  # none until the small files are there
        "iceberg.compaction.min-input-files": "2",
        "history.expire.max-snapshot-age-ms": "0",
        "history.expire.min-snapshots-to-keep": "1",
    }
    create_topic(broker.bootstrap, "measured", 2, **configs)
    settings = catalog
    committed: dict = {}
    for round_ in range(5):
        committed |= produce(broker.bootstrap, "measured", 25, f"r{round_}")
        wait_for_rows(settings, "measured", len(committed))
    url = metrics_url(broker.data_dir)
    found = scrape(url)
    for name in COUNTERS:
        assert found.value(name, topic="measured") == 0, name
    assert found.value("strom_iceberg_files_deleted_total", topic="measured", kind="data") == 0
    assert found.types["strom_iceberg_commit_conflicts"] == "counter"
    table = open_catalog(settings).load_table(identifier("measured"))
    small = len(list(table.scan().plan_files()))
    assert small >= 5

    set_topic_config(broker.bootstrap, "measured", "iceberg.maintenance.interval.ms", "500")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = scrape(url)
        if found.value("strom_iceberg_files_deleted_total", topic="measured", kind="data") > 0:
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"no files deleted after 60 s: {found.text[-3000:]}")

    table = open_catalog(settings).load_table(identifier("measured"))
    live = [task.file for task in table.scan().plan_files()]
    on_disk = [
        os.path.join(root, name)
        for root, _dirs, names in os.walk(table.location().removeprefix("file://") + "/data")
        for name in names
        if name.endswith(".parquet")
    ]
    rewritten = found.value("strom_iceberg_compaction_input_files_total", topic="measured")
    assert found.value("strom_iceberg_compactions_total", topic="measured") >= 1
    assert rewritten >= small - 1  # a partition of the table with one small file is not compacted
    assert found.value("strom_iceberg_compaction_output_files_total", topic="measured") >= 1
    assert found.value("strom_iceberg_compaction_input_bytes_total", topic="measured") > 0
    written = found.value("strom_iceberg_compaction_output_bytes_total", topic="measured")
    assert 0 < written <= sum(f.file_size_in_bytes for f in live)  # the live files are the compaction's
    assert found.value("strom_iceberg_snapshots_expired_total", topic="measured") >= small
    # every small file compaction replaced is gone from the warehouse, and only those
    assert found.value("strom_iceberg_files_deleted_total", topic="measured", kind="data") == rewritten
    assert len(on_disk) == len(live)
    assert found.value("strom_iceberg_files_deleted_total", topic="measured", kind="manifest_list") >= small
    assert found.value("strom_iceberg_deleted_data_bytes_total", topic="measured") == found.value(
        "strom_iceberg_compaction_input_bytes_total", topic="measured"
    )
    assert found.value("strom_iceberg_maintenance_failures_total", topic="measured") == 0
    assert found.value("strom_iceberg_commit_conflicts_total", topic="measured", writer="maintenance") == 0
    assert_exactly(table_rows(settings, "measured"), committed, {})
    assert "files only they referenced deleted" in broker.read_log()
