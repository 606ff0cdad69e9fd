"""A small application that uses Kafka, as the tests of a real one would see it.

``place`` publishes orders keyed by customer; ``bill`` reads orders as the consumer group
"billing" and publishes each customer's running total.
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, KafkaException, Producer


def place(bootstrap: str, topic: str, orders: list[dict], timeout: float = 60.0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failures = []
    for order in orders:
        producer.produce(
            topic,
            json.dumps(order).encode(),
            order["customer"].encode(),
            on_delivery=lambda err, msg: err and failures.append(err),
        )
    left = producer.flush(timeout)
    if failures or left:
        raise KafkaException(failures[0] if failures else f"{left} orders not acknowledged")


def bill(bootstrap: str, orders_topic: str, totals_topic: str, count: int, timeout: float = 60.0) -> dict[str, float]:
    """Consume ``count`` orders, publish each customer's total, commit; returns the totals."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    totals: dict[str, float] = {}
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        consumer.subscribe([orders_topic])
        while seen < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            order = json.loads(msg.value())
            totals[order["customer"]] = totals.get(order["customer"], 0.0) + order["total"]
            producer.produce(totals_topic, str(totals[order["customer"]]).encode(), order["customer"].encode())
            seen += 1
        if producer.flush(timeout) or seen < count:
            raise TimeoutError(f"billed {seen} of {count} orders")
        consumer.commit(asynchronous=False)
        return totals
    finally:
        consumer.close()
