"""Redpanda's options of ``value_schema_latest`` on a real broker serving the Schema Registry,
fed by confluent-kafka's ProtobufSerializer: ``subject=`` takes the columns from another subject
than ``<topic>-value`` and ``protobuf_name=`` reads every record as one message of it (its
columns the table's from the start); a bad option is refused at CreateTopics and AlterConfigs
with INVALID_CONFIG naming the key."""

from __future__ import annotations

import functools

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import message_class
from strom.spark.protobuf_types import load
from tests.broker_process import BrokerProcess
from tests.iceberg.avro_support import registry_url
from tests.iceberg.test_protobuf_messages import REFUND, SHOP, SHOP_V2, Feed, check, classes, expected
from tests.iceberg.test_schema_modes import ICEBERG, catalog_of, column_types, create_topic
from tests.iceberg.test_schema_modes_json_protobuf import settled

MODE = "value_schema_latest:subject=shop-catalog,protobuf_name=shop.Refund"
# an older producer's schema under a subject of its own: its message is legacy.Refund, a name the
# latest version of shop-catalog lacks; only protobuf_name makes its records shop.Refund's
LEGACY = """
syntax = "proto3";
package legacy;
message Refund { int64 id = 1; double amount = 2; string reason = 3; }
"""


@functools.cache
def legacy_class() -> type:
    return message_class(load(LEGACY).message((0,)))


def send_legacy(feed: Feed, i: int, partition: int = 0, **how) -> None:
    conf = {"use.deprecated.format": False, "subject.name.strategy": lambda ctx, name: "legacy-refunds"}
    cls = legacy_class()
    serializer = ProtobufSerializer(cls, feed.client, conf)
    value = serializer(cls(id=i, amount=i * 1.5, reason=f"r{i}"), SerializationContext(feed.topic, MessageField.VALUE))
    if "bad" in how:
        feed._send(value, partition, None, how["bad"])
    else:
        feed._send(value, partition, {**expected(REFUND, i), "note": None})


class CatalogFeed(Feed):
    """Feed whose serializers register and look up under the subject ``shop-catalog``."""

    def serializer(self, text: str, path: tuple[int, ...]) -> ProtobufSerializer:
        key = (text, path)
        if key not in self._serializers:
            conf = {"use.deprecated.format": False, "subject.name.strategy": lambda ctx, name: "shop-catalog"}
            self._serializers[key] = ProtobufSerializer(classes(text)[path], self.client, conf)
        return self._serializers[key]


def test_subject_and_protobuf_name_pick_the_columns_and_the_message(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, ICEBERG) as broker:
        create_topic(broker.bootstrap, "refunds", MODE, partitions=1)
        client = SchemaRegistryClient({"url": registry_url(data)})
        client.register_schema("shop-catalog", Schema(SHOP, "PROTOBUF"))
        client.register_schema("shop-catalog", Schema(SHOP_V2, "PROTOBUF"))
        feed = CatalogFeed(broker.bootstrap, client, "refunds")
        for i in range(20):  # version-1 Refunds, read as version 2's (note unset)
            feed.send(REFUND, i, want={**expected(REFUND, i), "note": None})
        for i in range(20, 35):
            feed.send(REFUND, i, text=SHOP_V2, want=expected(REFUND, i, 2))
        for i in range(35, 40):
            send_legacy(feed, i)  # legacy.Refund read as shop.Refund
        feed.flush()
        assert client.get_subjects() == ["legacy-refunds", "shop-catalog"], "nothing under refunds-value"
        # the subject alone: a record is read as the latest version's message of its own name
        create_topic(broker.bootstrap, "refunds-by-name", "value_schema_latest:subject=shop-catalog", partitions=1)
        by_name = CatalogFeed(broker.bootstrap, client, "refunds-by-name")
        by_name.send(REFUND, 1)
        send_legacy(by_name, 2, bad="the latest schema of shop-catalog")
        by_name.flush()
        rows, dead = settled(data, "refunds-by-name", len(by_name.good), len(by_name.bad))
        check(rows, dead, by_name, ("id", "amount", "reason"))
        rows, dead = settled(data, "refunds", len(feed.good), len(feed.bad))
        check(rows, dead, feed, ("id", "amount", "reason", "note"))
        types = column_types(catalog_of(data), "refunds")
        # Refund's columns only: the named message's, not the union of the schema's messages
        assert types == {
            "kafka": types["kafka"],
            "key": "binary",
            "id": "long",
            "amount": "double",
            "reason": "string",
            "note": "string",
        }
    assert "translating refunds failed" not in broker.read_log()


BAD = {
    "value_schema_latest:colour=red": "'colour=red' is no option of value_schema_latest",
    "value_schema_latest:subject=": "the option subject has an empty value",
    "value_schema_latest:subject=a,subject=b": "the option subject is given twice",
    "value_schema_latest:protobuf_name=not a name": "protobuf_name 'not a name' is no Protobuf message name",
    "key_value:subject=orders": "only value_schema_latest takes options",
    "value_schema_latest;subject=x": "is not one of disabled",
}


def test_bad_options_are_refused_naming_the_key_and_good_ones_described(tmp_path):
    with BrokerProcess(tmp_path / "data", ICEBERG) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for i, (mode, why) in enumerate(BAD.items()):
            for key in ("iceberg.mode", "redpanda.iceberg.mode"):
                refused = admin.create_topics([NewTopic(f"bad{i}", 1, 1, config={key: mode})])
                with pytest.raises(KafkaException, match="INVALID_CONFIG") as refusal:
                    refused[f"bad{i}"].result(30)
                assert f"{key}: " in str(refusal.value) and why in str(refusal.value), str(refusal.value)
        create_topic(broker.bootstrap, "good", "value_schema_latest:protobuf_name=shop.Refund , subject=s1")
        resource = ConfigResource("topic", "good")
        shown = {k: e.value for k, e in admin.describe_configs([resource])[resource].result(30).items()}
        assert shown["iceberg.mode"] == "value_schema_latest:subject=s1,protobuf_name=shop.Refund"
        for mode, why in BAD.items():
            change = ConfigResource(
                "topic",
                "good",
                incremental_configs=[ConfigEntry("iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET)],
            )
            with pytest.raises(KafkaException, match="INVALID_CONFIG") as refusal:
                admin.incremental_alter_configs([change])[change].result(30)
            assert "iceberg.mode: " in str(refusal.value) and why in str(refusal.value), str(refusal.value)
        shown = {k: e.value for k, e in admin.describe_configs([resource])[resource].result(30).items()}
        assert shown["iceberg.mode"] == "value_schema_latest:subject=s1,protobuf_name=shop.Refund", "unchanged"
