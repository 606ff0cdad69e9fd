"""Iceberg topics of JSON Schema and Protobuf values in value_schema_id_prefix mode on a 3-broker
cluster (RF=3) sharing one SQL catalog, fed by confluent-kafka's JSONSerializer and
ProtobufSerializer with two schema versions and some bad records: after the leader of a partition
is killed with kill -9 mid-way and restarted, each table holds each good record once with its
typed columns (the second version's field a column), ``<topic>~dlq`` each bad one once."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.protobuf_columns import frame
from strom.iceberg.table import identifier
from tests.cluster.conftest import create_topic, wait_until
from tests.iceberg.avro_support import registry_url, scan, wait_for_tables
from tests.iceberg.test_schema_modes_json_protobuf import ORDER_JSON_V1, ORDER_JSON_V2, check_proto_rows, json_order
from tests.protobuf_support import ORDER_V1, ORDER_V2, order, order_class


class Feed:
    """Records to one topic, remembered by (partition, offset) as good or bad."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        self.good: dict[tuple[int, int], tuple[int, int]] = {}
        self.bad: set[tuple[int, int]] = set()

    def send(self, value: bytes, partition: int, good: tuple[int, int] | None) -> None:
        def placed(err, msg):
            assert err is None, err
            if good is None:
                self.bad.add((msg.partition(), msg.offset()))
            else:
                self.good[(msg.partition(), msg.offset())] = good

        self.producer.produce(self.topic, value, partition=partition, on_delivery=placed)

    def flush(self) -> None:
        assert self.producer.flush(60) == 0


def check(rows: list, dead: list, feed: Feed) -> None:
    at = [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows]
    assert len(set(at)) == len(at) and set(at) == set(feed.good), "each good record once"
    dead_at = [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in dead]
    assert len(set(dead_at)) == len(dead_at) and set(dead_at) == feed.bad, "each bad record once"


def test_json_and_protobuf_tables_survive_a_killed_leader(iceberg_cluster):
    cluster, catalog = iceberg_cluster(registry=True)
    for topic in ("pb", "js"):
        create_topic(cluster, topic, partitions=3, configs={"iceberg.mode": "value_schema_id_prefix"})
    victim = cluster.leader("pb", 0)
    survivor = next(b for b in cluster.brokers if b != victim)
    client = SchemaRegistryClient({"url": registry_url(cluster.brokers[survivor].data_dir)})
    pb, js = Feed(cluster.bootstrap, "pb"), Feed(cluster.bootstrap, "js")
    pb_context, js_context = (SerializationContext(t, MessageField.VALUE) for t in ("pb", "js"))
    pb_v1, pb_v2 = order_class(ORDER_V1), order_class(ORDER_V2)
    pb_ser = {
        1: ProtobufSerializer(pb_v1, client, {"use.deprecated.format": False}),
        2: ProtobufSerializer(pb_v2, client, {"use.deprecated.format": False}),
    }
    js_ser = {
        1: JSONSerializer(json.dumps(ORDER_JSON_V1), client),
        2: JSONSerializer(json.dumps(ORDER_JSON_V2), client),
    }

    def feed(start: int, count: int, version: int) -> None:
        for i in range(start, start + count):
            cls = pb_v2 if version == 2 else pb_v1
            pb.send(pb_ser[version](order(cls, i), pb_context), i % 3, (i, version))
            js.send(js_ser[version](json_order(i, version), js_context), i % 3, (i, version))

    def bad_records() -> None:
        pb_id = client.get_version("pb-value", 1).schema_id
        js_id = client.get_version("js-value", 1).schema_id
        for partition in range(3):
            pb.send(frame(pb_id) + b"\xff\xff\xff", partition, None)
            js.send(b"\x00" + js_id.to_bytes(4, "big") + b"{nope", partition, None)

    feed(0, 150, 1)
    feed(150, 60, 2)  # both versions registered before the kill
    pb.flush(), js.flush()
    bad_records()
    pb.flush(), js.flush()
    wait_until(lambda: any(r["kafka"]["partition"] == 0 for r in scan(catalog, identifier("pb"))), 30, "rows of pb-0")
    cluster.kill(victim)
    wait_until(lambda: cluster.leader("pb", 0) not in (-1, victim), 30, "a new leader of pb-0")
    feed(210, 90, 2)
    bad_records()
    pb.flush(), js.flush()
    cluster.restart(victim)
    feed(300, 60, 1)
    pb.flush(), js.flush()
    for topic, fed in (("pb", pb), ("js", js)):
        wait_for_tables(catalog, topic, len(fed.good), len(fed.bad), timeout_s=90)
    time.sleep(1.5)  # a few more rounds on every leader: nothing more may arrive
    rows, dead = wait_for_tables(catalog, "pb", 0, 0)
    check(rows, dead, pb)
    check_proto_rows(rows, pb.good, lambda r: (r["kafka"]["partition"], r["kafka"]["offset"]))
    rows, dead = wait_for_tables(catalog, "js", 0, 0)
    check(rows, dead, js)
    for row in rows:
        i, version = js.good[(row["kafka"]["partition"], row["kafka"]["offset"])]
        want = json_order(i, version)
        assert (row["id"], row["item"], row["tags"], row["note"]) == (i, want["item"], want["tags"], want.get("note"))
