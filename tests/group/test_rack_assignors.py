"""Rack-aware server-side assignment: balance first, then members next to their partitions'
replicas, then stickiness; with no racks the assignors behave as before."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from strom.group.assignors import AssignmentSpec, range_, uniform
from strom.group.consumer_state import cancel_timers
from tests.group.test_consumer_group import T, make


def spec(subs, counts, racks=None, partition_racks=None, previous=None) -> AssignmentSpec:
    return AssignmentSpec(
        {m: frozenset(t) for m, t in subs.items()},
        counts,
        previous or {},
        racks or {},
        {t: [frozenset(r) for r in rs] for t, rs in (partition_racks or {}).items()},
    )


RACKS = {"t": ["a", "b", "c", "a", "b", "c"]}


def test_uniform_gives_each_member_the_partitions_of_its_rack():
    result = uniform(spec({"x": ["t"], "y": ["t"], "z": ["t"]}, {"t": 6}, {"x": "c", "y": "a", "z": "b"}, RACKS))
    assert result == {"x": {"t": {2, 5}}, "y": {"t": {0, 3}}, "z": {"t": {1, 4}}}


def test_uniform_puts_balance_before_locality():
    result = uniform(spec({"x": ["t"], "y": ["t"]}, {"t": 6}, {"x": "a", "y": "b"}, {"t": ["a"] * 5 + ["b"]}))
    assert sorted(len(r["t"]) for r in result.values()) == [3, 3] and 5 in result["y"]["t"]


def test_uniform_moves_a_remote_partition_to_a_member_next_to_it():
    previous = {"x": {"t": frozenset({0, 1, 2})}, "y": {"t": frozenset({3, 4, 5})}}
    result = uniform(spec({"x": ["t"], "y": ["t"]}, {"t": 6}, {"x": "a", "y": "b"}, {"t": list("aabbba")}, previous))
    assert result == {"x": {"t": {0, 1, 5}}, "y": {"t": {2, 3, 4}}}
    # without racks it stays where it was
    assert uniform(spec({"x": ["t"], "y": ["t"]}, {"t": 6}, previous=previous))["x"] == {"t": {0, 1, 2}}


def test_range_takes_local_partitions_within_its_share_and_keeps_co_partitioning():
    subs = {"m1": ["t", "u"], "m2": ["t", "u"]}
    counts = {"t": 4, "u": 4}
    plain = range_(spec(subs, counts))
    assert plain == {"m1": {"t": {0, 1}, "u": {0, 1}}, "m2": {"t": {2, 3}, "u": {2, 3}}}
    racks = {"t": list("aabb"), "u": list("aabb")}
    aware = range_(spec(subs, counts, {"m1": "b", "m2": "a"}, racks))
    assert aware == {"m1": {"t": {2, 3}, "u": {2, 3}}, "m2": {"t": {0, 1}, "u": {0, 1}}}
    # every partition in every rack: nothing to gain, the plain ranges
    assert range_(spec(subs, counts, {"m1": "b", "m2": "a"}, {"t": ["ab"] * 4, "u": ["ab"] * 4})) == plain


def test_a_group_assigns_by_the_racks_of_its_members_and_the_brokers():
    c = make(topics={"t": (T, 4)})
    brokers = {1: SimpleNamespace(rack="a"), 2: SimpleNamespace(rack="b")}
    c.metadata.brokers = brokers
    c.metadata.topics["t"].replicas = {0: [1], 1: [1], 2: [2], 3: [2]}

    async def heartbeat(member: str, rack: str):
        return await c.consumer.heartbeats.heartbeat(
            "g", member, 0, None, rack, 30000, ["t"], None, None, {}, "client", "/h", 1
        )

    async def scenario():
        await heartbeat("x", "b")
        await heartbeat("y", "a")
        group = c.consumer.groups["g"]
        assert group.target == {"x": {T: frozenset({2, 3})}, "y": {T: frozenset({0, 1})}}
        for member in group.members.values():
            cancel_timers(member)

    asyncio.run(scenario())
