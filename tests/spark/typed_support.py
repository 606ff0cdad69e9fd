"""What the typed Spark tests (value.format avro, json, protobuf) share: a broker or a 3-broker
cluster serving the Schema Registry, seen through ``TypedBroker``, which creates topics, reads
with the strom source and writes with the strom sink with the typed options (and, on a SASL_SSL
broker, the ``kafka.*`` options that log in), and reads back what the sink wrote through a
read_committed confluent-kafka consumer and confluent-kafka's own deserializers.

The fixtures ``typed_broker`` and ``typed_cluster`` (tests/spark/conftest.py) give one; a test of
a SASL_SSL broker wraps ``tests.spark.secured_broker.sasl_ssl_broker``'s with ``TypedBroker.secured``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration.test_schema_registry import registry_url
from tests.spark.conftest import WAIT_S, create_topic

REGISTRY_ON = {"schema.registry.listeners": "http://127.0.0.1:0"}


class TypedBroker:
    """One broker, or a cluster, with its registry URLs (one a broker) and the options that reach it."""

    def __init__(
        self,
        spark: Any,
        bootstrap: str,
        urls: list[str],
        create: Callable[[str, int], None],
        kafka: dict[str, str] | None = None,
        user_info: str | None = None,
    ):
        self.spark = spark
        self.bootstrap = bootstrap  # PLAINTEXT: the tests' own clients
        self.urls = urls
        self.url = urls[0]
        self._create = create
        self.kafka = kafka or {"kafka.bootstrap.servers": bootstrap}  # the strom source's and sink's
        self.auth = {} if user_info is None else {"schema.registry.basic.auth.user.info": user_info}
        client_auth = {} if user_info is None else {"basic.auth.user.info": user_info}
        self.client = SchemaRegistryClient({"url": self.url, **client_auth})

    @classmethod
    def of_broker(cls, spark: Any, broker: Any) -> TypedBroker:
        return cls(
            spark, broker.bootstrap, [registry_url(broker)], lambda name, n: create_topic(broker.bootstrap, name, n)
        )

    @classmethod
    def of_cluster(cls, spark: Any, cluster: Any) -> TypedBroker:
        from tests.cluster.conftest import create_topic as create_replicated

        urls = [registry_url(cluster.brokers[b]) for b in sorted(cluster.brokers)]
        return cls(spark, cluster.bootstrap, urls, lambda name, n: create_replicated(cluster, name, n, 3))

    @classmethod
    def secured(cls, spark: Any, broker: Any, kafka: dict[str, str], user_info: str) -> TypedBroker:
        """A broker of ``sasl_ssl_broker``: Spark reaches it through ``kafka``, the registry with ``user_info``."""
        typed = cls.of_broker(spark, broker)
        return cls(spark, broker.bootstrap, typed.urls, typed._create, kafka, user_info)

    def topics(self, *names: str, partitions: int = 1) -> None:
        for name in names:
            self._create(name, partitions)

    def options(self, value_format: str | None = None, url: str | None = None, **more: str) -> dict[str, str]:
        """The strom source's or sink's options: kafka.*, the registry, value.format if given, ``more``."""
        typed = {} if value_format is None else {"value.format": value_format}
        return {**self.kafka, "schema.registry.url": url or self.url, **self.auth, **typed, **more}

    def read(self, value_format: str | None = None, streaming: bool = False, url: str | None = None, **more: str):
        """A DataFrame of the strom source (``more``: its options, ``subscribe`` among them)."""
        reader = (self.spark.readStream if streaming else self.spark.read).format("strom")
        for key, value in self.options(value_format, url, **more).items():
            reader = reader.option(key, value)
        return reader.load()

    def write(self, df: Any, topic: str, value_format: str | None = None, url: str | None = None, **more: str) -> None:
        """``df`` appended to ``topic`` by the strom sink, as a batch write."""
        writer = df.write.format("strom").mode("append").option("topic", topic)
        for key, value in self.options(value_format, url, **more).items():
            writer = writer.option(key, value)
        writer.save()

    def write_stream(
        self, df: Any, topic: str, value_format: str, checkpoint: Any, url: str | None = None, **more: str
    ) -> None:
        """A streaming ``df`` written to ``topic`` exactly once, trigger availableNow, until it ends."""
        writer = df.writeStream.format("strom").option("topic", topic).option("deliveryGuarantee", "exactly-once")
        for key, value in self.options(value_format, url, checkpointLocation=str(checkpoint), **more).items():
            writer = writer.option(key, value)
        query = writer.trigger(availableNow=True).start()
        assert query.awaitTermination(240) and query.exception() is None

    def read_back(
        self, topic: str, partitions: int, deserializer: Any, prefix: bytes | None = None, keys: Any = None
    ) -> list:
        """Every committed value of ``topic`` deserialized, or (key, value) pairs with a ``keys``
        deserializer; each value's first 5 bytes checked against ``prefix`` when given."""

        def decode(msg):
            if prefix is not None:
                assert msg.value()[:5] == prefix
            value = deserializer(msg.value(), SerializationContext(topic, MessageField.VALUE))
            if keys is None:
                return value
            return keys(msg.key(), SerializationContext(topic, MessageField.KEY)), value

        return read_committed(self.bootstrap, topic, partitions, decode)


def read_committed(bootstrap: str, topic: str, partitions: int, decode: Callable[[Any], Any]) -> list:
    """``decode(message)`` of every committed record of ``topic``, through a read_committed
    consumer, up to each partition's end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, at_end = [], set()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"read {len(got)} records of {topic}"
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    at_end.add(msg.partition())  # _PARTITION_EOF: the end of what is committed
                    continue
                got.append(decode(msg))
    finally:
        consumer.close()
    return got


def produce_raw(bootstrap: str, topic: str, values: list[bytes], partition: int) -> list[int]:
    """``values`` as they are to one partition, in order; their offsets."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    offsets: list[int] = []
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=lambda err, msg: offsets.append(msg.offset()))
    assert producer.flush(WAIT_S) == 0
    return offsets
