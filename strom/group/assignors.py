"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor sees each member's subscribed topics and the partition counts of those topics, and
returns every member's target partitions. It is pure: the group runs it when its epoch moves past
the target assignment's epoch, and reconciliation (consumer_group.py) then moves members towards
the result one revocation at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Assignment = dict[str, dict[str, set[int]]]  # member id -> topic -> partitions


@dataclass(frozen=True)
class AssignmentSpec:
    subscriptions: Mapping[str, frozenset[str]]  # member id -> subscribed topics (names that exist)
    partition_counts: Mapping[str, int]  # topic -> partitions
    previous: Mapping[str, Mapping[str, frozenset[int]]]  # the last target assignment, for stickiness


def uniform(spec: AssignmentSpec) -> Assignment:
    """Kafka's UniformAssignor: members end up with partition counts that differ by at most one
    among members able to take the same partitions, keeping as much of the previous target as
    that allows (so a member joining or leaving moves only what must move)."""
    members = sorted(spec.subscriptions)
    result: Assignment = {m: {} for m in members}
    load = {m: 0 for m in members}
    owner: dict[tuple[str, int], str] = {}

    def give(member: str, tp: tuple[str, int]) -> None:
        result[member].setdefault(tp[0], set()).add(tp[1])
        load[member] += 1
        owner[tp] = member

    def take(member: str, tp: tuple[str, int]) -> None:
        parts = result[member][tp[0]]
        parts.discard(tp[1])
        if not parts:
            del result[member][tp[0]]
        load[member] -= 1
        del owner[tp]

    eligible: dict[str, list[str]] = {}
    for member in members:
        for topic in spec.subscriptions[member]:
            if topic in spec.partition_counts:
                eligible.setdefault(topic, []).append(member)
    for member in members:  # stickiness: keep what is still valid
        for topic, parts in (spec.previous.get(member) or {}).items():
            if topic not in spec.subscriptions[member]:
                continue
            for p in sorted(parts):
                if p < spec.partition_counts.get(topic, 0) and (topic, p) not in owner:
                    give(member, (topic, p))
    for topic in sorted(eligible):
        for p in range(spec.partition_counts[topic]):
            if (topic, p) not in owner:
                give(min(eligible[topic], key=lambda m: (load[m], m)), (topic, p))
    # Move partitions from the most to the least loaded eligible member until no move helps; each
    # move lowers the sum of squared loads, so this ends.
    for _ in range(sum(load.values()) * max(1, len(members))):
        moved = False
        for heavy in sorted(members, key=lambda m: (-load[m], m)):
            for topic in sorted(result[heavy]):
                lighter = [m for m in eligible[topic] if load[m] <= load[heavy] - 2]
                if lighter:
                    target = min(lighter, key=lambda m: (load[m], m))
                    p = max(result[heavy][topic])
                    take(heavy, (topic, p))
                    give(target, (topic, p))
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return result


def range_(spec: AssignmentSpec) -> Assignment:
    """Kafka's RangeAssignor (server side): per topic, the subscribed members sorted by id take
    contiguous ranges, the first ``partitions % members`` of them one partition more, so that
    members subscribed to co-partitioned topics get the same partition numbers of each."""
    result: Assignment = {m: {} for m in sorted(spec.subscriptions)}
    topics = sorted({t for subs in spec.subscriptions.values() for t in subs if t in spec.partition_counts})
    for topic in topics:
        members = sorted(m for m, subs in spec.subscriptions.items() if topic in subs)
        count = spec.partition_counts[topic]
        quota, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = quota + (1 if i < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS: dict[str, Callable[[AssignmentSpec], Assignment]] = {"uniform": uniform, "range": range_}

# group.consumer.assignors takes Kafka's class names too
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range",
}


def assignor_name(configured: str) -> str | None:
    """The short name of a configured assignor, or None when strom has no such assignor."""
    name = _CLASS_NAMES.get(configured, configured)
    return name if name in ASSIGNORS else None
