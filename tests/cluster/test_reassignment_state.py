"""Reassignment state as Kafka's ZooKeeper mode writes it, and the partition state a finished move leaves."""

from __future__ import annotations

import json

from strom.cluster.model import PartitionState, TopicAssignment
from strom.cluster.reassignment import settled_state, validate_target
from strom.protocol.errors import ErrorCode


def test_topic_znode_records_a_move_with_adding_and_removing_replicas():
    moving = TopicAssignment("t", {0: [4, 2, 3, 1], 1: [1, 2, 3]}, adding={0: [4]}, removing={0: [1]})
    value = json.loads(moving.to_json())
    assert value["partitions"] == {"0": [4, 2, 3, 1], "1": [1, 2, 3]}
    assert value["adding_replicas"] == {"0": [4]} and value["removing_replicas"] == {"0": [1]}
    back = TopicAssignment.from_json("t", moving.to_json())
    assert back.target(0) == [4, 2, 3] and back.original(0) == [2, 3, 1]
    assert back.target(1) == back.original(1) == [1, 2, 3]
    idle = json.loads(TopicAssignment("t", {0: [1]}).to_json())
    assert idle["adding_replicas"] == {} and idle["removing_replicas"] == {}


def test_finished_move_leaves_the_preferred_target_replica_leading_and_the_isr_within_the_target():
    state = PartitionState(leader=1, leader_epoch=5, isr=[1, 2, 3, 4])
    done = settled_state(state, [4, 2, 3], live={1, 2, 3, 4}, controller_epoch=2)
    assert done == PartitionState(4, 6, [2, 3, 4], 2)
    # the leader stays when it is the preferred target replica; only the ISR shrinks
    assert settled_state(PartitionState(2, 1, [1, 2, 3]), [2, 3], {1, 2, 3}, 1) == PartitionState(2, 2, [2, 3], 1)
    assert settled_state(PartitionState(2, 1, [2, 3]), [2, 3], {2, 3}, 1) is None
    # without prefer (a replaced move), only a leaving leader moves
    assert settled_state(PartitionState(2, 1, [1, 2, 3]), [3, 2, 1], {1, 2, 3}, 1, prefer=False) is None


def test_targets_are_checked_as_kafka_checks_them():
    live = {1, 2, 3}
    assert validate_target([1, 2], [1, 2], live) is None
    for bad, words in (([], "Empty"), ([1, 1], "Duplicate"), ([-1, 2], "Invalid broker id"), ([1, 9], "not alive")):
        result = validate_target(bad, [1, 2], live)
        assert result.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and words in result.message
    assert validate_target([1, 2], [1, 2], set()) is None  # only added replicas must be alive
