"""Iceberg table maintenance on a 3-broker cluster sharing one SQL catalog: the leader of partition 0
alone compacts and expires the table, while the leaders of the other partitions keep committing to
it; the table holds every committed record once, with the partition spec the topic asked for."""

from __future__ import annotations

import re
import time

from strom.iceberg.table import committed_offsets, identifier, open_catalog
from tests.cluster.conftest import create_topic, wait_until
from tests.iceberg.support import assert_exactly, produce, table_rows, wait_for_rows
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape


def test_the_leader_of_partition_0_alone_maintains_the_table_while_all_translate(iceberg_cluster):
    cluster, catalog = iceberg_cluster(target_lag_ms=300, overrides=METRICS_ON)
    configs = {
        "iceberg.mode": "key_value",
        "iceberg.partition.spec": "(kafka.partition)",
        "iceberg.maintenance.interval.ms": "1000",
        "iceberg.compaction.min-input-files": "3",
        "history.expire.max-snapshot-age-ms": "0",
        "history.expire.min-snapshots-to-keep": "3",
    }
    create_topic(cluster, "metered", partitions=3, configs=configs)
    cluster.wait_full_isr("metered")
    leaders = {p: cluster.leader("metered", p) for p in range(3)}
    committed: dict = {}
    for round_ in range(12):
        committed |= produce(cluster.bootstrap, "metered", 30, f"r{round_}", acks="all")
        time.sleep(0.4)
    wait_for_rows(catalog, "metered", len(committed), timeout_s=90)

    def compacted_and_expired():
        table = open_catalog(catalog).load_table(identifier("metered"))
        files = list(table.scan().plan_files())
        return len(table.metadata.snapshots) <= 3 and len(files) <= 6 and table

    table = wait_until(compacted_and_expired, 60, "a compacted, expired table")
    time.sleep(1.0)
    assert_exactly(table_rows(catalog, "metered"), committed, {})
    assert [f.name for f in table.spec().fields] == ["kafka_partition"]
    for task in table.scan().plan_files():  # compacted files stay in their partition
        assert task.file.partition[0] in (0, 1, 2)
    offsets = committed_offsets(table)
    assert set(offsets) == {0, 1, 2}
    # maintenance ran on the leader of partition 0 only
    maintained = [b for b in cluster.brokers if "metered's table:" in cluster.brokers[b].read_log()]
    assert maintained == [leaders[0]], (maintained, leaders)
    # expiry deleted the files only expired snapshots referenced, none a remaining snapshot reads
    deleted_logged = re.findall(
        r"metered's table: .* (\d+) files only they referenced deleted", cluster.brokers[leaders[0]].read_log()
    )
    assert sum(int(n) for n in deleted_logged) > 0, deleted_logged
    table = open_catalog(catalog).load_table(identifier("metered"))
    for snapshot in table.metadata.snapshots:
        table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    assert_exactly(table_rows(catalog, "metered"), committed, {})
    # the maintenance counters are on the broker that maintained the table, and only there
    scraped = {b: scrape(metrics_url(cluster.brokers[b].data_dir)) for b in cluster.brokers}
    for broker_id, found in scraped.items():
        compactions = found.value("strom_iceberg_compactions_total", topic="metered")
        expired = found.value("strom_iceberg_snapshots_expired_total", topic="metered")
        deleted = found.total("strom_iceberg_files_deleted_total", topic="metered")
        if broker_id == leaders[0]:
            assert compactions > 0 and expired > 0 and deleted >= sum(int(n) for n in deleted_logged), found.text
        else:
            assert compactions == expired == deleted == 0, (broker_id, found.text)
        assert found.value("strom_iceberg_maintenance_failures_total", topic="metered") == 0
