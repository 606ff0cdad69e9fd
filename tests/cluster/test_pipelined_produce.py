"""acks=all produces of one connection wait for their replicas together, and are answered in order.

Kafka mutes a connection while its acks=all request waits, so a producer's in-flight requests
are appended one replication round trip apart. strom appends each as it arrives and holds only
the answers: with the follower stopped, every one of the producer's in-flight requests is in the
leader's log before any is answered, and once the follower runs again they are acknowledged in
the order they were sent.
"""

from __future__ import annotations

import os
import signal

from confluent_kafka import Producer

from tests.cluster.conftest import create_topic, wait_until
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

TOPIC = "pipelined"
IN_FLIGHT = 4
# the follower stays stopped for seconds: neither its session nor its ISR membership may lapse
OVERRIDES = {**METRICS_ON, "zookeeper.session.timeout.ms": "30000", "replica.lag.time.max.ms": "30000"}


def test_in_flight_acks_all_requests_are_appended_together_and_answered_in_order(cluster_factory):
    cluster = cluster_factory(2, OVERRIDES)
    create_topic(cluster, TOPIC, 1, 2, {"min.insync.replicas": "2"})
    leader = cluster.leader(TOPIC, 0)
    follower = next(b for b in cluster.brokers if b != leader)
    leader_metrics = metrics_url(cluster.brokers[leader].data_dir)

    def log_end() -> float:
        return scrape(leader_metrics).value("kafka_log_log_logendoffset", topic=TOPIC, partition="0")

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "batch.num.messages": 1,  # one request per message
            "request.timeout.ms": 60000,
        }
    )
    producer.produce(TOPIC, b"warm-up")
    assert producer.flush(30) == 0

    acknowledged: list[tuple[bytes, int]] = []

    def delivered(err, msg):
        assert err is None, err
        acknowledged.append((msg.value(), msg.offset()))

    follower_pid = cluster.brokers[follower].process.pid
    os.kill(follower_pid, signal.SIGSTOP)
    try:
        for i in range(IN_FLIGHT):
            producer.produce(TOPIC, b"m%d" % i, on_delivery=delivered)
            producer.poll(0.05)  # each in its own request, all in flight at once
        # all appended while none can be acknowledged (the only other in-sync replica is stopped)
        wait_until(lambda: log_end() == 1 + IN_FLIGHT, 20, f"{IN_FLIGHT} in-flight requests in the leader's log")
        assert producer.poll(0.5) == 0 and acknowledged == []
    finally:
        os.kill(follower_pid, signal.SIGCONT)
    assert producer.flush(60) == 0
    assert acknowledged == [(b"m%d" % i, 1 + i) for i in range(IN_FLIGHT)]
