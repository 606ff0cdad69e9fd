"""Iceberg topics in key_value mode on a real broker: every committed record lands in the table
exactly once, with its coordinates, key, value, timestamp and headers; aborted ones never; and
kill -9 at arbitrary moments of translation neither loses nor duplicates a record."""

from __future__ import annotations

import os
import random
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from strom.iceberg.table import CatalogSettings, committed_offsets, identifier, open_catalog
from tests.broker_process import BrokerProcess
from tests.iceberg.support import assert_exactly, create_topic, produce, table_rows, transaction, wait_for_rows

ICEBERG = {"iceberg.enabled": "true", "iceberg.target.lag.ms": "500"}


def catalog_of(data_dir) -> CatalogSettings:
    """The broker's defaults: a SQLite catalog in its log dir, the warehouse beside it."""
    return CatalogSettings.for_broker((str(data_dir),), None, None, 1)


def test_committed_records_land_once_and_aborted_ones_never(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, ICEBERG) as broker:
        create_topic(broker.bootstrap, "orders", 3)
        committed = produce(broker.bootstrap, "orders", 600, "a")
        committed |= transaction(broker.bootstrap, "orders", 40, "t1", commit=True)
        aborted = transaction(broker.bootstrap, "orders", 30, "t2", commit=False)
        committed |= produce(broker.bootstrap, "orders", 100, "b")
        assert len(committed) == 740 and len(aborted) == 30
        rows = wait_for_rows(catalog_of(data), "orders", len(committed))
        time.sleep(1.5)  # three more rounds: nothing more may arrive
        rows = table_rows(catalog_of(data), "orders")
        assert_exactly(rows, committed, aborted)
        assert {r["timestamp_type"] for r in rows} == {0}  # CreateTime
        # the snapshot records where each partition resumes: past every record, aborted and markers too
        table = open_catalog(catalog_of(data)).load_table(identifier("orders"))
        offsets = committed_offsets(table)
        for partition in range(3):
            last = max(o for p, o in committed | aborted if p == partition)
            assert offsets[partition] > last
        assert list(table.spec().fields)[0].name == "kafka_hour"
    assert "translating orders failed" not in broker.read_log()


def test_kill_9_during_translation_neither_loses_nor_duplicates(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data, ICEBERG).start()
    try:
        create_topic(broker.bootstrap, "events", 2)
        committed: dict = {}
        aborted: dict = {}
        rng = random.Random(31)
        for round_ in range(4):
            committed |= produce(broker.bootstrap, "events", 300, f"r{round_}")
            aborted |= transaction(broker.bootstrap, "events", 10, f"x{round_}", commit=False)
            # a kill at a moment no one chose: before, during or after a round's commit
            time.sleep(rng.uniform(0.2, 1.2))
            broker.kill()
            broker.start()
        committed |= produce(broker.bootstrap, "events", 50, "last")
        wait_for_rows(catalog_of(data), "events", len(committed))
        time.sleep(1.5)
        assert_exactly(table_rows(catalog_of(data), "events"), committed, aborted)
    finally:
        broker.stop()


def test_the_configs_are_described_and_an_unknown_mode_refused_by_name(tmp_path):
    with BrokerProcess(tmp_path / "data", ICEBERG) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        create_topic(broker.bootstrap, "described", 1, **{"redpanda.iceberg.mode": "key_value"})
        topic, node = ConfigResource("topic", "described"), ConfigResource("broker", "0")
        shown = {r: {k: e.value for k, e in f.result(30).items()} for r, f in admin.describe_configs([topic]).items()}
        assert shown[topic]["iceberg.mode"] == shown[topic]["redpanda.iceberg.mode"] == "key_value"
        assert shown[topic]["iceberg.delete"] == "true"
        brokers = {k: e.value for k, e in admin.describe_configs([node])[node].result(30).items()}
        assert (brokers["iceberg.enabled"], brokers["iceberg.target.lag.ms"], brokers["iceberg.catalog.type"]) == (
            "true",
            "500",
            "sql",
        )
        refused = admin.create_topics([NewTopic("typed", 1, 1, config={"iceberg.mode": "columns"})])
        with pytest.raises(KafkaException, match="INVALID_CONFIG") as refusal:
            refused["typed"].result(30)
        assert "iceberg.mode: 'columns' is not one of disabled, key_value" in str(refusal.value)


def test_a_clean_shutdown_translates_what_the_lag_had_not_reached_yet(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data, {"iceberg.enabled": "true", "iceberg.target.lag.ms": "600000"}).start()
    try:
        create_topic(broker.bootstrap, "late", 2)
        committed = produce(broker.bootstrap, "late", 200, "a")
        assert table_rows(catalog_of(data), "late") == []  # ten minutes to the first round
    finally:
        assert broker.stop() == 0
    assert_exactly(table_rows(catalog_of(data), "late"), committed, {})


