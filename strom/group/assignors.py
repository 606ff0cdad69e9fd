"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor sees each member's subscribed topics and the partition counts of those topics, and
returns every member's target partitions. It is pure: the group runs it when its epoch moves past
the target assignment's epoch, and reconciliation (consumer_group.py) then moves members towards
the result one revocation at a time.

Rack awareness. Members may send a rack (``client.rack``), and brokers have racks (``broker.rack``).
When both are known, some member's rack holds a replica of some partition, and the partitions do
not all have replicas in the same racks, the assignors prefer giving a partition to a member in a
rack that holds one of its replicas (so that it can fetch from a follower there, KIP-392). Balance
comes first, then rack locality, then stickiness: the rules of KIP-881's client-side assignors
and of Kafka's rack-aware uniform assignor (KAFKA-19909). Kafka 4.0's own server-side assignors
are not rack-aware; with no racks configured strom's give exactly the assignment they gave before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

Assignment = dict[str, dict[str, set[int]]]  # member id -> topic -> partitions


@dataclass(frozen=True)
class AssignmentSpec:
    subscriptions: Mapping[str, frozenset[str]]  # member id -> subscribed topics (names that exist)
    partition_counts: Mapping[str, int]  # topic -> partitions
    previous: Mapping[str, Mapping[str, frozenset[int]]]  # the last target assignment, for stickiness
    member_racks: Mapping[str, str | None] = field(default_factory=dict)  # member id -> client.rack
    partition_racks: Mapping[str, Sequence[frozenset[str]]] = field(default_factory=dict)  # racks of replicas

    def use_racks(self) -> bool:
        """KAFKA-19909's test: member and partition racks overlap, and partitions differ in racks."""
        racks = {r for m, r in self.member_racks.items() if r and m in self.subscriptions}
        seen = {rs for topic in self.partition_counts for rs in self.partition_racks.get(topic, ())}
        return bool(racks & set().union(*seen)) and len(seen) > 1 if seen else False

    def racks_of(self, topic: str, partition: int) -> frozenset[str]:
        racks = self.partition_racks.get(topic, ())
        return racks[partition] if partition < len(racks) else frozenset()


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
    racks = spec.use_racks()

    def local(member: str, topic: str, p: int) -> bool:
        return racks and spec.member_racks.get(member) in spec.racks_of(topic, p)

    def misplaced(member: str, topic: str, p: int) -> bool:
        """On a member away from its replicas while a member of the topic sits next to one."""
        return racks and not local(member, topic, p) and any(local(m, topic, p) for m in eligible.get(topic, ()))

    for member in members:  # stickiness: keep what is still valid (and, with racks, local)
        for topic, parts in (spec.previous.get(member) or {}).items():
            if topic not in spec.subscriptions[member]:
                continue
            for p in sorted(parts):
                if (
                    p < spec.partition_counts.get(topic, 0)
                    and (topic, p) not in owner
                    and not misplaced(member, topic, p)
                ):
                    give(member, (topic, p))
    for topic in sorted(eligible):
        for p in range(spec.partition_counts[topic]):
            if (topic, p) not in owner:
                # the least loaded member; among equally loaded ones, one next to a replica
                give(min(eligible[topic], key=lambda m: (load[m], not local(m, topic, p), m)), (topic, p))
    # Move partitions from the most to the least loaded eligible member until no move helps; each
    # move lowers the sum of squared loads, so this ends. A move takes, where it can, a partition
    # that is remote for the member giving it and local for the one taking it.
    for _ in range(sum(load.values()) * max(1, len(members))):
        move = _next_move(members, result, eligible, load, local if racks else None)
        if move is None:
            break
        heavy, target, tp = move
        take(heavy, tp)
        give(target, tp)
    return result


def _next_move(
    members: list[str],
    result: Assignment,
    eligible: dict[str, list[str]],
    load: dict[str, int],
    local: Callable[[str, str, int], bool] | None,
) -> tuple[str, str, tuple[str, int]] | None:
    """The first helpful move from the most loaded member: (from, to, partition), or None."""
    for heavy in sorted(members, key=lambda m: (-load[m], m)):
        best = None
        for topic in sorted(result[heavy]):
            lighter = [m for m in eligible[topic] if load[m] <= load[heavy] - 2]
            if not lighter:
                continue
            if local is None:  # without racks: the highest partition of the first such topic
                return heavy, min(lighter, key=lambda m: (load[m], m)), (topic, max(result[heavy][topic]))
            for target in lighter:
                for p in result[heavy][topic]:
                    gain = int(local(target, topic, p)) - int(local(heavy, topic, p))
                    key = (-gain, topic, load[target], target, -p)
                    if best is None or key < best[0]:
                        best = (key, target, (topic, p))
        if best is not None:
            return heavy, best[1], best[2]
    return None


def range_(spec: AssignmentSpec) -> Assignment:
    """Kafka's RangeAssignor (server side): per topic, the subscribed members sorted by id take
    contiguous ranges, the first ``partitions % members`` of them one partition more, so that
    members subscribed to co-partitioned topics get the same partition numbers of each."""
    result: Assignment = {m: {} for m in sorted(spec.subscriptions)}
    topics = sorted({t for subs in spec.subscriptions.values() for t in subs if t in spec.partition_counts})
    # co-partitioned topics (same partition count, same subscribers) are assigned together, so that
    # a member gets the same partition numbers of each (with racks: those local for all of them)
    batches: dict[tuple[int, tuple[str, ...]], list[str]] = {}
    for topic in topics:
        members = tuple(sorted(m for m, subs in spec.subscriptions.items() if topic in subs))
        batches.setdefault((spec.partition_counts[topic], members), []).append(topic)
    racks = spec.use_racks()
    for (count, members), batch in batches.items():
        quota, extra = divmod(count, len(members))
        sizes = {member: quota + (1 if i < extra else 0) for i, member in enumerate(members)}
        if not racks:
            start = 0
            chosen = {}
            for member in members:
                chosen[member] = set(range(start, start + sizes[member]))
                start += sizes[member]
        else:
            chosen = _range_with_racks(spec, batch, count, members, sizes)
        for member, parts in chosen.items():
            if parts:
                for topic in batch:
                    result[member][topic] = set(parts)
    return result


def _range_with_racks(
    spec: AssignmentSpec, topics: list[str], count: int, members: tuple[str, ...], sizes: dict[str, int]
) -> dict[str, set[int]]:
    """KIP-881's rack-aware range: each member first takes, in order, the partitions whose replicas
    are in its rack (for every topic of the batch) up to its share; the rest are handed out in
    order to the members below their share."""
    chosen: dict[str, set[int]] = {m: set() for m in members}
    free = list(range(count))
    for member in members:
        rack = spec.member_racks.get(member)
        if not rack:
            continue
        for p in list(free):
            if len(chosen[member]) >= sizes[member]:
                break
            if all(rack in spec.racks_of(t, p) for t in topics):
                chosen[member].add(p)
                free.remove(p)
    for member in members:
        while len(chosen[member]) < sizes[member] and free:
            chosen[member].add(free.pop(0))
    return chosen


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
