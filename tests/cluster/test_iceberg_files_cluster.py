"""An Iceberg topic's files on a 3-broker cluster (RF=3) sharing one SQL catalog: the leader of
partition 0's maintenance deletes an orphan file older than ``iceberg.orphan.files.older.than.ms``
and leaves a fresh one and every referenced file, while all three leaders keep committing; when
the topic is deleted, the brokers drop its table and one of them purges its files (each purge
counted once over the cluster), leaving nothing under the table's location."""

from __future__ import annotations

import os
import time

from confluent_kafka.admin import AdminClient

from strom.iceberg.table import identifier, open_catalog
from tests.cluster.conftest import create_topic, wait_until
from tests.iceberg.support import assert_exactly, produce, table_rows, wait_for_rows
from tests.iceberg.test_orphan_files import HOUR_S, files_under, plant
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape


def test_orphans_removed_then_the_deleted_topics_files_purged_once(iceberg_cluster):
    cluster, catalog = iceberg_cluster(target_lag_ms=300, overrides=METRICS_ON)
    configs = {
        "iceberg.mode": "key_value",
        "iceberg.maintenance.interval.ms": "1000",
        "iceberg.compaction.enabled": "false",
        "iceberg.orphan.files.older.than.ms": str(HOUR_S * 1000),
    }
    create_topic(cluster, "littered", partitions=3, configs=configs)
    committed: dict = {}
    for round_ in range(3):
        committed |= produce(cluster.bootstrap, "littered", 30, f"r{round_}", acks="all")
        wait_for_rows(catalog, "littered", len(committed), timeout_s=90)
    location = open_catalog(catalog).load_table(identifier("littered")).location()
    old = plant(location, "data/lost-commit.parquet", age_s=2 * HOUR_S)
    fresh = plant(location, "data/not-committed-yet.parquet", age_s=60)
    for round_ in range(3, 6):  # the leaders keep committing while the maintenance runs
        committed |= produce(cluster.bootstrap, "littered", 30, f"r{round_}", acks="all")
        time.sleep(0.5)
    wait_until(lambda: not os.path.exists(old), 60, "the old orphan deleted")
    wait_for_rows(catalog, "littered", len(committed), timeout_s=90)
    assert os.path.exists(fresh)
    assert_exactly(table_rows(catalog, "littered"), committed, {})
    maintainer = cluster.leader("littered", 0)
    orphans = {
        b: scrape(metrics_url(cluster.brokers[b].data_dir)).value(
            "strom_iceberg_files_deleted_total", topic="littered", kind="orphan"
        )
        for b in cluster.brokers
    }
    assert orphans == {b: (1 if b == maintainer else 0) for b in cluster.brokers}, (orphans, maintainer)

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.delete_topics(["littered"], operation_timeout=30).values():
        future.result(30)
    wait_until(lambda: not open_catalog(catalog).table_exists(identifier("littered")), 60, "the table dropped")
    wait_until(lambda: files_under(location) == [], 60, "every file of the dropped table purged")

    def purges() -> float:
        return sum(
            scrape(metrics_url(broker.data_dir)).value("strom_iceberg_tables_purged_total", topic="littered")
            for broker in cluster.brokers.values()
        )

    wait_until(lambda: purges() == 1, 30, "the purge counted")
    time.sleep(1.0)  # the other brokers' rounds found the table gone: still one purge
    assert purges() == 1
