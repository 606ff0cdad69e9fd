"""The Spark source and sink against a secured broker: ``kafka.security.protocol``, ``kafka.sasl.*`` and
``kafka.ssl.*`` reach every client they make, in the Java client's spelling or librdkafka's.

No SparkSession: the clients are built from the options by plain functions (the sink's producer
settings, the driver's Admin, the executors' read_range), and those are what run here against a
SASL_SSL listener that refuses anything else.
"""

from __future__ import annotations

import pytest

from strom.cluster.zookeeper_server import free_port
from strom.spark.options import SourceOptions, StromOptionError, connection_config
from tests.broker_process import BrokerProcess
from tests.integration.clients import unique_topic
from tests.tls_certs import make_certificates

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";'


def java_options(bootstrap: str, ca: str) -> dict:
    """As a user of Spark's own Kafka source writes them (Kafka's Java client keys)."""
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": JAAS,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": ca,
    }


def test_java_security_options_become_librdkafkas():
    opts = SourceOptions.parse(
        {**java_options("h:1", "/ca.pem"), "subscribe": "t", "kafka.ssl.endpoint.identification.algorithm": ""},
        streaming=False,
    )
    assert opts.client_config == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert connection_config(opts.client_config) == {
        k: v for k, v in opts.client_config.items() if k != "bootstrap.servers"
    }
    native = SourceOptions.parse(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "kafka.security.protocol": "SSL",
            "kafka.ssl.ca.location": "/ca.pem",
        },
        streaming=False,
    )
    assert native.client_config["ssl.ca.location"] == "/ca.pem"
    with pytest.raises(StromOptionError, match="JKS cannot be read by librdkafka"):
        SourceOptions.parse(
            {
                "kafka.bootstrap.servers": "h:1",
                "subscribe": "t",
                "kafka.ssl.keystore.type": "JKS",
                "kafka.ssl.keystore.location": "/ks.jks",
            },
            streaming=False,
        )


def test_the_pipelines_command_config_becomes_kafka_options(tmp_path):
    from strom.spark.pipelines.access_log import kafka_options_from_properties

    path = tmp_path / "client.properties"
    path.write_text(
        "bootstrap.servers=elsewhere:9\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"sasl.jaas.config={JAAS}\nssl.truststore.location=/ca.pem\n"
    )
    options = kafka_options_from_properties(str(path))
    assert "kafka.bootstrap.servers" not in options  # the pipeline's --bootstrap-server decides
    parsed = SourceOptions.parse({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **options}, streaming=True)
    assert parsed.client_config == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": "/ca.pem",
    }
    assert kafka_options_from_properties(None) == {}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    port = free_port()
    with BrokerProcess(
        tmp_path_factory.mktemp("broker") / "data",
        {
            "listeners": f"SECURE://127.0.0.1:{port}",
            "listener.security.protocol.map": "SECURE:SASL_SSL",
            "ssl.keystore.location": str(certs.broker),
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.secure.plain.sasl.jaas.config": JAAS.replace(";", ' user_alice="alice-secret";'),
        },
    ):
        yield f"127.0.0.1:{port}", str(certs.ca)


def test_the_sinks_producer_and_the_sources_readers_work_over_sasl_ssl(secured):
    from confluent_kafka import KafkaException, Producer
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import BinaryType, StructField, StructType

    from strom.spark import kafka_io
    from strom.spark.kafka_io import Admin, needs_client_library, read_range
    from strom.spark.options import EARLIEST, LATEST, OffsetRange
    from strom.spark.sink import _Producing
    from strom.spark.source import kafka_schema

    bootstrap, ca = secured
    topic = unique_topic("secure-spark")
    sink = _Producing(
        {**java_options(bootstrap, ca), "topic": topic},
        StructType([StructField("value", BinaryType())]),
        overwrite=False,
    )
    producer = Producer(sink.config)  # what each sink task makes
    values = [f"row-{i}".encode() for i in range(25)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0

    opts = SourceOptions.parse({**java_options(bootstrap, ca), "subscribe": topic}, streaming=False)
    assert needs_client_library(opts.client_config)
    admin = Admin(opts)  # the driver's planning client
    assert admin.subscribed() == [(topic, 0)]
    assert (admin.offsets([(topic, 0)], EARLIEST), admin.offsets([(topic, 0)], LATEST)) == (
        {(topic, 0): 0},
        {(topic, 0): len(values)},
    )
    schema = to_arrow_schema(kafka_schema(False), timezone="UTC")
    try:
        batches = list(read_range(opts, OffsetRange(topic, 0, 0, len(values)), schema))  # an executor's read
    finally:  # the executor's consumer pool would keep calling a broker this module stops
        with kafka_io._pool_lock:
            pooled = [consumer for idle in kafka_io._pool.values() for consumer, _ in idle]
            kafka_io._pool.clear()
        for consumer in pooled:
            consumer.close()
    assert [row["value"] for batch in batches for row in batch.to_pylist()] == values

    with pytest.raises(KafkaException):  # without the options the SASL_SSL listener serves nothing
        Admin(
            SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
        )._admin.list_topics(timeout=2)