def test_commit_retries_switched_back_on_are_switched_off_again(tmp_path):
    """pyiceberg's own retry would re-apply a lost commit's files onto the winner's snapshot."""
    from strom.iceberg.table import load_or_create

    catalog = open_catalog(CatalogSettings("sqlite:///" + str(tmp_path / "c.db"), "file://" + str(tmp_path / "w")))
    table = load_or_create(catalog, "t", 1024)
    assert table.properties["commit.retry.num-retries"] == "0"
    with table.transaction() as transaction:
        transaction.set_properties({"commit.retry.num-retries": "4"})
    assert catalog.load_table(identifier("t")).properties["commit.retry.num-retries"] == "4"
    assert load_or_create(catalog, "t", 1024).properties["commit.retry.num-retries"] == "0"
    assert catalog.load_table(identifier("t")).properties["commit.retry.num-retries"] == "0"


def test_the_translation_lag_is_a_metric_per_partition(tmp_path):
    from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

    data = tmp_path / "data"
    with BrokerProcess(data, {**ICEBERG, "iceberg.target.lag.ms": "4000", **METRICS_ON}) as broker:
        create_topic(broker.bootstrap, "lagging", 2)
        committed = produce(broker.bootstrap, "lagging", 300, "a")
        # an aborted transaction last: no row to commit, yet the table's offsets must pass its records and markers
        wait_for_rows(catalog_of(data), "lagging", len(committed))
        transaction(broker.bootstrap, "lagging", 10, "t", commit=False)
        name = "strom_iceberg_translation_lag_records"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = scrape(metrics_url(data))
            lag = {(labels["topic"], labels["partition"]): value for labels, value in found.samples.get(name, [])}
            if lag == {("lagging", "0"): 0.0, ("lagging", "1"): 0.0}:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"lag not 0 on both partitions: {found.samples.get(name)}")
        more = produce(broker.bootstrap, "lagging", 100, "b")
        behind = scrape(metrics_url(data)).total(name, topic="lagging")
        # 100 behind until the next round (up to 4 s away); should it have run meanwhile, the table has them
        assert behind == 100 or len(table_rows(catalog_of(data), "lagging")) == len(committed | more), behind


def test_a_deleted_topic_takes_its_table_and_its_files_with_it_unless_iceberg_delete_is_false(tmp_path):
    from pyiceberg.exceptions import NoSuchTableError

    from tests.iceberg.test_orphan_files import files_under, plant
    from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

    data = tmp_path / "data"
    with BrokerProcess(data, {**ICEBERG, **METRICS_ON}) as broker:
        create_topic(broker.bootstrap, "dropped", 1)
        create_topic(broker.bootstrap, "kept", 1, **{"iceberg.delete": "false"})
        for topic in ("dropped", "kept"):
            for round_ in range(3):  # a few snapshots: several manifests, manifest lists and metadata files
                produce(broker.bootstrap, topic, 20, f"{topic}{round_}")
                wait_for_rows(catalog_of(data), topic, 20 * (round_ + 1))
        catalog = open_catalog(catalog_of(data))
        locations = {t: catalog.load_table(identifier(t)).location() for t in ("dropped", "kept")}
        before = {t: files_under(locations[t]) for t in locations}
        assert all(len(found) >= 9 for found in before.values()), before
        lost = plant(locations["dropped"], "data/lost-commit.parquet", age_s=60)  # a lost commit's file
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_topics(["dropped", "kept"], operation_timeout=30).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while catalog.table_exists(identifier("dropped")) and time.monotonic() < deadline:
            time.sleep(0.2)
        with pytest.raises(NoSuchTableError):
            catalog.load_table(identifier("dropped"))
        deadline = time.monotonic() + 30
        while files_under(locations["dropped"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert files_under(locations["dropped"]) == [], "data, manifests, metadata and the orphan all gone"
        assert not os.path.exists(lost)
        url = metrics_url(data)
        deadline = time.monotonic() + 30
        while scrape(url).value("strom_iceberg_tables_purged_total", topic="dropped") != 1:
            assert time.monotonic() < deadline, "the purge is counted"
            time.sleep(0.2)
        found = scrape(url)
        by_kind = {
            kind: found.value("strom_iceberg_files_deleted_total", topic="dropped", kind=kind)
            for kind in ("data", "manifest", "manifest_list", "metadata", "orphan")
        }
        assert sum(by_kind.values()) == len(before["dropped"]) + 1, (by_kind, before["dropped"])
        assert by_kind["data"] >= 3 and by_kind["metadata"] >= 4 and by_kind["orphan"] == 1, by_kind
        assert found.value("strom_iceberg_deleted_orphan_bytes_total", topic="dropped") == len(b"not committed")
        time.sleep(1.5)  # more rounds: the kept table stays, rows and files all
        assert len(table_rows(catalog_of(data), "kept")) == 60
        assert files_under(locations["kept"]) == before["kept"]
        assert found.value("strom_iceberg_tables_purged_total", topic="kept") == 0
    log = broker.read_log()
    assert "topic dropped was deleted, and its table with it (iceberg.delete=true)" in log
    assert "topic kept was deleted; its table is kept (iceberg.delete=false)" in log
