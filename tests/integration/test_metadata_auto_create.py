"""A Metadata request that auto-creates a topic is answered as Kafka answers it, at every version:
LEADER_NOT_AVAILABLE and no partitions ("being created"); the client asks again and then sees
them. strom used to answer with the new topic's partitions at once, and a client that deleted a
topic and then asked for it with auto-creation allowed saw partitions where it expects none (a Go
client's test of exactly that failed against strom).
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.integration.clients import (
    RawClient,
    confluent_consume,
    confluent_produce,
    module_broker,  # noqa: F401 (a fixture)
    sample_messages,
    unique_topic,
    wait_until,
)

MAX_VERSION = 13


def metadata(client: RawClient, version: int, topic: str, create: bool = True):
    request = {"topics": [{"name": topic}]}
    if version >= 4:
        request["allow_auto_topic_creation"] = create
    [entry] = client.request(ApiKey.METADATA, version, request).topics
    return entry


def test_auto_creation_answers_being_created_then_the_partitions_at_every_version(module_broker):  # noqa: F811
    with RawClient(module_broker.bootstrap) as client:
        for version in range(MAX_VERSION + 1):
            topic = unique_topic(f"auto-v{version}")
            first = metadata(client, version, topic)
            assert (first.error_code, list(first.partitions)) == (ErrorCode.LEADER_NOT_AVAILABLE, []), version
            later = wait_until(
                lambda t=topic, v=version: (e := metadata(client, v, t)).error_code == ErrorCode.NONE and e,
                what=f"{topic} to be created (Metadata v{version})",
            )
            assert [p.partition_index for p in later.partitions] == [0], version
            assert later.partitions[0].leader_id >= 0


def test_a_deleted_topic_asked_for_with_auto_creation_has_no_partitions(module_broker):  # noqa: F811
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    topic = unique_topic("deleted")
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(10)
    admin.delete_topics([topic], operation_timeout=10)[topic].result(10)
    with RawClient(module_broker.bootstrap) as client:
        wait_until(
            lambda: metadata(client, 9, topic, create=False).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            what=f"{topic} to be gone",
        )
        # gone, then asked for with auto-creation allowed: re-created, but no partitions to see yet
        again = metadata(client, 12, topic)
        assert (again.error_code, list(again.partitions)) == (ErrorCode.LEADER_NOT_AVAILABLE, [])


def test_producing_to_a_new_topic_still_delivers(module_broker):  # noqa: F811
    """librdkafka retries LEADER_NOT_AVAILABLE as it does against Kafka: nothing is lost."""
    topic = unique_topic("auto-produce")
    sent = sample_messages(5)
    assert confluent_produce(module_broker.bootstrap, topic, sent) == list(range(5))
    assert [m.value for m in confluent_consume(module_broker.bootstrap, topic, 5)] == [m.value for m in sent]
