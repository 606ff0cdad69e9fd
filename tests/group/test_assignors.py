"""The server-side assignors of the consumer group protocol (KIP-848)."""

from __future__ import annotations

from strom.group.assignors import AssignmentSpec, assignor_name, range_, uniform


def counts(result) -> dict[str, int]:
    return {m: sum(len(p) for p in topics.values()) for m, topics in result.items()}


def flat(result) -> list[tuple[str, int]]:
    return sorted((t, p) for topics in result.values() for t, parts in topics.items() for p in parts)


def test_uniform_balances_six_partitions_over_three_members():
    spec = AssignmentSpec({m: frozenset({"t"}) for m in ("a", "b", "c")}, {"t": 6}, {})
    result = uniform(spec)
    assert counts(result) == {"a": 2, "b": 2, "c": 2}
    assert flat(result) == [("t", p) for p in range(6)]


def test_uniform_is_sticky_when_a_member_joins():
    before = {"a": {"t": frozenset({0, 1, 2})}, "b": {"t": frozenset({3, 4, 5})}}
    spec = AssignmentSpec({m: frozenset({"t"}) for m in ("a", "b", "c")}, {"t": 6}, before)
    result = uniform(spec)
    assert counts(result) == {"a": 2, "b": 2, "c": 2}
    assert result["a"]["t"] <= {0, 1, 2} and result["b"]["t"] <= {3, 4, 5}  # only what must move moves


def test_uniform_is_sticky_when_a_member_leaves():
    before = {"a": {"t": frozenset({0, 1})}, "b": {"t": frozenset({2, 3})}, "c": {"t": frozenset({4, 5})}}
    spec = AssignmentSpec({m: frozenset({"t"}) for m in ("a", "b")}, {"t": 6}, before)
    result = uniform(spec)
    assert counts(result) == {"a": 3, "b": 3}
    assert result["a"]["t"] >= {0, 1} and result["b"]["t"] >= {2, 3}


def test_uniform_with_different_subscriptions_gives_each_topic_only_to_its_subscribers():
    spec = AssignmentSpec(
        {"a": frozenset({"x"}), "b": frozenset({"x", "y"}), "c": frozenset({"y"})}, {"x": 4, "y": 2}, {}
    )
    result = uniform(spec)
    assert flat(result) == [("x", p) for p in range(4)] + [("y", 0), ("y", 1)]
    assert "y" not in result["a"] and "x" not in result["c"]
    assert counts(result) == {"a": 2, "b": 2, "c": 2}


def test_range_gives_contiguous_ranges_with_the_remainder_first():
    spec = AssignmentSpec({m: frozenset({"t", "u"}) for m in ("a", "b", "c")}, {"t": 7, "u": 3}, {})
    result = range_(spec)
    assert result["a"] == {"t": {0, 1, 2}, "u": {0}}
    assert result["b"] == {"t": {3, 4}, "u": {1}}
    assert result["c"] == {"t": {5, 6}, "u": {2}}


def test_more_members_than_partitions_leaves_some_empty():
    spec = AssignmentSpec({m: frozenset({"t"}) for m in ("a", "b", "c")}, {"t": 2}, {})
    for assignor in (uniform, range_):
        result = assignor(spec)
        assert sorted(counts(result).values()) == [0, 1, 1]


def test_assignor_names_accept_kafka_class_names():
    assert assignor_name("uniform") == "uniform"
    assert assignor_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == "range"
    assert assignor_name("sticky") is None
