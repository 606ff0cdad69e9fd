"""value_schema_latest with Redpanda's options on a 3-broker cluster (RF=3) sharing one SQL
catalog: every partition's leader reads the subject the ``subject=`` option names (not
``<topic>-value``) from its own view of ``_schemas`` and every record as the message
``protobuf_name=`` names, so each record lands once with that message's columns; a bad option is
refused by the cluster with INVALID_CONFIG naming the key."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.cluster.conftest import create_topic
from tests.iceberg.avro_support import registry_url, wait_for_tables
from tests.iceberg.test_latest_mode_options import MODE, CatalogFeed, send_legacy
from tests.iceberg.test_protobuf_messages import REFUND, SHOP, SHOP_V2, check, expected


def test_the_options_on_three_brokers(iceberg_cluster):
    cluster, catalog = iceberg_cluster(registry=True)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    refused = admin.create_topics([NewTopic("bad", 3, 3, config={"redpanda.iceberg.mode": "value_schema_latest:x=y"})])
    with pytest.raises(KafkaException, match="INVALID_CONFIG") as refusal:
        refused["bad"].result(30)
    assert "redpanda.iceberg.mode: " in str(refusal.value)
    create_topic(cluster, "refunds", partitions=3, configs={"iceberg.mode": MODE})
    client = SchemaRegistryClient({"url": registry_url(cluster.brokers[cluster.leader("refunds", 0)].data_dir)})
    client.register_schema("shop-catalog", Schema(SHOP, "PROTOBUF"))
    client.register_schema("shop-catalog", Schema(SHOP_V2, "PROTOBUF"))
    feed = CatalogFeed(cluster.bootstrap, client, "refunds", **{"enable.idempotence": True})
    for i in range(60):
        if i % 3 == 0:
            feed.send(REFUND, i, partition=i % 3, want={**expected(REFUND, i), "note": None})
        elif i % 3 == 1:
            feed.send(REFUND, i, partition=i % 3, text=SHOP_V2, want=expected(REFUND, i, 2))
        else:
            send_legacy(feed, i, partition=i % 3)
    feed.flush()
    wait_for_tables(catalog, "refunds", len(feed.good), 0, timeout_s=90)
    time.sleep(1.5)  # a few more rounds on every leader: nothing more may arrive
    rows, dead = wait_for_tables(catalog, "refunds", 0, 0)
    check(rows, dead, feed, ("id", "amount", "reason", "note"))
