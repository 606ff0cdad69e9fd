"""ListGroups filters as confluent-kafka's ``list_consumer_groups(states=..., types=...)`` sends them.

The state filter (v4, KIP-518) and the type filter (v5, KIP-848) are applied by the broker; librdkafka
sends the names as Kafka spells them ("Stable", "Consumer") and Kafka matches them case-insensitively.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, unique_topic, wait_until


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    overrides = {"offsets.topic.num.partitions": "1"}
    with BrokerProcess(tmp_path_factory.mktemp("list-groups") / "data", overrides) as process:
        yield process


def test_state_and_type_filters_with_confluent_kafka(shared_broker):
    bootstrap = shared_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = unique_topic("lg")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(WAIT_S)
    empty, classic, new = unique_topic("empty"), unique_topic("classic"), unique_topic("new")

    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": empty, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # a group with offsets only
    committer.close()
    members = [
        Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol})
        for group, protocol in ((classic, "classic"), (new, "consumer"))
    ]
    try:
        for member in members:
            member.subscribe([topic])

        def listing(**filters) -> dict[str, tuple[ConsumerGroupState, ConsumerGroupType]]:
            for member in members:
                member.poll(0.05)
            result = admin.list_consumer_groups(request_timeout=WAIT_S, **filters).result(WAIT_S)
            assert not result.errors, result.errors
            mine = (empty, classic, new)
            return {g.group_id: (g.state, g.type) for g in result.valid if g.group_id in mine}

        stable = {
            classic: (ConsumerGroupState.STABLE, ConsumerGroupType.CLASSIC),
            new: (ConsumerGroupState.STABLE, ConsumerGroupType.CONSUMER),
        }
        wait_until(lambda: listing(states={ConsumerGroupState.STABLE}) == stable, what="both groups stable")
        assert listing() == {**stable, empty: (ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC)}
        assert listing(states={ConsumerGroupState.EMPTY}) == {
            empty: (ConsumerGroupState.EMPTY, ConsumerGroupType.CLASSIC)
        }
        assert listing(types={ConsumerGroupType.CONSUMER}) == {new: stable[new]}
        assert listing(types={ConsumerGroupType.CLASSIC}, states={ConsumerGroupState.STABLE}) == {
            classic: stable[classic]
        }
        assert listing(types={ConsumerGroupType.CONSUMER}, states={ConsumerGroupState.EMPTY}) == {}
        assert set(listing(types={ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER})) == {empty, classic, new}
    finally:
        for member in members:
            member.close()
