"""Schema id validation on produce on a 3-broker cluster: the topic's leader checks ids against its
own view of _schemas (a follower replica's, when another broker leads _schemas), so a schema
registered through one broker validates a produce led by another at once."""

from __future__ import annotations

from tests.integration.test_protobuf_record_name_validation import STRATEGY, exercise_record_names
from tests.integration.test_schema_registry import registry_url
from tests.integration.test_schema_validation import create_topic, described, exercise_validation


def test_validation_on_a_3_broker_cluster(cluster_factory):
    cluster = cluster_factory(overrides={"schema.registry.listeners": "http://127.0.0.1:0"})
    topic = create_topic(cluster.bootstrap, {"redpanda.value.schema.id.validation": "true"}, replication=3)
    assert described(cluster.bootstrap, topic)["confluent.value.schema.validation"] == "true"
    cluster.wait_full_isr(topic)
    leader = cluster.leader(topic, 0)
    other = next(broker_id for broker_id in cluster.brokers if broker_id != leader)
    exercise_validation(
        cluster.bootstrap, registry_url(cluster.brokers[other]), topic, cluster.brokers[leader].bootstrap
    )
    cluster.wait_logs_equal(topic)
    assert {broker_id: cluster.log_end(broker_id, topic, 0) for broker_id in cluster.brokers} == {
        broker_id: 404 for broker_id in cluster.brokers
    }  # the refused batches reached no replica (4 valid records, then 2 compressed batches of 200)


def test_protobuf_record_names_on_a_3_broker_cluster(cluster_factory):
    """RecordNameStrategy on Protobuf records, checked by a topic leader that does not lead
    _schemas (tests/integration/test_protobuf_record_name_validation.py)."""
    cluster = cluster_factory(overrides={"schema.registry.listeners": "http://127.0.0.1:0"})
    topic = create_topic(
        cluster.bootstrap,
        {"confluent.value.schema.validation": "true", "confluent.value.subject.name.strategy": STRATEGY},
        replication=3,
    )
    cluster.wait_full_isr(topic)
    leader = cluster.leader(topic, 0)
    other = next(broker_id for broker_id in cluster.brokers if broker_id != leader)
    exercise_record_names(
        cluster.bootstrap,
        registry_url(cluster.brokers[other]),
        topic,
        cluster.brokers[leader].bootstrap,
    )
    cluster.wait_logs_equal(topic)
    assert {cluster.log_end(broker_id, topic, 0) for broker_id in cluster.brokers} == {4}
