"""One SparkSession for all Spark tests (starting Spark takes ~10 s or more), plus client helpers."""

from __future__ import annotations

import os
import time

import pytest

from strom.spark import register, use_this_python
from tests.broker_process import BrokerProcess
from tests.cluster.conftest import cluster_factory, zookeeper  # noqa: F401 - fixtures of typed_cluster
from tests.iceberg.conftest import iceberg_broker  # noqa: F401 - the fixture of the read_topic tests

WAIT_S = 60


@pytest.fixture(scope="session")
def spark():
    use_this_python()  # executors' Python workers must import strom
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("strom-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture
def typed_broker(spark, tmp_path):
    """A broker serving the Schema Registry, as the typed tests use it (tests.spark.typed_support)."""
    from tests.spark.typed_support import REGISTRY_ON, TypedBroker

    with BrokerProcess(tmp_path / "broker", REGISTRY_ON) as process:
        yield TypedBroker.of_broker(spark, process)


@pytest.fixture
def typed_cluster(spark, cluster_factory):  # noqa: F811 - the fixture imported above
    """Three brokers on one ZooKeeper, each serving the Schema Registry (``urls`` in broker order);
    its topics are replicated 3 times."""
    from tests.spark.typed_support import REGISTRY_ON, TypedBroker

    return TypedBroker.of_cluster(spark, cluster_factory(overrides=REGISTRY_ON))


def translation_off(broker: BrokerProcess) -> None:
    """Restart ``broker`` with iceberg.enabled=false: what is produced from now on is only in the log."""
    broker.stop()
    broker.overrides["iceberg.enabled"] = "false"
    broker.start()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """Make the test's SparkSession the active one of the JVM thread that will run its calls.

    A Python data source is found by name through the JVM thread's *active* session when a
    DataFrame is written (DataSource.lookupDataSource asks SparkSession.getActiveSession), while
    reading finds it through the reader's own session. In full runs the py4j thread at times had
    no active session by the time a test wrote (DATA_SOURCE_NOT_FOUND: strom, on a write right
    after reads that worked): a test that ran alone passed. Which earlier test lost it was not
    found; setting it after the test's fixtures are up, before its body, gives every test the same
    start. A user's application has one session, active from getOrCreate on.
    """
    session = item.funcargs.get("spark") if hasattr(item, "funcargs") else None
    if session is not None:
        session._jvm.SparkSession.setActiveSession(session._jsparkSession)


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


# -- transactions --------------------------------------------------------------------------


def transactional_feed(
    bootstrap: str, topic: str, partitions: int, chunks: int, per_chunk: int, abort_every: int = 4, other_every: int = 1
) -> list[bytes]:
    """Records written by confluent-kafka's transactional producer; returns the committed values.

    Chunk by chunk, producer "main" writes ``per_chunk`` values in one transaction, committed
    except every ``abort_every``-th, while producer "other" interleaves a copy of every
    ``other_every``-th value in a transaction that is always aborted (flushed first, as a crashed
    producer's data would be). Two thirds of the records go to partition 0, so partitions differ
    in size.
    """
    from confluent_kafka import Producer

    def producer(name):
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"feed-{topic}-{name}", "linger.ms": 5})
        p.init_transactions(WAIT_S)
        return p

    main, other = producer("main"), producer("other")
    committed, n = [], 0
    for chunk in range(chunks):
        main.begin_transaction()
        other.begin_transaction()
        values = []
        for _ in range(per_chunk):
            value = b"v-%d" % n
            partition = (1 if n % 3 == 0 else 0) % partitions
            main.produce(topic, value, key=b"k-%d" % n, partition=partition)
            if n % other_every == 0:
                other.produce(topic, b"aborted-" + value, partition=partition)
            values.append(value)
            n += 1
        main.flush(WAIT_S)
        other.flush(WAIT_S)
        other.abort_transaction(WAIT_S)
        if chunk % abort_every == abort_every - 1:
            main.abort_transaction(WAIT_S)
        else:
            main.commit_transaction(WAIT_S)
            committed += values
    return committed


def latest_offsets(bootstrap: str, topic: str, partitions: int, read_committed: bool, admin=None) -> dict[int, int]:
    """ListOffsets(latest): the LSO of each partition under read_committed, else the high watermark."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = admin or AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
        isolation_level=level,
        request_timeout=WAIT_S,
    )
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def consume_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, start: int = 0
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a confluent-kafka consumer with ``isolation`` is
    given from offset ``start`` on, up to the end as ListOffsets reports it for that level."""
    from confluent_kafka import Consumer, TopicPartition

    ends = latest_offsets(bootstrap, topic, partitions, isolation == "read_committed")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "strom-test-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        records, done = [], {p for p, end in ends.items() if end <= start}
        deadline = time.monotonic() + WAIT_S
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} did not finish"
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == -191:  # _PARTITION_EOF
                        done.add(msg.partition())
                    continue
                records.append((msg.partition(), msg.offset(), msg.value()))
        return records
    finally:
        consumer.close()


def fetch_path_read(
    bootstrap: str, topic: str, partition: int, start: int, end: int, isolation: str
) -> list[tuple[int, bytes]]:
    """(offset, value) of [start, end) of one partition as the source's executors read it: Fetch."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from strom.spark.kafka_io import needs_client_library, read_range
    from strom.spark.options import OffsetRange, SourceOptions
    from strom.spark.source import kafka_schema

    opts = SourceOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafka.isolation.level": isolation}, streaming=False
    )
    assert not needs_client_library(opts.client_config)  # the Fetch reader, not librdkafka
    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
    return [
        (o, v)
        for batch in read_range(opts, OffsetRange(topic, partition, start, end), schema)
        for o, v in zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist())
    ]
