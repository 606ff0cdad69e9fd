"""A topic created through one broker, then named at once in a Metadata request to another.

The other broker learns of the topic from its ZooKeeper watch a few milliseconds later. Until
then the topic is unknown to it, so with auto.create.topics.enable it tries to create it and
finds it made. Kafka answers LEADER_NOT_AVAILABLE there ("let it go, possibly another broker
created this topic"), which every client retries. strom answered TOPIC_ALREADY_EXISTS, and
librdkafka failed the messages it held for the topic: `kcat -P` right after a CreateTopics
exited with "Broker: Topic already exists" in one run of three (found by strom.bench.replication).
"""

from __future__ import annotations

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.cluster.conftest import wait_until
from tests.integration.clients import RawClient

TOPICS = 10


def _create(client: RawClient, name: str) -> None:
    created = client.request(
        ApiKey.CREATE_TOPICS,
        5,
        {
            "topics": [{"name": name, "num_partitions": 1, "replication_factor": 2, "assignments": [], "configs": []}],
            "timeout_ms": 10_000,
            "validate_only": False,
        },
    )
    assert [t.error_code for t in created.topics] == [ErrorCode.NONE], created


def _metadata(client: RawClient, name: str):
    return client.request(ApiKey.METADATA, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": True}).topics[0]


def test_a_topic_another_broker_just_created_is_being_created_not_an_error(cluster_factory):
    cluster = cluster_factory(2)
    first, second = (cluster.brokers[b].bootstrap for b in sorted(cluster.brokers))
    seen = []
    with RawClient(first) as creator, RawClient(second) as asker:
        for i in range(TOPICS):
            name = f"just-made-{i}"
            _create(creator, name)
            seen.append(_metadata(asker, name).error_code)
    # the window is a few milliseconds wide: most of these requests land in it
    assert set(seen) <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, seen
    with RawClient(second) as asker:
        for i in range(TOPICS):
            name = f"just-made-{i}"
            wait_until(
                lambda n=name: _metadata(asker, n).error_code == ErrorCode.NONE, 10, f"{name} on the second broker"
            )
            assert len(_metadata(asker, name).partitions) == 1
