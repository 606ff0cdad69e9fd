"""Replication throttles: the token bucket and which replicas a broker throttles (Kafka's rules)."""

from __future__ import annotations

from strom.cluster.metadata_cache import MetadataCache, TopicInfo
from strom.replication.throttle import ALL, Quota, ReplicationQuotas, parse_replicas


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakePartition:
    def __init__(self, topic: str, index: int, isr: list[int]):
        self.topic, self.index, self.isr = topic, index, isr


def test_quota_allows_the_rate_over_time_and_at_most_one_second_of_burst():
    clock = Clock()
    quota = Quota(clock)
    assert not quota.exceeded()  # no rate: unlimited
    quota.set_rate(1000)
    assert quota.exceeded()  # starts empty: no burst at the start of a move
    clock.now += 0.5
    assert not quota.exceeded()
    quota.record(2000)  # one read may overshoot; the debt is paid back before the next
    clock.now += 1.0
    assert quota.exceeded()
    clock.now += 0.6
    assert not quota.exceeded()
    clock.now += 60  # idle time does not build up more than one second's worth
    quota.record(1000)
    assert quota.exceeded()
    assert quota.recorded == 3000


def test_throttled_replica_lists_name_partitions_per_broker():
    assert parse_replicas("0:1,1:2,2:1", 1) == {0, 2}
    assert parse_replicas("0:1,1:2", 3) == set()
    assert parse_replicas("*", 7) == {ALL}


def test_only_out_of_sync_replicas_of_listed_partitions_are_throttled():
    metadata = MetadataCache()
    metadata.broker_configs = {
        "1": {"leader.replication.throttled.rate": "500"},
        "<default>": {"follower.replication.throttled.rate": "700"},
    }
    metadata.topics = {
        "t": TopicInfo(
            "t",
            None,
            {0: [1, 2], 1: [1, 2]},  # type: ignore[arg-type]
            configs={"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "*"},
        )
    }
    quotas = ReplicationQuotas(1)
    quotas.update(metadata)
    assert quotas.leader.rate == 500 and quotas.follower.rate == 700
    assert quotas.leader_quota(FakePartition("t", 0, [1]), replica_id=2) is quotas.leader
    assert quotas.leader_quota(FakePartition("t", 0, [1, 2]), replica_id=2) is None  # in sync: never
    assert quotas.leader_quota(FakePartition("t", 1, [1]), replica_id=2) is None  # not listed
    assert quotas.follower_quota(FakePartition("t", 1, [2])) is quotas.follower  # "*"
    assert quotas.follower_quota(FakePartition("t", 1, [1, 2])) is None
    metadata.broker_configs = {}
    quotas.update(metadata)
    assert quotas.leader_quota(FakePartition("t", 0, [1]), replica_id=2) is None  # no rate: unlimited


def test_allowance_caps_a_throttled_read_to_what_the_quota_holds():
    clock = Clock()
    quota = Quota(clock)
    assert quota.allowance() == 2**31 - 1
    quota.set_rate(1000)
    clock.now += 0.25
    assert quota.allowance() == 250
    quota.record(400)
    assert quota.allowance() == 0
