"""read_topic of a value_schema_latest topic whose mode names a subject and a Protobuf message
(``value_schema_latest:subject=...,protobuf_name=...``): the log's records past the table are
decoded as the brokers translate them, from the named subject's latest version and as the named
message, so the DataFrame holds every record once with the table's columns."""

from __future__ import annotations

import time

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from strom.spark import read_topic
from tests.iceberg.avro_support import registry_url, wait_for_tables
from tests.iceberg.test_latest_mode_options import MODE, CatalogFeed, send_legacy
from tests.iceberg.test_protobuf_messages import REFUND, SHOP, SHOP_V2, expected
from tests.iceberg.test_schema_modes import ICEBERG, create_topic
from tests.spark.conftest import translation_off


def test_read_topic_decodes_the_tail_with_the_modes_subject_and_message(spark, iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "refunds", MODE, partitions=1)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})
    client.register_schema("shop-catalog", Schema(SHOP, "PROTOBUF"))
    client.register_schema("shop-catalog", Schema(SHOP_V2, "PROTOBUF"))
    feed = CatalogFeed(broker.bootstrap, client, "refunds")
    for i in range(10):
        feed.send(REFUND, i, text=SHOP_V2, want=expected(REFUND, i, 2))
    feed.flush()
    wait_for_tables(catalog, "refunds", 10, 0)
    time.sleep(1.0)
    translation_off(broker)
    client = SchemaRegistryClient({"url": registry_url(broker.data_dir)})  # the restarted broker's ports
    later = CatalogFeed(broker.bootstrap, client, "refunds")
    for i in range(10, 15):  # only in the log: a legacy.Refund read as shop.Refund, and version 2's
        send_legacy(later, i)
    for i in range(15, 20):
        later.send(REFUND, i, text=SHOP_V2, want=expected(REFUND, i, 2))
    later.flush()
    df = read_topic(
        spark,
        "refunds",
        catalog_uri=catalog.uri,
        bootstrap_servers=broker.bootstrap,
        schema_registry_url=registry_url(broker.data_dir),
    )
    rows = df.collect()
    got = {
        (row.partition, row.offset): {k: getattr(row.value, k) for k in ("id", "amount", "reason", "note")}
        for row in rows
    }
    assert len(rows) == len(got) == 20
    assert got == {
        at: {k: want.get(k) for k in ("id", "amount", "reason", "note")}
        for at, want in (feed.good | later.good).items()
    }
