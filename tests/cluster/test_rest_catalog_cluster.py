"""Iceberg topics on 3 brokers that commit through Iceberg REST catalogs (iceberg.catalog.type=rest),
scanned with pyiceberg through a REST catalog: every committed record once.

PLAINTEXT: each broker serves a catalog (iceberg.rest.catalog.listeners) over the cluster's shared
SQL catalog and commits through its own, so the leaders of one topic's partitions race on one
table through three servers, each commit guarded by the SQL row's compare-and-set (the loser's 409
is planned again); a leader killed with kill -9 is succeeded from the table's offsets.
SASL_SSL: one broker serves an https catalog requiring a SCRAM user's login, all three commit
through it; it is killed with kill -9 and restarted."""

from __future__ import annotations

import time

from strom.cluster.zookeeper_server import free_port
from strom.iceberg.table import CatalogSettings
from tests.cluster.conftest import (
    Cluster,
    add_scram_user,
    create_topic,
    internal_sasl_ssl,
    split_listeners,
    wait_until,
)
from tests.iceberg.support import assert_exactly, produce, table_rows, transaction, wait_for_rows
from tests.tls_certs import make_certificates


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


SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{}";'


def test_sasl_ssl_brokers_commit_through_one_brokers_https_catalog_that_is_killed_and_restarted(tmp_path, zookeeper):
    """Broker 0 serves the https catalog, requiring a SCRAM user's login; all three commit through
    it as alice (OAuth2 client credentials). Broker 0 is killed with kill -9: the others' rounds
    fail (counted) until it is back, and the table still ends with every committed record once."""
    certs = make_certificates(tmp_path / "certs")
    catalog_url = f"https://127.0.0.1:{free_port()}"
    cluster = Cluster(
        tmp_path / "cluster",
        zookeeper,
        3,
        {
            **internal_sasl_ssl(certs),
            "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format("alice-secret"),
            "iceberg.enabled": "true",
            "iceberg.target.lag.ms": "300",
            "iceberg.catalog.uri": "sqlite:///" + str(tmp_path / "catalog.db"),
            "iceberg.warehouse": str(tmp_path / "warehouse"),
            "iceberg.catalog.type": "rest",
            "iceberg.rest.catalog.uri": catalog_url,
            "iceberg.rest.catalog.credential": "alice:alice-secret",
            "iceberg.rest.catalog.ssl.ca.location": str(certs.ca),
        },
    )
    ports = split_listeners(cluster)
    cluster.brokers[0].overrides["iceberg.rest.catalog.listeners"] = catalog_url
    add_scram_user(cluster, "alice", "alice-secret")
    secured = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(certs.ca),
    }
    with cluster:
        bootstrap = ",".join(f"127.0.0.1:{internal}" for _client, internal in ports.values())
        create_topic(cluster, "paid", partitions=3, configs={"iceberg.mode": "key_value"})
        catalog = CatalogSettings.for_rest(catalog_url, credential="alice:alice-secret", ca_location=str(certs.ca))
        committed = produce(bootstrap, "paid", 600, "a", acks="all", **secured)
        aborted = transaction(cluster.bootstrap, "paid", 20, "t", commit=False)
        wait_until(lambda: len(table_rows(catalog, "paid")) > 0, 60, "the first rows")
        cluster.kill(0)  # the catalog's server
        committed |= produce(bootstrap, "paid", 300, "b", acks="all", **secured)
        time.sleep(1.5)  # rounds that cannot reach the catalog
        cluster.restart(0)
        committed |= produce(bootstrap, "paid", 300, "c", acks="all", **secured)
        wait_for_rows(catalog, "paid", len(committed), timeout_s=120)
        time.sleep(1.5)
        assert_exactly(table_rows(catalog, "paid"), committed, aborted)
        logs = cluster.logs()
    assert f"the Iceberg REST catalog {catalog_url} (iceberg.rest.catalog.uri) cannot be used" in logs
    assert "alice-secret" not in logs
