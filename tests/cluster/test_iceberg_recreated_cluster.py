"""A topic deleted and made again under the same name on a 3-broker cluster (RF=3), its partitions
led by different brokers: each broker notices the deletion at its own round, some after another
has already made the new topic's table. The old table goes (iceberg.delete=true) and the new
topic's table, which every drop checks the topic id of, keeps the new topic's records, all of
them, and none of the old one's."""

from __future__ import annotations

import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from strom.cluster import model
from strom.iceberg.table import TOPIC_ID_PROPERTY, identifier, open_catalog
from tests.cluster.conftest import create_topic, wait_until
from tests.iceberg.support import assert_exactly, produce, table_rows, wait_for_rows


def test_a_topic_made_again_keeps_only_its_own_records_across_three_brokers(iceberg_cluster):
    cluster, catalog = iceberg_cluster(target_lag_ms=1500)
    configs = {"iceberg.mode": "key_value"}
    create_topic(cluster, "orders", partitions=3, configs=configs)
    assert len({cluster.leader("orders", p) for p in range(3)}) > 1, "partitions led by several brokers"
    old = produce(cluster.bootstrap, "orders", 300, "old", acks="all")
    wait_for_rows(catalog, "orders", len(old), timeout_s=90)
    old_id = open_catalog(catalog).load_table(identifier("orders")).properties[TOPIC_ID_PROPERTY]

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.delete_topics(["orders"], operation_timeout=30).values():
        future.result(30)
    wait_until(lambda: not cluster.zk.exists(model.topic_path("orders")), 30, "orders deleted")
    deadline = time.monotonic() + 60
    while True:  # made again at once, before most brokers' next round
        try:
            create_topic(cluster, "orders", partitions=3, configs=configs)
            break
        except KafkaException as exc:
            assert time.monotonic() < deadline, exc
            time.sleep(0.1)
    new = produce(cluster.bootstrap, "orders", 120, "new", acks="all")
    wait_for_rows(catalog, "orders", len(new), timeout_s=90)
    time.sleep(5)  # several more rounds on every broker: no late drop, nothing more arrives
    assert_exactly(table_rows(catalog, "orders"), new, {})
    table = open_catalog(catalog).load_table(identifier("orders"))
    assert table.properties[TOPIC_ID_PROPERTY] != old_id
    assert [name for _, name in open_catalog(catalog).list_tables("strom")] == ["orders"]
