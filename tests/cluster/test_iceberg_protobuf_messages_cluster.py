"""Protobuf records of several messages of one schema in value_schema_id_prefix mode on a 3-broker
cluster (RF=3) sharing one SQL catalog, fed by confluent-kafka's ProtobufSerializer: with the
partitions' leaders on different brokers racing their commits, each record lands once in the
table with the columns of the message its indexes name, and the clashing message and the bad
indexes once in ``~dlq`` with their reasons."""

from __future__ import annotations

import time

from confluent_kafka.schema_registry import SchemaRegistryClient

from strom.iceberg.protobuf_columns import frame
from strom.iceberg.table import CatalogSettings
from tests.cluster.conftest import create_topic
from tests.iceberg.avro_support import registry_url, wait_for_tables
from tests.iceberg.test_protobuf_messages import CLASH, LINE, ORDER, REFUND, Feed, check


def test_records_of_every_message_on_three_brokers(cluster_factory, tmp_path):
    catalog = CatalogSettings("sqlite:///" + str(tmp_path / "catalog.db"), "file://" + str(tmp_path / "warehouse"))
    cluster = cluster_factory(
        overrides={
            "iceberg.enabled": "true",
            "iceberg.target.lag.ms": "500",
            "iceberg.catalog.uri": catalog.uri,
            "iceberg.warehouse": str(tmp_path / "warehouse"),
            "schema.registry.listeners": "http://127.0.0.1:0",
        }
    )
    create_topic(cluster, "shop", partitions=3, configs={"iceberg.mode": "value_schema_id_prefix"})
    client = SchemaRegistryClient({"url": registry_url(cluster.brokers[cluster.leader("shop", 0)].data_dir)})
    feed = Feed(cluster.bootstrap, client, "shop", **{"enable.idempotence": True})
    for i in range(30):  # Order's columns first in every partition
        feed.send(ORDER, i, partition=i % 3)
    feed.flush()
    wait_for_tables(catalog, "shop", 30, 0, timeout_s=90)
    for i in range(30, 120):
        feed.send((ORDER, LINE, REFUND)[i % 3], i, partition=i % 3)
    schema_id = client.get_latest_version("shop-value").schema_id
    for partition in range(3):
        feed.send(
            CLASH, 200 + partition, partition=partition, bad="message shop.Clash does not fit the table's columns"
        )
        feed.send_bad(frame(schema_id, (4,)), "message indexes [4] name no message of the schema", partition)
    feed.flush()
    wait_for_tables(catalog, "shop", len(feed.good), len(feed.bad), timeout_s=90)
    time.sleep(1.5)  # a few more rounds on every leader: nothing more may arrive
    rows, dead = wait_for_tables(catalog, "shop", 0, 0)
    check(rows, dead, feed)
