"""The console's Schemas page and decoded messages, in a real browser (headless Debian chromium).

A real broker serves the Schema Registry; confluent-kafka's own AvroSerializer registers two
versions of a subject by producing with each, and ``strom console --schema-registry-url`` shows
the subject, its versions side by side, and the records decoded with the schema each one names.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from playwright.sync_api import Page, expect

from tests.broker_process import BrokerProcess
from tests.console.conftest import ConsoleProcess
from tests.integration.test_schema_registry import USER_V1, USER_V2, registry_url

TOPIC = "users"
WAIT_S = 15


@pytest.fixture(scope="module")
def cluster_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        tmp_path_factory.mktemp("console-schemas") / "data", {"schema.registry.listeners": "http://127.0.0.1:0"}
    ) as process:
        yield process


@pytest.fixture(scope="module")
def console(cluster_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    process = ConsoleProcess(
        cluster_broker.bootstrap,
        tmp_path_factory.mktemp("console-schemas-log") / "console.log",
        ["--schema-registry-url", registry_url(cluster_broker)],
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


def produce_users(broker: BrokerProcess) -> tuple[int, int]:
    """Two records of version 1, one of version 2, one without a prefix, one with an unknown id."""
    client = SchemaRegistryClient({"url": registry_url(broker)})
    context = SerializationContext(TOPIC, MessageField.VALUE)
    first, second = AvroSerializer(client, json.dumps(USER_V1)), AvroSerializer(client, json.dumps(USER_V2))
    values = [
        first({"name": "ada", "age": 36}, context),
        first({"name": "grace", "age": 45}, context),
        second({"name": "linus", "age": 28, "email": "linus@example.org"}, context),
        b"plain text",
        b"\x00" + struct.pack(">I", 987654) + b"\x02",
    ]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(TOPIC, value=value, partition=0)
    assert producer.flush(WAIT_S) == 0
    return struct.unpack(">I", values[0][1:5])[0], struct.unpack(">I", values[2][1:5])[0]


def test_subjects_versions_side_by_side_and_decoded_messages(
    page: Page, cluster_broker: BrokerProcess, tmp_path: Path
) -> None:
    v1_id, v2_id = produce_users(cluster_broker)
    assert v1_id != v2_id

    page.goto("/")
    page.get_by_role("link", name="Schemas").click()
    row = page.locator("#subjects tr[data-subject='users-value']")
    expect(row).to_contain_text("users-value")
    expect(row.locator("td").nth(1)).to_have_text("2")
    expect(row.locator("td").nth(2)).to_have_text(str(v2_id))
    expect(row.locator("td").nth(3)).to_have_text("AVRO")
    expect(row.locator("td").nth(4)).to_have_text("BACKWARD")

    row.get_by_role("link", name="users-value").click()
    expect(page.locator("#compatibility")).to_have_text("BACKWARD")
    expect(page.locator("#shown-version")).to_have_text("2")
    expect(page.locator("#schema")).to_contain_text('"email"')
    # version 1 on the left, version 2 on the right: the added field is marked as added
    expect(page.locator("#diff .diff_add").first).to_be_visible()
    expect(page.locator("#diff")).to_contain_text(f"version 1 (id {v1_id})")
    expect(page.locator("#diff")).to_contain_text(f"version 2 (id {v2_id})")
    added = " ".join(page.locator("#diff .diff_add").all_inner_texts())
    assert "email" in added, added
    page.screenshot(path=str(tmp_path / "console-subject.png"), full_page=True)

    page.locator("#versions").get_by_role("link", name="1").click()
    expect(page.locator("#shown-version")).to_have_text("1")
    expect(page.locator("#schema")).to_contain_text('"age"')
    expect(page.locator("#schema")).not_to_contain_text("email")

    page.goto(f"/topics/{TOPIC}/messages")
    expect(page.locator("#messages tbody tr")).to_have_count(5)
    ada = page.locator("#messages tr[data-offset='0'] td.value pre")
    expect(ada).to_have_class("avro")
    expect(ada).to_have_attribute("data-schema-id", str(v1_id))
    assert json.loads(ada.inner_text()) == {"name": "ada", "age": 36}
    linus = page.locator("#messages tr[data-offset='2'] td.value pre")
    expect(linus).to_have_attribute("data-schema-id", str(v2_id))
    assert json.loads(linus.inner_text()) == {"name": "linus", "age": 28, "email": "linus@example.org"}
    # no prefix: shown as text; an id the registry does not know: shown as bytes
    expect(page.locator("#messages tr[data-offset='3'] td.value pre")).to_have_class("text")
    expect(page.locator("#messages tr[data-offset='4'] td.value pre")).to_have_class("hex")
    page.screenshot(path=str(tmp_path / "console-decoded.png"), full_page=True)

    page.goto("/schemas/users-value?version=9")
    expect(page.locator("#error")).to_have_text("No version 9: the subject has versions [1, 2]")


def test_an_unknown_subject_is_the_registrys_error_on_the_page(page: Page) -> None:
    page.goto("/schemas/no-such-subject")
    expect(page.locator("#error")).to_contain_text("Subject 'no-such-subject' not found. (error code 40401)")


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  Kind kind = 3;
  google.protobuf.Timestamp at = 4;
  repeated string tags = 5;
}
message Refund { int64 order = 1; string why = 2; }
enum Kind { VIEW = 0; BUY = 1; }
"""


