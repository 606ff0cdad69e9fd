"""The application against one broker (the strom_broker fixture)."""

import json

import orders
from confluent_kafka import Consumer, TopicPartition

from strom.testing import Broker

ORDERS = [
    {"id": 1, "customer": "ada", "total": 12.5},
    {"id": 2, "customer": "bob", "total": 3.0},
    {"id": 3, "customer": "ada", "total": 7.5},
    {"id": 4, "customer": "cy", "total": 1.25},
]


def test_placed_orders_are_in_the_topic_keyed_by_customer(strom_broker):
    topic = strom_broker.create_topic("orders-placed", partitions=3)
    orders.place(strom_broker.bootstrap_servers, topic, ORDERS)

    records = strom_broker.consume(topic, 4, timeout=30)
    assert sorted(json.loads(r.value)["id"] for r in records) == [1, 2, 3, 4]
    assert all(r.key == json.loads(r.value)["customer"].encode() for r in records)
    ada = [r for r in records if r.key == b"ada"]  # one key, one partition, in order
    assert len({r.partition for r in ada}) == 1 and [json.loads(r.value)["id"] for r in ada] == [1, 3]


def test_billing_publishes_totals_and_commits(strom_broker):
    strom_broker.create_topic("orders-in", partitions=2)
    strom_broker.create_topic("totals")
    strom_broker.produce("orders-in", [(o["customer"], json.dumps(o)) for o in ORDERS])

    totals = orders.bill(strom_broker.bootstrap_servers, "orders-in", "totals", 4)
    assert totals == {"ada": 20.0, "bob": 3.0, "cy": 1.25}

    latest = {r.key: float(r.value) for r in strom_broker.consume("totals", 4, timeout=30)}
    assert latest[b"ada"] == 20.0 and latest[b"bob"] == 3.0 and latest[b"cy"] == 1.25
    consumer = Consumer({"bootstrap.servers": strom_broker.bootstrap_servers, "group.id": "billing"})
    try:
        committed = consumer.committed([TopicPartition("orders-in", 0), TopicPartition("orders-in", 1)], timeout=30)
    finally:
        consumer.close()
    assert sum(tp.offset for tp in committed) == 4


def test_acknowledged_orders_survive_a_broker_crash(strom_broker):
    topic = strom_broker.create_topic("orders-durable")
    written = strom_broker.produce(topic, ["before"])
    assert [(r.partition, r.offset) for r in written] == [(0, 0)]

    strom_broker.kill()
    assert not strom_broker.alive()
    strom_broker.restart()
    orders.place(strom_broker.bootstrap_servers, topic, [ORDERS[0]])

    records = strom_broker.consume(topic, 2, timeout=30)
    assert [(r.offset, r.value) for r in records] == [(0, b"before"), (1, json.dumps(ORDERS[0]).encode())]


def test_a_test_may_end_with_the_broker_killed(strom_broker):
    strom_broker.create_topic("orders-left")
    strom_broker.produce("orders-left", ["kept"])
    strom_broker.kill()


def test_the_next_test_finds_the_broker_running(strom_broker):
    assert strom_broker.alive()  # the plugin restarted it (session scope) or it is a new one (function scope)
    strom_broker.create_topic("orders-next")
    strom_broker.produce("orders-next", ["fine"])
    assert [r.value for r in strom_broker.consume("orders-next", 1, timeout=30)] == [b"fine"]


def test_a_broker_without_the_fixture():
    with Broker(in_process=True) as broker:
        broker.create_topic("scratch")
        broker.produce("scratch", [(b"k", b"v")])
        assert [(r.key, r.value, r.offset) for r in broker.consume("scratch", 1, timeout=30)] == [(b"k", b"v", 0)]
