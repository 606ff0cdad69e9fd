"""The replica manager built from its collaborators alone (tests/replication/replicas.py), no broker."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from strom.cluster import model
from strom.protocol.errors import NotLeaderError, UnknownTopicOrPartitionError
from tests.replication.replicas import make_replicas
from tests.storage.helpers import make_batch


def test_a_leader_appends_counts_and_commits_at_once_with_an_isr_of_one(tmp_path):
    replicas = make_replicas(tmp_path, broker_id=1)
    replicas.lead("orders", partitions=2)
    manager = replicas.manager
    assert sorted(manager.partitions) == [("orders", 0), ("orders", 1)]
    assert (tmp_path / "logs" / "orders-1").is_dir()  # the log manager made the logs

    async def produce() -> tuple[int, int]:
        first = manager.append("orders", 1, make_batch(3), -1)
        second = await manager.append_committed("orders", 1, make_batch(2), 5.0)
        return first.first_offset, second.last_offset

    assert asyncio.run(produce()) == (0, 4)
    assert manager.partitions[("orders", 1)].log.high_watermark == 5
    counters = replicas.stats.topic("orders")
    assert (counters.messages_in, counters.produce_requests) == (5, 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.append("elsewhere", 0, make_batch(1), -1)
    manager.fenced = True  # cut off from ZooKeeper: leads nothing
    with pytest.raises(NotLeaderError):
        manager.append("orders", 1, make_batch(1), -1)


def test_a_follower_that_falls_behind_leaves_the_isr_in_the_store_with_the_controller_epoch(tmp_path):
    replicas = make_replicas(tmp_path, broker_id=1, replica_lag_time_max_ms=10, replica_fetch_wait_max_ms=5)
    replicas.controller_epoch = 7
    replicas.lead("orders", replicas=[1, 2])
    assert replicas.manager.partitions[("orders", 0)].isr == [1, 2]
    time.sleep(0.05)  # broker 2 never fetches
    replicas.manager.shrink_isrs()
    data, _ = replicas.store.get(model.partition_state_path("orders", 0))
    written = json.loads(data)
    assert (written["isr"], written["leader"], written["controller_epoch"]) == ([1], 1, 7)
    assert replicas.manager.partitions[("orders", 0)].isr == [1]
    assert replicas.stats.isr_shrinks == 1
    assert replicas.reloads == []