def test_protobuf_values_are_shown_decoded_as_json(page: Page, cluster_broker: BrokerProcess) -> None:
    """Values framed by confluent-kafka's ProtobufSerializer, of the schema's first message and of
    its second (message indexes [1]), shown in protobuf's JSON mapping; a body that does not parse
    is shown as bytes."""
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from strom.iceberg.protobuf_columns import message_class
    from strom.spark.protobuf_types import load

    client = SchemaRegistryClient({"url": registry_url(cluster_broker)})
    schema = load(PROTO)
    order, refund = message_class(schema.message((0,))), message_class(schema.message((1,)))
    context = SerializationContext("orders-pb", MessageField.VALUE)
    first = order(id=7, item="tea-ü", kind=1, tags=["hot", "green"])
    first.at.seconds = 1_772_323_200
    values = [
        ProtobufSerializer(order, client, {"use.deprecated.format": False})(first, context),
        ProtobufSerializer(refund, client, {"use.deprecated.format": False, "auto.register.schemas": False})(
            refund(order=7, why="cold"), context
        ),
    ]
    schema_id = struct.unpack(">I", values[0][1:5])[0]
    values.append(values[0][:6] + b"\xff\xff\xff")  # the prefix of a known schema, a body that does not parse
    producer = Producer({"bootstrap.servers": cluster_broker.bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce("orders-pb", value=value, partition=0)
    assert producer.flush(WAIT_S) == 0

    page.goto("/topics/orders-pb/messages")
    expect(page.locator("#messages tbody tr")).to_have_count(3)
    shown = page.locator("#messages tr[data-offset='0'] td.value pre")
    expect(shown).to_have_class("protobuf")
    expect(shown).to_have_attribute("data-schema-id", str(schema_id))
    # protobuf's JSON mapping: int64 as a string, enums by name, Timestamp as RFC 3339, proto field names
    assert json.loads(shown.inner_text()) == {
        "id": "7",
        "item": "tea-ü",
        "kind": "BUY",
        "at": "2026-03-01T00:00:00Z",
        "tags": ["hot", "green"],
    }
    second = page.locator("#messages tr[data-offset='1'] td.value pre")
    expect(second).to_have_class("protobuf")
    assert json.loads(second.inner_text()) == {"order": "7", "why": "cold"}
    expect(page.locator("#messages tr[data-offset='2'] td.value pre")).to_have_class("hex")
