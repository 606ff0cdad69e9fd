"""The group coordinator built from its collaborators alone, no broker: a real replica manager
over logs in a tmp dir (tests/replication/replicas.py) holds __consumer_offsets, and a callable
stands in for the transaction coordinator."""

from __future__ import annotations

import asyncio

from strom.group.coordinator import GroupCoordinator
from strom.group.offset_store import OFFSETS_TOPIC
from strom.protocol.errors import ErrorCode
from strom.server.config import BrokerConfig
from tests.replication.replicas import Replicas, make_replicas

CONFIG = BrokerConfig.from_mapping({"offsets.topic.num.partitions": "3"})


def coordinator_over(replicas: Replicas, verified: list | None = None) -> GroupCoordinator:
    async def verify_txn_partitions(transactional_id, producer_id, producer_epoch, partitions):
        if verified is not None:
            verified.append((transactional_id, producer_id, producer_epoch, partitions))
        return {tp: ErrorCode.PRODUCER_FENCED for tp in partitions}

    coordinator = GroupCoordinator(
        CONFIG, replicas.metadata, replicas.manager, verify_txn_partitions=verify_txn_partitions
    )
    replicas.manager.leadership_listeners.append(coordinator.on_leadership_change)
    return coordinator


def offsets_of(coordinator: GroupCoordinator, group_id: str, partitions):
    code, found = coordinator.offsets.fetch_offsets(group_id, partitions)
    return code, {tp: None if committed is None else committed.offset for tp, committed in found.items()}


def test_committed_offsets_are_in_the_log_and_a_new_coordinator_loads_them(tmp_path):
    replicas = make_replicas(tmp_path)
    first = coordinator_over(replicas)
    assert first.coordinator_error("g") == ErrorCode.COORDINATOR_NOT_AVAILABLE  # no __consumer_offsets yet
    replicas.lead(OFFSETS_TOPIC, partitions=3)
    assert first.owned_partitions == {0, 1, 2} and first.coordinator_error("g") == ErrorCode.NONE

    async def commit() -> dict:
        return await first.offsets.commit_offsets(
            "g", -1, "", None, {("orders", 0): (41, -1, ""), ("orders", 1): (7, -1, "")}
        )

    assert asyncio.run(commit()) == {("orders", 0): ErrorCode.NONE, ("orders", 1): ErrorCode.NONE}
    wanted = [("orders", 0), ("orders", 1)]
    assert offsets_of(first, "g", wanted) == (ErrorCode.NONE, {("orders", 0): 41, ("orders", 1): 7})
    log = replicas.manager.partitions[(OFFSETS_TOPIC, first.store.partition_for("g"))].log
    assert log.high_watermark == 2  # the two offset records, committed

    second = coordinator_over(replicas)  # another coordinator taking the partitions over loads them
    for partition in [p for key, p in replicas.manager.partitions.items() if key[0] == OFFSETS_TOPIC]:
        second.on_leadership_change(partition, True)
    assert offsets_of(second, "g", wanted) == (ErrorCode.NONE, {("orders", 0): 41, ("orders", 1): 7})

    replicas.manager.fenced = True  # cut off from ZooKeeper: the cache may be stale, so it steps back
    assert second.coordinator_error("g") == ErrorCode.NOT_COORDINATOR


def test_a_txn_offset_commit_outside_an_open_transaction_asks_the_transaction_coordinator(tmp_path):
    replicas = make_replicas(tmp_path)
    verified: list = []
    coordinator = coordinator_over(replicas, verified)
    replicas.lead(OFFSETS_TOPIC, partitions=3)

    async def commit() -> dict:
        return await coordinator.offsets.commit_txn_offsets(
            "g", "tx", 4000, 2, "", -1, None, {("orders", 0): (5, -1, "")}
        )

    # the transaction coordinator answers PRODUCER_FENCED, which the client gets as Kafka's does
    assert asyncio.run(commit()) == {("orders", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert verified == [("tx", 4000, 2, [(OFFSETS_TOPIC, coordinator.store.partition_for("g"))])]
    assert offsets_of(coordinator, "g", [("orders", 0)]) == (ErrorCode.NONE, {("orders", 0): None})
