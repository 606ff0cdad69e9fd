"""strom console in a real browser: what a user sees after producing and consuming with a real client.

Headless Debian chromium through Playwright; the broker and the console are real processes, the
messages and the group's offsets come from confluent-kafka. Screenshots go to the test's tmp dir.
"""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from playwright.sync_api import Page, expect

from tests.broker_process import BrokerProcess

POLL_TIMEOUT_S = 15


def screenshot(page: Page, path: Path) -> None:
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def produce(bootstrap: str, records: list[dict]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for record in records:
        producer.produce(**record)
    assert producer.flush(POLL_TIMEOUT_S) == 0


def test_create_browse_follow_configure_and_delete_a_topic(
    page: Page, cluster_broker: BrokerProcess, tmp_path: Path
) -> None:
    page.goto("/topics")
    page.get_by_text("Create a topic").click()
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill("orders")
    form.locator("input[name=partitions]").fill("2")
    form.get_by_role("button", name="Create").click()
    expect(page.locator("#flash")).to_have_text("Created topic orders.")
    expect(page.locator("#partitions tbody tr")).to_have_count(2)

    order = {"id": 1, "item": "book", "price": 12.5}
    produce(
        cluster_broker.bootstrap,
        [
            {
                "topic": "orders",
                "partition": 0,
                "key": b"order-1",
                "value": json.dumps(order).encode(),
                "headers": [("trace-id", b"abc-123"), ("raw", b"\x00\xff\x10")],
            },
            {"topic": "orders", "partition": 1, "key": b"order-2", "value": "plain text, ünïcode".encode()},
            {"topic": "orders", "partition": 1, "key": b"\x01\x02", "value": bytes([0, 1, 2, 254, 255])},
        ],
    )

    page.get_by_role("link", name="Browse messages").click()
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(3)
    first = page.locator("#messages tr[data-partition='0'][data-offset='0']")
    expect(first.locator("td.key pre")).to_have_text("order-1")
    expect(first.locator("td.value pre.json")).to_contain_text('"item": "book"')
    expect(first.locator("td.headers")).to_contain_text("trace-id")
    expect(first.locator("td.headers pre.text")).to_have_text("abc-123")
    expect(first.locator("td.headers pre.hex")).to_have_text("00 ff 10")
    text_row = page.locator("#messages tr[data-partition='1'][data-offset='0']")
    expect(text_row.locator("td.value pre.text")).to_have_text("plain text, ünïcode")
    binary_row = page.locator("#messages tr[data-partition='1'][data-offset='1']")
    expect(binary_row.locator("td.key pre.hex")).to_have_text("01 02")
    expect(binary_row.locator("td.value pre.hex")).to_have_text("00 01 02 fe ff")
    screenshot(page, tmp_path / "console-messages.png")

    # one partition, one message a page: the next page starts where this one stopped
    page.goto("/topics/orders/messages?partitions=1&start=beginning&limit=1")
    expect(page.locator("#messages tbody tr[data-offset='0']")).to_have_count(1)
    page.locator("#next-page").click()
    expect(page.locator("#messages tbody tr[data-partition='1'][data-offset='1']")).to_have_count(1)
    expect(page.locator("#messages tbody tr")).to_have_count(1)

    # follow live: a message produced after the page opened appears without a reload
    page.goto("/topics/orders/messages?start=end&limit=10&follow=1")
    expect(page.locator("#messages tbody tr[data-offset]")).to_have_count(3)
    produce(cluster_broker.bootstrap, [{"topic": "orders", "partition": 0, "key": b"late", "value": b'{"n": 2}'}])
    expect(page.locator("#messages tr[data-partition='0'][data-offset='1'] td.key")).to_have_text("late")

    # a config edited through IncrementalAlterConfigs
    page.goto("/topics/orders")
    config_form = page.locator("#set-config")
    config_form.locator("input[name=key]").fill("retention.ms")
    config_form.locator("input[name=value]").fill("3600000")
    config_form.get_by_role("button", name="Set").click()
    expect(page.locator("#flash")).to_have_text("Set retention.ms.")
    expect(page.locator("#configs tr[data-config='retention.ms'] td.value")).to_have_text("3600000")
    expect(page.locator("#partitions tbody tr").first.locator("td.log-end")).to_have_text("2")

    # delete, behind a confirmation that needs the name
    page.get_by_role("link", name="Delete…").click()
    page.locator("#confirm-delete input[name=confirm]").fill("order")
    page.get_by_role("button", name="Delete orders").click()
    expect(page.locator("#error")).to_contain_text("Type the topic's name")
    page.locator("#confirm-delete input[name=confirm]").fill("orders")
    page.get_by_role("button", name="Delete orders").click()
    expect(page.locator("#flash")).to_have_text("Deleted topic orders.")
    expect(page.locator("#topics tr[data-topic='orders']")).to_have_count(0)


def test_watch_a_groups_lag_fall_then_reset_it_to_earliest(
    page: Page, cluster_broker: BrokerProcess, tmp_path: Path
) -> None:
    bootstrap = cluster_broker.bootstrap
    produce(bootstrap, [{"topic": "events", "partition": 0, "value": f"event-{i}".encode()} for i in range(30)])
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "billing",
            "client.id": "billing-client",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe(["events"])
        seen = consume(consumer, 10)
        consumer.commit(offsets=[TopicPartition("events", 0, 0)], asynchronous=False)

        page.goto("/groups/billing")
        expect(page.locator("#group-state")).to_have_text("Stable")
        expect(page.locator("#members")).to_contain_text("billing-client")
        expect(page.locator("#offsets tr[data-tp='events-0'] td.log-end")).to_have_text("30")
        expect(page.locator("#total-lag")).to_have_text("30")

        consumer.commit(offsets=[TopicPartition("events", 0, seen[-1] + 1)], asynchronous=False)
        expect(page.locator("#total-lag")).to_have_text("20")  # the page refreshes by itself
        seen += consume(consumer, 20)
        consumer.commit(offsets=[TopicPartition("events", 0, seen[-1] + 1)], asynchronous=False)
        expect(page.locator("#total-lag")).to_have_text("0")
        expect(page.locator("svg.chart polyline")).to_have_count(1)  # the lag chart has samples
        screenshot(page, tmp_path / "console-group.png")

        # an active group cannot be reset
        page.locator("#reset select[name=mode]").select_option("earliest")
        page.get_by_role("button", name="Preview reset…").click()
        expect(page.locator("#flash")).to_contain_text("can only be reset if the group 'billing' is inactive")
    finally:
        consumer.close()

    page.goto("/groups/billing")
    expect(page.locator("#group-state")).to_have_text("Empty")
    page.locator("#reset select[name=mode]").select_option("earliest")
    page.get_by_role("button", name="Preview reset…").click()
    expect(page.locator("#plan .new-offset")).to_have_text(["0"])
    page.get_by_role("button", name="Reset 1 partition(s)").click()
    expect(page.locator("#flash")).to_have_text("Reset 1 partition(s) to earliest.")
    expect(page.locator("#offsets tr[data-tp='events-0'] td.committed")).to_have_text("0")
    expect(page.locator("#total-lag")).to_have_text("30")

    page.goto("/groups")
    expect(page.locator("#groups tr[data-group='billing']")).to_contain_text("Empty")


def test_overview_shows_the_broker_and_messages_in_per_second(
    page: Page, cluster_broker: BrokerProcess, tmp_path: Path
) -> None:
    page.goto("/")
    broker_row = page.locator("#brokers tbody tr")
    expect(broker_row).to_have_count(1)
    expect(broker_row.locator("td").first).to_have_text("0")
    expect(broker_row.locator(".badge")).to_have_text("controller")
    expect(page.locator("#under-replicated")).to_have_text("0")
    produce(cluster_broker.bootstrap, [{"topic": "rates", "partition": 0, "value": b"x" * 10} for _ in range(200)])
    # the samples around the burst put "messages in" at >= 200 messages over a few seconds
    page.wait_for_function(
        """() => {
        const line = document.querySelector("svg.chart polyline[data-series='messages in']");
        return line !== null && parseFloat(line.dataset.max) >= 10;
    }""",
        timeout=20_000,
    )
    expect(page.locator("svg.chart")).to_contain_text("messages consumed")
    screenshot(page, tmp_path / "console-overview.png")


def test_cluster_errors_appear_on_the_page_as_one_line(page: Page, cluster_broker: BrokerProcess) -> None:
    produce(cluster_broker.bootstrap, [{"topic": "errors", "partition": 0, "value": b"x"}])
    page.goto("/topics/no-such-topic")
    expect(page.locator("#error")).to_have_text("Topic 'no-such-topic' does not exist")
    page.goto("/groups/nobody/reset", wait_until="commit")  # a GET to a POST-only page
    expect(page.locator("main")).to_contain_text("No page at /groups/nobody/reset")
    page.goto("/topics/errors/messages?partitions=abc")
    expect(page.locator("#error")).to_contain_text("Invalid partitions 'abc'")
    for path in ("/users", "/transactions", "/acls"):
        page.goto(path)
        expect(page.locator("main h1")).to_be_visible()
        assert "Traceback" not in page.content()


def test_scram_users_and_open_transactions_are_listed(page: Page, cluster_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": cluster_broker.bootstrap})
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(POLL_TIMEOUT_S)
    page.goto("/users")
    expect(page.locator("#users")).to_contain_text("alice")
    expect(page.locator("#users")).to_contain_text("SCRAM-SHA-256 (8192)")

    # two open transactions: the page describes both (one DescribeTransactions per coordinator)
    producers = []
    for name in ("payments-tx", "refunds-tx"):
        producer = Producer({"bootstrap.servers": cluster_broker.bootstrap, "transactional.id": name})
        producer.init_transactions(POLL_TIMEOUT_S)
        producer.begin_transaction()
        producers.append(producer)
    producers[0].produce("payments", value=b"pending", partition=0)
    producers[1].produce("refunds", value=b"refund", partition=0)
    try:
        for producer in producers:
            assert producer.flush(POLL_TIMEOUT_S) == 0
        page.goto("/transactions")
        for name, partition in (("payments-tx", "payments-0"), ("refunds-tx", "refunds-0")):
            row = page.locator("#transactions tbody tr", has_text=name)
            expect(row).to_contain_text("Ongoing")
            expect(row).to_contain_text(partition)
    finally:
        for producer in producers:
            producer.abort_transaction(POLL_TIMEOUT_S)


def consume(consumer: Consumer, count: int) -> list[int]:
    """The offsets of the next ``count`` messages (bounded by POLL_TIMEOUT_S for each)."""
    offsets: list[int] = []
    while len(offsets) < count:
        message = consumer.poll(POLL_TIMEOUT_S)
        assert message is not None, f"no message within {POLL_TIMEOUT_S} s after {len(offsets)}"
        assert message.error() is None, message.error()
        offset = message.offset()
        assert offset is not None
        offsets.append(offset)
    return offsets


def test_the_schemas_page_without_a_registry_says_how_to_name_one(page: Page) -> None:
    page.goto("/")
    page.get_by_role("link", name="Schemas").click()
    expect(page.locator("#error")).to_have_text("No Schema Registry: start the console with --schema-registry-url URL")
