"""Topic ACLs on KIP-848 subscriptions (Kafka 4.0, KAFKA-18813), with confluent-kafka consumers as
the SASL user alice: subscribing by name to a topic she may not Describe gets
TOPIC_AUTHORIZATION_FAILED; a regex subscription matches only the topics she may Describe."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AclOperation, NewTopic, ResourceType

from strom.cluster.zookeeper_server import free_port
from tests.broker_process import BrokerProcess
from tests.group.support import WAIT_S, wait_until
from tests.security.test_acls import Secured, overrides

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    sasl_port, plain_port = free_port(), free_port()
    settings = {
        **overrides(sasl_port, plain_port),
        "group.consumer.heartbeat.interval.ms": "300",
        "group.consumer.session.timeout.ms": "6000",
    }
    with BrokerProcess(tmp_path_factory.mktemp("subacls") / "data", settings) as broker:
        yield Secured(broker, sasl_port, plain_port)


def topics(secured: Secured, *names: str) -> None:
    futures = secured.admin().create_topics([NewTopic(n, 2, 1) for n in names], request_timeout=WAIT_S)
    for future in futures.values():
        future.result(timeout=WAIT_S)


def consumer(secured: Secured, group: str, subscription: list[str], assigned: set, errors: list) -> Consumer:
    c = Consumer(
        secured.config(
            "alice",
            **{
                "group.id": group,
                "group.protocol": "consumer",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
                "error_cb": lambda err: errors.append(err.code()),
            },
        )
    )
    c.subscribe(subscription, on_assign=lambda _c, ps: assigned.update((p.topic, p.partition) for p in ps))
    return c


def poll(c: Consumer, errors: list):
    def run() -> None:
        msg = c.poll(0.05)
        if msg is not None and msg.error() is not None:
            errors.append(msg.error().code())

    return run


def test_subscribing_by_name_to_a_topic_one_may_not_describe_is_refused(secured):
    tag = uuid.uuid4().hex[:8]
    allowed_topic, secret, group = f"ok-{tag}", f"secret-{tag}", f"g-{tag}"
    topics(secured, allowed_topic, secret)
    secured.allow(ResourceType.TOPIC, allowed_topic, "User:alice", AclOperation.DESCRIBE, AclOperation.READ)
    secured.allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ)
    assigned: set = set()
    errors: list = []
    c = consumer(secured, group, [allowed_topic, secret], assigned, errors)
    try:
        wait_until(
            lambda: KafkaError.TOPIC_AUTHORIZATION_FAILED in errors,
            WAIT_S,
            what="TOPIC_AUTHORIZATION_FAILED",
            tick=poll(c, errors),
        )
        assert not assigned
    finally:
        c.close()


def test_a_regex_subscription_matches_only_describable_topics(secured):
    tag = uuid.uuid4().hex[:8]
    visible, hidden, group = f"rx-{tag}-a", f"rx-{tag}-b", f"g-{tag}"
    topics(secured, visible, hidden)
    secured.allow(ResourceType.TOPIC, visible, "User:alice", AclOperation.DESCRIBE, AclOperation.READ)
    secured.allow(ResourceType.GROUP, group, "User:alice", AclOperation.READ)
    assigned: set = set()
    errors: list = []
    c = consumer(secured, group, [f"^rx-{tag}-.*"], assigned, errors)
    try:
        wait_until(lambda: assigned, WAIT_S, what="an assignment", tick=poll(c, errors))
        description = secured.admin().describe_consumer_groups([group], request_timeout=WAIT_S)[group].result(WAIT_S)
        targets = {(tp.topic, tp.partition) for m in description.members for tp in m.assignment.topic_partitions}
        assert assigned == targets == {(visible, 0), (visible, 1)}
        # bob may describe the group but not its topic: ConsumerGroupDescribe tells him nothing of it
        secured.allow(ResourceType.GROUP, group, "User:bob", AclOperation.DESCRIBE)
        future = secured.admin("bob").describe_consumer_groups([group], request_timeout=WAIT_S)[group]
        with pytest.raises(KafkaException) as refused:
            future.result(WAIT_S)
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()
