"""A topic deleted and made again under the same name between two translation rounds: the table
must hold the new topic's records only, every one of them, and never the old topic's.

The table records the id (KIP-516) of the topic it was made for; a broker that finds another
id's table drops it (the old topic's iceberg.delete=true) or keeps it aside as
``<topic>~<old id>`` (false), then translates the new topic into a table of its own. Without
that, the old table stayed and its committed offsets made the new topic's records 0..N look
translated already."""

from __future__ import annotations

import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from strom.iceberg.table import TOPIC_ID_PROPERTY, identifier, open_catalog
from tests.broker_process import BrokerProcess
from tests.iceberg.support import assert_exactly, create_topic, produce, table_rows, wait_for_rows
from tests.iceberg.test_translator import catalog_of

# a long lag: the deletion and the new topic both fall between two rounds
ICEBERG = {"iceberg.enabled": "true", "iceberg.target.lag.ms": "3000"}


def recreate(bootstrap: str, topic: str, partitions: int, replication: int = 1, **configs: str) -> None:
    """Delete ``topic`` and make it again at once (retrying while the deletion is still under way)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while True:
        try:
            create_topic(bootstrap, topic, partitions, replication, **configs)
            return
        except KafkaException as exc:
            assert time.monotonic() < deadline, f"{topic} could not be made again: {exc}"
            time.sleep(0.1)


def topic_id_of(catalog, name: str) -> str:
    return open_catalog(catalog).load_table(identifier(name)).properties[TOPIC_ID_PROPERTY]


def test_a_topic_made_again_gets_a_table_of_its_own_and_the_old_one_is_dropped(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, ICEBERG) as broker:
        catalog = catalog_of(data)
        create_topic(broker.bootstrap, "orders", 2)
        old = produce(broker.bootstrap, "orders", 60, "old")
        wait_for_rows(catalog, "orders", len(old))
        old_id = topic_id_of(catalog, "orders")
        recreate(broker.bootstrap, "orders", 2)
        new = produce(broker.bootstrap, "orders", 40, "new")  # offsets 0.. again, below the old table's
        assert all(offset < 30 for _, offset in new)
        rows = wait_for_rows(catalog, "orders", len(new))
        time.sleep(7)  # two more rounds: nothing more may arrive
        rows = table_rows(catalog, "orders")
        assert_exactly(rows, new, {})
        assert topic_id_of(catalog, "orders") != old_id
        assert [name for _, name in open_catalog(catalog).list_tables("strom")] == ["orders"]
    log = broker.read_log()
    assert "translating orders failed" not in log
    assert f"the table orders of an earlier topic {old_id} was dropped (iceberg.delete=true)" in log or (
        "topic orders was deleted, and its table with it" in log  # the round after the deletion dropped it
    )


def test_a_kept_table_of_the_old_topic_is_set_aside_under_its_topic_id(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, ICEBERG) as broker:
        catalog = catalog_of(data)
        create_topic(broker.bootstrap, "events", 1, **{"iceberg.delete": "false"})
        old = produce(broker.bootstrap, "events", 30, "old")
        wait_for_rows(catalog, "events", len(old))
        old_id = topic_id_of(catalog, "events")
        recreate(broker.bootstrap, "events", 1)
        new = produce(broker.bootstrap, "events", 20, "new")
        wait_for_rows(catalog, "events", len(new))
        time.sleep(7)
        assert_exactly(table_rows(catalog, "events"), new, {})
        assert_exactly(table_rows(catalog, f"events~{old_id}"), old, {})  # the old records, kept apart
        assert sorted(name for _, name in open_catalog(catalog).list_tables("strom")) == ["events", f"events~{old_id}"]
        old_location = open_catalog(catalog).load_table(identifier(f"events~{old_id}")).location()
        assert open_catalog(catalog).load_table(identifier("events")).location() != old_location
    log = broker.read_log()
    assert "translating events failed" not in log
    assert f"the table of an earlier topic {old_id} was kept as" in log


def test_a_table_of_an_id_not_confirmed_gone_is_left_alone(tmp_path):
    """A broker whose metadata is behind (it still knows the earlier topic) finds the new topic's
    table: the worker leaves it and says so, and sets a table aside only for an id the broker has
    confirmed gone from the cluster's store."""
    from strom.iceberg.table import CatalogSettings, load_or_create
    from strom.iceberg.worker import TopicJob, translate_topic

    catalog = CatalogSettings("sqlite:///" + str(tmp_path / "catalog.db"), "file://" + str(tmp_path / "warehouse"))
    new_id, stale_id = "b" * 32, "a" * 32
    load_or_create(open_catalog(catalog), "orders", 1, topic_id=new_id)
    stale = translate_topic(TopicJob("orders", catalog, (), topic_id=stale_id))
    assert stale.foreign == new_id and stale.offsets == {}
    assert topic_id_of(catalog, "orders") == new_id, "the new topic's table is untouched"
    confirmed = translate_topic(TopicJob("orders", catalog, (), topic_id=stale_id, retired=(new_id,)))
    assert confirmed.foreign == "" and confirmed.set_aside
    assert topic_id_of(catalog, "orders") == stale_id


def test_through_a_rest_catalog_the_kept_table_shares_a_location_and_loses_no_file(tmp_path):
    """A REST catalog places a table by its name, so the old topic's table kept aside and the new
    topic's table share one directory. Removing the new table's orphan files, then deleting the
    new topic (its table purged), must leave every file of the kept table: before, both took them
    as the new table's orphans."""
    import subprocess
    import sys

    from strom.cluster.zookeeper_server import free_port
    from strom.iceberg.table import CatalogSettings

    url = f"http://127.0.0.1:{free_port()}"
    config = {
        **ICEBERG,
        "iceberg.rest.catalog.listeners": url,
        "iceberg.catalog.type": "rest",
        "iceberg.rest.catalog.uri": url,
    }
    with BrokerProcess(tmp_path / "data", config) as broker:
        catalog = CatalogSettings.for_rest(url)
        create_topic(broker.bootstrap, "events", 1, **{"iceberg.delete": "false"})
        old = produce(broker.bootstrap, "events", 30, "old")
        wait_for_rows(catalog, "events", len(old))
        old_id = topic_id_of(catalog, "events")
        recreate(broker.bootstrap, "events", 1)
        new = produce(broker.bootstrap, "events", 20, "new")
        kept = f"events~{old_id}"
        wait_for_rows(catalog, kept, len(old))  # set aside first, then the new topic's table is made
        wait_for_rows(catalog, "events", len(new))
        opened = open_catalog(catalog)
        assert opened.load_table(identifier("events")).location() == opened.load_table(identifier(kept)).location()
        removed = subprocess.run(
            [sys.executable, "-m", "strom.cli.main", "iceberg", "--bootstrap-server", broker.bootstrap]
            + ["remove-orphan-files", "--topic", "events", "--older-than-ms", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert removed.returncode == 0, removed.stderr
        assert_exactly(table_rows(catalog, kept), old, {})
        assert_exactly(table_rows(catalog, "events"), new, {})
        # the new topic deleted: its table is purged, the kept one stays whole
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_topics(["events"], operation_timeout=30).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while ("strom", "events") in [tuple(name) for name in open_catalog(catalog).list_tables("strom")]:
            assert time.monotonic() < deadline, "the deleted topic's table was not dropped"
            time.sleep(0.2)
        assert_exactly(table_rows(catalog, kept), old, {})
