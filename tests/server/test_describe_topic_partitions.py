"""DescribeTopicPartitions (KIP-966) on the wire, as Kafka 3.7+'s admin client pages through it.

librdkafka describes topics with Metadata and the Java admin client (the main user) is not installed
here, so most tests send kio-encoded requests over a socket to a real broker and follow
``next_cursor`` the way the Java client's ``describeTopics`` does; kafka-python 3's
``describe_topic_partitions`` is the one real client that calls it.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient, unique_topic, wait_until

ZERO_UUID = None  # kio reads the all-zero topic id (what Kafka sends for "none") as None
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (KIP-430 bits 3-8, 10, 11)
TOPIC_OPERATIONS = 3576


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    overrides = {"max.request.partition.size.limit": "7", "offsets.topic.num.partitions": "1"}
    with BrokerProcess(tmp_path_factory.mktemp("dtp") / "data", overrides) as process:
        yield process


def create(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, p, 1) for n, p in topics.items()]).values():
        future.result(WAIT_S)


def describe(client: RawClient, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    body = {
        "topics": [{"name": n} for n in names],
        "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]},
    }
    return client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, body)


def page_through(client: RawClient, names: list[str], limit: int) -> list[list[tuple[str, list[int]]]]:
    """What the Java admin client does: ask again from next_cursor until there is none."""
    pages, cursor = [], None
    for _ in range(100):
        response = describe(client, names, limit, cursor)
        pages.append([(t.name, [p.partition_index for p in t.partitions]) for t in response.topics])
        if response.next_cursor is None:
            return pages
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    raise AssertionError(f"no last page after 100 requests: {pages[-3:]}")


def test_partitions_topic_ids_and_leaders_match_metadata(shared_broker):
    base = unique_topic("dtp")
    a, b, missing = f"{base}-a", f"{base}-b", f"{base}-missing"
    create(shared_broker.bootstrap, {a: 3, b: 1, "__consumer_offsets": 1})
    with RawClient(shared_broker.bootstrap) as client:
        metadata = client.request(ApiKey.METADATA, 12, {"topics": [{"name": a}, {"name": b}]})
        response = describe(client, [b, a, missing, "bad/name", a])
        internal = describe(client, ["__consumer_offsets"]).topics[0]
    assert response.next_cursor is None
    # sorted by name, duplicates once; unknown and invalid names are answered, not created
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        (a, ErrorCode.NONE),
        (b, ErrorCode.NONE),
        (missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    by_name = {t.name: t for t in response.topics}
    for expected in metadata.topics:
        got = by_name[expected.name]
        assert (got.topic_id, got.is_internal) == (expected.topic_id, False)
        assert got.topic_id != ZERO_UUID
        assert got.topic_authorized_operations == TOPIC_OPERATIONS  # no authorizer: everything
        assert [
            (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in got.partitions
        ] == [
            (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in sorted(expected.partitions, key=lambda p: p.partition_index)
        ]
        for p in got.partitions:
            assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ((), (), ())
    assert (by_name[missing].topic_id, by_name[missing].partitions) == (ZERO_UUID, ())
    assert by_name[missing].topic_authorized_operations == TOPIC_OPERATIONS  # Kafka fills it for errors too
    assert (internal.error_code, internal.is_internal) == (ErrorCode.NONE, True)


def test_pagination_follows_the_cursor_like_the_java_client(shared_broker):
    base = unique_topic("page")
    names = [f"{base}-a", f"{base}-b", f"{base}-c", f"{base}-d"]
    create(shared_broker.bootstrap, {names[0]: 5, names[1]: 2, names[2]: 1, names[3]: 3})
    with RawClient(shared_broker.bootstrap) as client:
        # a limit inside a topic: the cursor names that topic's next partition
        assert page_through(client, names, 3) == [
            [(names[0], [0, 1, 2])],
            [(names[0], [3, 4]), (names[1], [0])],
            [(names[1], [1]), (names[2], [0]), (names[3], [0])],
            [(names[3], [1, 2])],
        ]
        # a limit on a topic boundary: the cursor names the next topic at partition 0
        first = describe(client, names, 7)
        assert [(t.name, len(t.partitions)) for t in first.topics] == [(names[0], 5), (names[1], 2)]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (names[2], 0)
        # the broker's max.request.partition.size.limit (7 here) caps a larger request limit
        assert [len(page) for page in page_through(client, names, 2000)] == [2, 2]
        # a cursor past a topic's last partition: that topic comes back with no partitions
        beyond = describe(client, names[3:], 10, (names[3], 9))
        assert [(t.name, t.error_code, t.partitions) for t in beyond.topics] == [(names[3], ErrorCode.NONE, ())]
        assert beyond.next_cursor is None
        # a cursor on a topic that no longer exists (deleted between pages): the listing goes on after it
        gone = describe(client, [*names, f"{base}-b2"], 10, (f"{base}-b2", 1))
        assert [t.name for t in gone.topics] == [f"{base}-b2", names[2], names[3]]
        assert gone.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # limit 0: nothing served, the cursor points at the first topic (Kafka's answer too)
        empty = describe(client, names, 0)
        assert empty.topics == () and (empty.next_cursor.topic_name, empty.next_cursor.partition_index) == (
            names[0],
            0,
        )


def test_all_topics_listing_pages_through_every_topic(shared_broker):
    base = unique_topic("all")
    create(shared_broker.bootstrap, {f"{base}-x": 4, f"{base}-y": 4})
    with RawClient(shared_broker.bootstrap) as client:
        pages = page_through(client, [], 3)
        listing = [(name, p) for page in pages for name, partitions in page for p in partitions]
        metadata = client.request(ApiKey.METADATA, 12, {"topics": None})
    expected = sorted((t.name, p.partition_index) for t in metadata.topics for p in t.partitions)
    assert listing == expected  # every partition exactly once, in name order
    assert [sum(len(ps) for _, ps in page) for page in pages[:-1]] == [3] * (len(pages) - 1)


def test_invalid_cursors_get_invalid_request(shared_broker):
    name = unique_topic("cur")
    create(shared_broker.bootstrap, {name: 1})
    with RawClient(shared_broker.bootstrap) as client:
        not_listed = describe(client, [name], 10, (name + "-other", 0))
        negative = describe(client, [name], 10, (name, -1))
        negative_all = describe(client, [], 10, (name, -1))
        assert client.request(ApiKey.METADATA, 12, {"topics": [{"name": name}]}).topics[0].error_code == 0
    for response in (not_listed, negative):
        assert [(t.name, t.error_code, t.topic_id, t.partitions) for t in response.topics] == [
            (name, ErrorCode.INVALID_REQUEST, ZERO_UUID, ())
        ]
        assert response.next_cursor is None
    assert negative_all.topics == ()


@pytest.fixture(scope="module")
def authorized_broker(tmp_path_factory):
    overrides = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",  # topics without ACLs stay visible to User:ANONYMOUS
        "offsets.topic.num.partitions": "1",
    }
    with BrokerProcess(tmp_path_factory.mktemp("dtp-acl") / "data", overrides) as process:
        yield process


def test_topics_without_describe_are_hidden_as_in_metadata(authorized_broker):
    base = unique_topic("auth")
    visible, hidden, missing = f"{base}-seen", f"{base}-unseen", f"{base}-ghost"
    create(authorized_broker.bootstrap, {visible: 2, hidden: 1})
    admin = AdminClient({"bootstrap.servers": authorized_broker.bootstrap})
    binding = AclBinding(
        ResourceType.TOPIC,
        hidden,
        ResourcePatternType.LITERAL,
        "User:someone-else",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(WAIT_S)  # now the topic has ACLs, none of them for User:ANONYMOUS
    with RawClient(authorized_broker.bootstrap) as client:
        wait_until(
            lambda: describe(client, [hidden]).topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            what="the new ACL to apply",
        )
        named = describe(client, [hidden, missing, visible])
        listed = page_through(client, [], 2000)
        metadata_names = {t.name for t in client.request(ApiKey.METADATA, 12, {"topics": None}).topics}
    # the denied topic comes last, with no topic id and no partitions: its existence is not disclosed
    assert [(t.name, t.error_code) for t in named.topics] == [
        (missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (visible, ErrorCode.NONE),
        (hidden, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert (named.topics[2].topic_id, named.topics[2].partitions) == (ZERO_UUID, ())
    assert named.topics[1].topic_authorized_operations == TOPIC_OPERATIONS
    listed_names = {name for page in listed for name, _ in page}
    assert visible in listed_names and hidden not in listed_names
    assert listed_names == metadata_names  # the same view as an all-topics Metadata request


def test_kafka_python_describe_topic_partitions_pages_with_the_cursor(shared_broker):
    """kafka-python 3's KafkaAdminClient.describe_topic_partitions: a real client's request and parsing."""
    from kafka import KafkaAdminClient

    base = unique_topic("kp")
    names = [f"{base}-a", f"{base}-b"]
    create(shared_broker.bootstrap, {names[0]: 3, names[1]: 2})
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        seen, cursor = [], None
        for _ in range(10):
            page = admin.describe_topic_partitions(names, response_partition_limit=2, cursor=cursor)
            seen.append([(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        whole = admin.describe_topic_partitions(names)
    finally:
        admin.close()
    assert seen == [[(names[0], [0, 1])], [(names[0], [2]), (names[1], [0])], [(names[1], [1])]]
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in whole["topics"]] == [
        (names[0], 0, 3),
        (names[1], 0, 2),
    ]
    assert all(p["leader_id"] == 0 and p["isr_nodes"] == [0] for t in whole["topics"] for p in t["partitions"])
