"""What an acks=all write costs in follower fetches, counted by the leader's /metrics.

Each follower fetches the records of a write, and its next fetch (at the new log end) moves the
high watermark. A follower whose only news is that moved HW is answered once the next write's
records are there, or FOLLOWER_HW_LINGER_S later: under a steady load one fetch per follower
per write carries both, where answering the HW at once took two. The followers still learn the
final HW once the load stops.
"""

from __future__ import annotations

from confluent_kafka import Producer

from tests.cluster.conftest import create_topic, wait_until
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

TOPIC = "round-trips"
MESSAGES = 600
PACE_S = 0.002  # a steady load: a write every 2 ms, well inside the linger


def test_a_steady_acks_all_load_costs_about_one_fetch_per_follower_per_write(cluster_factory):
    cluster = cluster_factory(3, METRICS_ON)
    create_topic(cluster, TOPIC, 1, 3, {"min.insync.replicas": "3"})
    leader = cluster.leader(TOPIC, 0)
    followers = [b for b in cluster.brokers if b != leader]
    urls = {broker_id: metrics_url(b.data_dir) for broker_id, b in cluster.brokers.items()}

    def requests(name: str) -> float:
        return scrape(urls[leader]).value("kafka_network_requestmetrics_requests_total", request=name)

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, "enable.idempotence": True}
    )
    producer.produce(TOPIC, b"warm-up")
    assert producer.flush(30) == 0
    produces, fetches = requests("Produce"), requests("FetchFollower")
    for i in range(MESSAGES):
        producer.produce(TOPIC, b"m%05d" % i)
        producer.poll(PACE_S)
    assert producer.flush(60) == 0
    produces, fetches = requests("Produce") - produces, requests("FetchFollower") - fetches

    per_write = fetches / produces / len(followers)
    print(f"{produces:.0f} produce requests, {fetches:.0f} follower fetches: {per_write:.2f} per follower per write")
    assert produces >= MESSAGES / 10, produces  # the load was many writes, not a few batches
    assert per_write <= 1.5, per_write  # answering every HW move at once costs 2

    # once the load stops, every follower still learns the final high watermark
    end = MESSAGES + 1

    def followers_know_the_hw() -> bool:
        return all(
            scrape(urls[b]).value("kafka_cluster_partition_highwatermark", topic=TOPIC, partition="0") == end
            for b in followers
        )

    wait_until(followers_know_the_hw, 10, f"followers {followers} to learn high watermark {end}")
