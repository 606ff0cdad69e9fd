"""strom.spark.read_topic of Iceberg topics whose values are Protobuf and JSON Schema records
(value_schema_id_prefix mode): typed values from the table and, past its offsets, from the log
decoded the way the brokers translate them; each good record once, the bad ones left out."""

from __future__ import annotations

import datetime as dt
import json
import struct

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import frame
from strom.spark import read_topic
from tests.iceberg.avro_support import registry_url
from tests.iceberg.test_schema_modes import ICEBERG, create_topic
from tests.iceberg.test_schema_modes_json_protobuf import (
    ORDER_JSON_V1,
    ORDER_JSON_V2,
    json_order,
    produce,
    produce_protobuf,
    settled,
)
from tests.protobuf_support import ORDER_V1, ORDER_V2, expected
from tests.spark.conftest import translation_off


def produce_json(bootstrap: str, client, version: int, ids: range) -> dict[int, tuple[int, int]]:
    serializer = JSONSerializer(json.dumps(ORDER_JSON_V2 if version == 2 else ORDER_JSON_V1), client)
    context = SerializationContext("js", MessageField.VALUE)
    offsets = produce(bootstrap, "js", [serializer(json_order(i, version), context) for i in ids])
    return {o: (i, version) for i, o in zip(ids, offsets)}


def bad(bootstrap: str, client) -> None:
    """A record of each topic that does not decode: the table leaves it out, and so does read_topic."""
    pb_id = client.get_version("pb-value", 1).schema_id
    js_id = client.get_version("js-value", 1).schema_id
    produce(bootstrap, "pb", [frame(pb_id) + b"\xff\xff\xff"])
    produce(bootstrap, "js", [b"\x00" + struct.pack(">I", js_id) + b"{nope"])


def test_read_topic_of_protobuf_and_json_topics_from_the_table_and_the_log(spark, iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    data = broker.data_dir
    for topic in ("pb", "js"):
        create_topic(broker.bootstrap, topic, "value_schema_id_prefix", partitions=1)
    client = SchemaRegistryClient({"url": registry_url(data)})
    pb = produce_protobuf(broker.bootstrap, client, "pb", ORDER_V1, range(40))
    pb |= produce_protobuf(broker.bootstrap, client, "pb", ORDER_V2, range(40, 60))
    js = produce_json(broker.bootstrap, client, 1, range(40)) | produce_json(broker.bootstrap, client, 2, range(40, 60))
    bad(broker.bootstrap, client)
    settled(data, "pb", len(pb), 1)
    settled(data, "js", len(js), 1)
    check_pb(read_topic(spark, "pb", catalog_uri=catalog.uri), pb)
    check_js(read_topic(spark, "js", catalog_uri=catalog.uri), js)

    # translation off: what is produced now is only in the log, decoded on the way as the table is
    translation_off(broker)
    client = SchemaRegistryClient({"url": registry_url(data)})
    pb |= produce_protobuf(broker.bootstrap, client, "pb", ORDER_V2, range(60, 80))
    pb |= produce_protobuf(broker.bootstrap, client, "pb", ORDER_V1, range(80, 90))
    js |= produce_json(broker.bootstrap, client, 2, range(60, 80))
    bad(broker.bootstrap, client)
    live = {
        "catalog_uri": catalog.uri,
        "bootstrap_servers": broker.bootstrap,
        "schema_registry_url": registry_url(data),
    }
    check_pb(read_topic(spark, "pb", **live), pb)
    check_js(read_topic(spark, "js", **live), js)


def check_pb(df, good: dict) -> None:
    rows = df.collect()
    assert sorted(r.offset for r in rows) == sorted(good), "each good record once, the bad one left out"
    for row in rows:
        i, version = good[row.offset]
        value = row.value.asDict(recursive=True)
        assert {**value, "at": value["at"].replace(tzinfo=dt.UTC)} == expected(i, version), value


def check_js(df, good: dict) -> None:
    rows = df.collect()
    assert sorted(r.offset for r in rows) == sorted(good), "each good record once, the bad one left out"
    for row in rows:
        i, version = good[row.offset]
        want = json_order(i, version)
        value = row.value.asDict(recursive=True)
        assert value["at"].replace(tzinfo=dt.UTC) == dt.datetime.fromisoformat(want["at"])
        assert {k: value[k] for k in ("id", "item", "price", "tags", "ship", "note")} == {
            **{k: want[k] for k in ("id", "item", "price", "tags", "ship")},
            "note": want.get("note"),
        }
