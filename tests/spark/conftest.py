"""One SparkSession for all Spark tests (starting Spark takes ~10 s or more), plus client helpers."""

from __future__ import annotations

import os
import time

import pytest

from strom.spark import register, use_this_python

WAIT_S = 60


@pytest.fixture(scope="session")
def spark():
    use_this_python()  # executors' Python workers must import strom
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("strom-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(WAIT_S)


def produce(bootstrap: str, topic: str, records, **config) -> list[tuple[int, int]]:
    """Produce (value, key, partition, headers) tuples; returns [(partition, offset)] in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    placed: dict[int, tuple[int, int]] = {}
    errors = []

    def report(i):
        def callback(err, msg):
            if err is not None:
                errors.append(err)
            else:
                placed[i] = (msg.partition(), msg.offset())
        return callback

    for i, (value, key, partition, headers) in enumerate(records):
        kwargs = {"key": key, "on_delivery": report(i)}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(WAIT_S) == 0
    assert not errors, errors
    return [placed[i] for i in range(len(placed))]


def strom_reader(spark, bootstrap: str, streaming: bool = False, **options):
    reader = (spark.readStream if streaming else spark.read).format("strom")
    reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def wait_for(predicate, timeout: float = WAIT_S, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
