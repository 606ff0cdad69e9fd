"""Iceberg topics on 3 brokers that commit through Iceberg REST catalogs: each broker serves one
(iceberg.rest.catalog.listeners) over the cluster's shared SQL catalog and commits through its own
(iceberg.catalog.type=rest), so the leaders of one topic's partitions race on one table through
three servers, each commit guarded by the SQL row's compare-and-set; the loser's 409 is planned
again. A leader killed with kill -9 is succeeded from the table's offsets: every committed record
once, scanned with pyiceberg through a REST catalog."""

from __future__ import annotations

import time

from strom.cluster.zookeeper_server import free_port
from strom.iceberg.table import CatalogSettings
from tests.cluster.conftest import Cluster, create_topic, wait_until
from tests.iceberg.support import assert_exactly, produce, table_rows, transaction, wait_for_rows


def test_three_brokers_commit_one_topic_through_their_rest_catalogs(tmp_path, zookeeper):
    shared = {
        "iceberg.enabled": "true",
        "iceberg.target.lag.ms": "300",
        "iceberg.catalog.uri": "sqlite:///" + str(tmp_path / "catalog.db"),
        "iceberg.warehouse": str(tmp_path / "warehouse"),
        "iceberg.catalog.type": "rest",
    }
    cluster = Cluster(tmp_path / "cluster", zookeeper, 3, shared)
    urls = {}
    for broker_id, process in cluster.brokers.items():
        urls[broker_id] = f"http://127.0.0.1:{free_port()}"
        process.overrides["iceberg.rest.catalog.listeners"] = urls[broker_id]
        process.overrides["iceberg.rest.catalog.uri"] = urls[broker_id]
    with cluster:
        create_topic(cluster, "clicks", partitions=3, configs={"iceberg.mode": "key_value"})
        assert len({cluster.leader("clicks", p) for p in range(3)}) == 3  # three writers of one table
        committed = produce(cluster.bootstrap, "clicks", 900, "a", acks="all")
        committed |= transaction(cluster.bootstrap, "clicks", 30, "t1", commit=True)
        aborted = transaction(cluster.bootstrap, "clicks", 30, "t2", commit=False)
        victim = cluster.leader("clicks", 0)
        survivor = next(b for b in cluster.brokers if b != victim)
        catalog = CatalogSettings.for_rest(urls[survivor])
        wait_until(lambda: any(r["partition"] == 0 for r in table_rows(catalog, "clicks")), 60, "rows of clicks-0")
        cluster.kill(victim)
        wait_until(lambda: cluster.leader("clicks", 0) not in (-1, victim), 30, "a new leader of clicks-0")
        committed |= produce(cluster.bootstrap, "clicks", 600, "b", acks="all")
        cluster.restart(victim)
        committed |= produce(cluster.bootstrap, "clicks", 300, "c", acks="all")
        wait_for_rows(catalog, "clicks", len(committed), timeout_s=120)
        time.sleep(1.5)  # more rounds on every leader: nothing more may arrive
        assert_exactly(table_rows(catalog, "clicks"), committed, aborted)
        # every broker's catalog serves the same table
        counts = {b: len(table_rows(CatalogSettings.for_rest(url), "clicks")) for b, url in urls.items()}
        assert set(counts.values()) == {len(committed)}, counts
        logs = cluster.logs()
    assert "translating clicks failed" not in logs
