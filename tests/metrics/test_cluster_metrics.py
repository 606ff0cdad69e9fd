"""A 3-broker cluster (real ZooKeeper) under a real client: /metrics agrees with what the test did.

Messages in is exact. Bytes in is Kafka's accounting: the record batches as the producer sent
them, i.e. a 61-byte header per batch plus each record's varint framing around its key and
value (7 to 21 bytes for these sizes); the test checks it three ways: equal to the bytes the
leaders' logs hold, equal to half of what the two followers of each partition replicated, and
within the framing bounds of the payload. Stopping a follower (SIGSTOP) makes
UnderReplicatedPartitions rise, and resuming it brings it back to 0.
"""

from __future__ import annotations

import os
import signal

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.conftest import create_topic, wait_until
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

TOPIC = "metered"
PARTITIONS = 3
MESSAGES = 1500
BATCH_HEADER = 61
GROUP = "halfway"


def test_counters_agree_with_the_load_and_under_replication_follows_a_stopped_follower(cluster_factory):
    cluster = cluster_factory(3, METRICS_ON)
    create_topic(cluster, TOPIC, PARTITIONS, 3)
    urls = {broker_id: metrics_url(b.data_dir) for broker_id, b in cluster.brokers.items()}

    def scrapes(ids=None):
        return {b: scrape(urls[b]) for b in (ids if ids is not None else urls)}

    def total(name, ids=None, **labels):
        return sum(s.total(name, **labels) for s in scrapes(ids).values())

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "none"}
    )
    payload = 0
    for i in range(MESSAGES):
        key, value = b"key-%05d" % i, b"value-" + b"x" * (i % 50)
        payload += len(key) + len(value)
        producer.produce(TOPIC, key=key, value=value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    stored = cluster.wait_logs_equal(TOPIC)
    batches = sum(len(b) for b in stored.values())

    now = scrapes()
    messages_in = sum(s.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) for s in now.values())
    bytes_in = sum(s.value("kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) for s in now.values())
    assert messages_in == MESSAGES
    assert sum(s.value("kafka_server_brokertopicmetrics_messagesin_total") for s in now.values()) == MESSAGES
    # what the leaders appended is what their logs hold, and what each partition's two followers copied
    leader_logs = sum(
        now[cluster.leader(TOPIC, p)].value("kafka_log_log_size", topic=TOPIC, partition=str(p))
        for p in range(PARTITIONS)
    )
    assert bytes_in == leader_logs
    assert (
        sum(s.value("kafka_server_brokertopicmetrics_replicationbytesin_total") for s in now.values()) == 2 * bytes_in
    )
    records = bytes_in - BATCH_HEADER * batches
    assert payload + 7 * MESSAGES <= records <= payload + 21 * MESSAGES, (payload, records, batches)
    for p in range(PARTITIONS):
        leader = now[cluster.leader(TOPIC, p)]
        end = len(range(p, MESSAGES, PARTITIONS))
        assert leader.value("kafka_log_log_logendoffset", topic=TOPIC, partition=str(p)) == end
        assert leader.value("kafka_cluster_partition_highwatermark", topic=TOPIC, partition=str(p)) == end
        assert leader.value("kafka_log_log_logstartoffset", topic=TOPIC, partition=str(p)) == 0
    assert sum(s.value("kafka_network_requestmetrics_requests_total", request="Produce") for s in now.values()) > 0
    assert (
        sum(s.value("kafka_network_requestmetrics_requests_total", request="FetchFollower") for s in now.values()) > 0
    )
    assert sum(s.value("kafka_controller_kafkacontroller_activecontrollercount") for s in now.values()) == 1
    assert sum(s.value("kafka_server_replicamanager_leadercount") for s in now.values()) == PARTITIONS
    assert all(s.value("kafka_server_replicamanager_partitioncount") == PARTITIONS for s in now.values())
    assert all(s.value("kafka_server_replicamanager_underreplicatedpartitions") == 0 for s in now.values())

    # a group that committed half of each partition: its coordinator reports end - committed
    ends = {p: len(range(p, MESSAGES, PARTITIONS)) for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, ends[p] // 2) for p in ends], asynchronous=False)
    finally:
        consumer.close()

    def lags():
        found = {}
        for s in scrapes().values():
            for labels, value in s.samples.get("kafka_consumergroup_lag", []):
                if labels["consumergroup"] == GROUP:
                    assert int(labels["partition"]) not in found, "lag reported by two brokers"
                    found[int(labels["partition"])] = value
        return found

    expected = {p: float(ends[p] - ends[p] // 2) for p in ends}
    wait_until(lambda: lags() == expected, 20, f"consumer lag {expected}", interval_s=0.2)
    assert total("kafka_consumergroup_current_offset", consumergroup=GROUP, topic=TOPIC) == sum(
        ends[p] // 2 for p in ends
    )
    assert total("kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC) == sum(expected.values())
    assert total("kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1

    # stop a follower that is not the controller: every partition (RF 3 on 3 brokers) loses it
    controller = cluster.controller()
    victim = next(b for b in cluster.brokers if b != controller)
    live = [b for b in cluster.brokers if b != victim]
    led_by_victim = sum(1 for p in range(PARTITIONS) if cluster.leader(TOPIC, p) == victim)
    shrinks_before = total("kafka_server_replicamanager_isrshrinks_total", live)
    pid = cluster.brokers[victim].process.pid
    all_partitions = PARTITIONS + 3  # and __consumer_offsets' 3, created by the commit
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: total("kafka_server_replicamanager_underreplicatedpartitions", live) == all_partitions,
            45,
            f"{all_partitions} under-replicated partitions on brokers {live}",
            interval_s=0.25,
        )
        assert total("kafka_server_replicamanager_isrshrinks_total", live) > shrinks_before or led_by_victim
        assert total("kafka_server_replicamanager_leadercount", live) == all_partitions
        assert total("kafka_controller_kafkacontroller_offlinepartitionscount", live) == 0
        if led_by_victim:  # its leaderships were taken over by elections on the controller
            assert total("kafka_controller_controllerstats_leaderelectionrateandtimems_count", live) >= led_by_victim
    finally:
        os.kill(pid, signal.SIGCONT)
    expands_before = total("kafka_server_replicamanager_isrexpands_total", live)
    wait_until(
        lambda: total("kafka_server_replicamanager_underreplicatedpartitions") == 0,
        45,
        "no under-replicated partition on any broker",
        interval_s=0.25,
    )
    assert total("kafka_server_replicamanager_isrexpands_total") > expands_before
    assert total("kafka_controller_kafkacontroller_activecontrollercount") == 1
