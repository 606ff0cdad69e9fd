"""JSON Schema and Protobuf on a 3-broker cluster: confluent-kafka's serializers register through
a broker that does not lead the topic's partition (a write forwarded to the writer of _schemas
when it is not that broker either), and the partition's leader validates the ids from its own
view of _schemas at once; evolution, 409, soft and hard deletes and references alike."""

from __future__ import annotations

from tests.integration.test_protobuf_canonical import exercise_canonical
from tests.integration.test_protobuf_descriptors import exercise_descriptors
from tests.integration.test_schema_registry import registry_url
from tests.integration.test_schema_types import (
    exercise_combined,
    exercise_generated_protobuf,
    exercise_json,
    exercise_json_references,
    exercise_protobuf,
)
from tests.integration.test_schema_validation import create_topic


def test_json_and_protobuf_on_a_3_broker_cluster(cluster_factory):
    cluster = cluster_factory(overrides={"schema.registry.listeners": "http://127.0.0.1:0"})
    for exercise, delivered in ((exercise_json, 3), (exercise_protobuf, 4)):
        topic = create_topic(cluster.bootstrap, {"confluent.value.schema.validation": "true"}, replication=3)
        cluster.wait_full_isr(topic)
        leader = cluster.leader(topic, 0)
        other = next(broker_id for broker_id in cluster.brokers if broker_id != leader)
        exercise(cluster.bootstrap, registry_url(cluster.brokers[other]), topic)
        cluster.wait_logs_equal(topic)
        assert {broker_id: cluster.log_end(broker_id, topic, 0) for broker_id in cluster.brokers} == {
            broker_id: delivered for broker_id in cluster.brokers
        }  # the refused records reached no replica
    # references (a JSON $ref to another subject's schema; a Protobuf import registered as a
    # subject of its own), written through a broker that is not the writer of _schemas
    writer = cluster.leader("_schemas", 0)
    other = next(broker_id for broker_id in cluster.brokers if broker_id != writer)
    exercise_json_references(registry_url(cluster.brokers[other]))
    exercise_combined(registry_url(cluster.brokers[other]))  # oneOf/anyOf/allOf switches: Confluent's answers
    exercise_generated_protobuf(registry_url(cluster.brokers[other]), "statuses")
    # .proto text kept as written, registered through a broker that forwards to the writer
    exercise_canonical(registry_url(cluster.brokers[other]), registry_url(cluster.brokers[writer]))
    # descriptors stored as Confluent stores them; normalize=true's one id for a text and its descriptor
    exercise_descriptors(registry_url(cluster.brokers[other]), registry_url(cluster.brokers[writer]))
