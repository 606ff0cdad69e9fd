"""``strom console --command-config`` against a SASL_SSL (SCRAM-SHA-512) listener: every page in the browser.

The properties file is the one a Kafka user already has (the JAAS line, a PEM truststore), so the
console must read it as the other tools do; the pages that go beyond librdkafka (topic sizes by
DescribeLogDirs, transactions by ListTransactions/DescribeTransactions) must log in with it too.
The broker's PLAINTEXT listener is used for set-up alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from playwright.sync_api import Page, expect

from strom.cluster.zookeeper_server import free_port
from tests.broker_process import BrokerProcess
from tests.console.conftest import PAGE_TIMEOUT_MS, ConsoleProcess
from tests.integration.test_schema_registry import USER_V1, registry_url
from tests.tls_certs import make_certificates

WAIT_S = 15
TOPIC = "secured-orders"
GROUP = "secured-billing"
TRANSACTIONAL_ID = "secured-tx"
TX_TOPIC = "secured-payments"
AVRO_TOPIC = "secured-users"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str, str]]:
    """(broker, its SASL_SSL bootstrap, the client properties file)."""
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    plain, sasl_ssl = free_port(), free_port()
    with BrokerProcess(
        tmp_path_factory.mktemp("secured") / "data",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
            "ssl.keystore.location": str(certs.broker),
            "ssl.truststore.location": str(certs.ca),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "schema.registry.listeners": "https://127.0.0.1:0",
        },
    ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"admin-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S).values():
            future.result(timeout=WAIT_S)
        for future in admin.create_topics(
            [NewTopic(TOPIC, 1, 1), NewTopic(TX_TOPIC, 1, 1), NewTopic(AVRO_TOPIC, 1, 1)]
        ).values():
            future.result(timeout=WAIT_S)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for i in range(3):
            producer.produce(TOPIC, key=f"order-{i}".encode(), value=b'{"n": %d}' % i, partition=0)
        assert producer.flush(WAIT_S) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
        finally:
            consumer.close()
        properties = tmp_path_factory.mktemp("client") / "client.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="admin-secret";\n'
            f"ssl.truststore.location={certs.ca}\n"
            "ssl.truststore.type=PEM\n"
        )
        # an Avro record through the registry (https, HTTP Basic with the SCRAM user)
        registry = SchemaRegistryClient(
            {
                "url": registry_url(broker),
                "ssl.ca.location": str(certs.ca),
                "basic.auth.user.info": "admin:admin-secret",
            }
        )
        serialize = AvroSerializer(registry, json.dumps(USER_V1))
        producer.produce(
            AVRO_TOPIC,
            value=serialize({"name": "ada", "age": 36}, SerializationContext(AVRO_TOPIC, MessageField.VALUE)),
        )
        assert producer.flush(WAIT_S) == 0
        yield broker, f"127.0.0.1:{sasl_ssl}", str(properties)


@pytest.fixture(scope="module")
def secured_console(secured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    log = tmp_path_factory.mktemp("secured-console-log") / "console.log"
    broker, bootstrap, properties = secured
    arguments = ["--command-config", properties, "--schema-registry-url", registry_url(broker)]
    process = ConsoleProcess(bootstrap, log, arguments).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def secured_page(browser, secured_console: ConsoleProcess) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=secured_console.url)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def open_page(page: Page, path: str) -> None:
    page.goto(path)
    expect(page.locator("main h1")).to_be_visible()
    expect(page.locator("#error")).to_have_count(0)
    assert "Traceback" not in page.content()


def test_every_page_works_with_the_command_config(secured, secured_page: Page, tmp_path: Path) -> None:
    broker, _, _ = secured
    page = secured_page
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(TX_TOPIC, value=b"pending", partition=0)
    assert producer.flush(WAIT_S) == 0
    try:
        open_page(page, "/transactions")
        tx = page.locator("#transactions tbody tr", has_text=TRANSACTIONAL_ID)
        expect(tx).to_contain_text("Ongoing")
        expect(tx).to_contain_text(f"{TX_TOPIC}-0")
        page.screenshot(path=str(tmp_path / "console-secured-transactions.png"), full_page=True)
    finally:
        producer.abort_transaction(WAIT_S)

    open_page(page, "/")
    expect(page.locator("#brokers tbody tr")).to_have_count(1)

    open_page(page, "/topics")
    row = page.locator(f"#topics tr[data-topic='{TOPIC}']")
    expect(row).to_have_count(1)
    # the size comes from DescribeLogDirs over strom's own client: "-" if it could not log in
    expect(row.locator("td").nth(4)).to_have_text(re.compile(r"^\d+(\.\d)? (B|KiB)$"))

    open_page(page, f"/topics/{TOPIC}")
    expect(page.locator("#partitions tbody tr").first.locator("td.log-end")).to_have_text("3")

    open_page(page, f"/topics/{TOPIC}/messages")
    expect(page.locator("#messages tbody tr[data-offset]")).to_have_count(3)
    expect(page.locator("#messages tr[data-partition='0'][data-offset='2'] td.key pre")).to_have_text("order-2")

    open_page(page, "/groups")
    expect(page.locator(f"#groups tr[data-group='{GROUP}']")).to_contain_text("Empty")
    open_page(page, f"/groups/{GROUP}")
    expect(page.locator("#total-lag")).to_have_text("1")

    open_page(page, "/users")
    expect(page.locator("#users")).to_contain_text("SCRAM-SHA-512 (4096)")

    # the registry over https, logged in to with the command config's SCRAM user
    open_page(page, "/schemas")
    expect(page.locator(f"#subjects tr[data-subject='{AVRO_TOPIC}-value']")).to_contain_text("AVRO")
    open_page(page, f"/topics/{AVRO_TOPIC}/messages")
    decoded = page.locator("#messages tr[data-offset='0'] td.value pre.avro")
    expect(decoded).to_have_text(json.dumps({"name": "ada", "age": 36}, indent=2))

    open_page(page, "/acls")
