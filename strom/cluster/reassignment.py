"""Partition reassignment (KIP-455) as Kafka's ZooKeeper-mode controller runs it.

State lives in the topic znode /brokers/topics/<t> (``partitions`` = the full replica set, target
then original, plus ``adding_replicas``/``removing_replicas``), as Kafka 2.4+ writes it; the
legacy /admin/reassign_partitions znode is not used. So a controller that fails over finds every
move in progress in the topics it loads anyway, and Metadata shows the full set during a move.

A move runs in three steps, each a store write that the next metadata reload acts on:
1. ``alter`` records it: every broker in the full set creates its replica, new ones fetch;
2. the new replicas catch up and their leader adds them to the ISR (its usual ISR expansion);
3. ``complete_ready`` (from the controller's reconcile pass) sees the whole target in the ISR,
   writes the partition state first (ISR restricted to the target; the first target replica
   leads if the leader is leaving or the preferred replica changed), then the topic znode with
   the target alone; removed replicas then stop fetching and delete their logs.
Cancelling writes the original set back the same way (state first, then topic). As in Kafka,
the original replicas come back in the order they have in the full set (the target's order for
replicas in both), since the znode records the full set and what it adds, not the original order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from strom.cluster import model
from strom.cluster.model import PartitionState, TopicAssignment
from strom.cluster.store import BadVersionError, MetadataStore, NoNodeError
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.controller")

NO_LEADER = -1
CAS_ATTEMPTS = 5


@dataclass(frozen=True)
class Result:
    code: int = ErrorCode.NONE
    message: str | None = None


def _distinct(replicas: list[int]) -> list[int]:
    return list(dict.fromkeys(replicas))


def validate_target(target: list[int], original: list[int], live: set[int]) -> Result | None:
    """Kafka's KafkaController.validateReassignment checks, with its messages."""
    if not target:
        return Result(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        return Result(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Duplicate replica ids in partition reassignment replica list: {target}",
        )
    if any(b < 0 for b in target):
        return Result(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {target}")
    adding = [b for b in target if b not in original]
    if not set(adding) <= live:
        return Result(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Replica assignment has brokers that are not alive. Replica list: {adding}, "
            f"live broker list: {sorted(live)}",
        )
    return None


def settled_state(
    state: PartitionState, target: list[int], live: set[int], controller_epoch: int, prefer: bool = True
) -> PartitionState | None:
    """The partition state once the replica set is ``target``; None when the current one will do.

    The ISR keeps only target replicas; the first target replica leads when it is alive and in
    sync and either the leader is leaving or the preferred replica differs from the leader
    (with ``prefer``; without, the leader changes only when it is leaving).
    """
    isr = [b for b in state.isr if b in target]
    leader = state.leader
    preferred = target[0]
    if prefer and leader != preferred and preferred in isr and preferred in live:
        leader = preferred
    elif leader not in target or leader not in live:
        candidates = [b for b in target if b in isr and b in live]
        leader = candidates[0] if candidates else NO_LEADER
    if not isr:  # no target replica in sync (a cancel after the originals fell out): keep one to return
        isr = [b for b in target if b in state.isr][:1] or target[:1]
    if leader == state.leader and isr == state.isr:
        return None
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


class Reassigner:
    """The controller's side of reassignment; every write a compare-and-set on what it read."""

    def __init__(self, store: MetadataStore):
        self.store = store

    # -- AlterPartitionReassignments ---------------------------------------------------------------
    def alter(
        self, topic: str, requests: dict[int, list[int] | None], live: set[int], controller_epoch: int
    ) -> dict[int, Result]:
        """Start, replace or cancel (None) moves of one topic's partitions; one result per partition."""
        for _ in range(CAS_ATTEMPTS):
            found = self.store.get_or_none(model.topic_path(topic))
            if found is None:
                return {
                    p: Result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic}' does not exist") for p in requests
                }
            current = model.TopicAssignment.from_json(topic, found[0])
            results, partitions = {}, dict(current.partitions)
            adding, removing = dict(current.adding), dict(current.removing)
            settle: dict[int, list[int]] = {}  # partitions whose new set is final now
            narrowed: dict[int, list[int]] = {}  # a replaced move drops replicas it was adding
            for index, target in requests.items():
                if index not in partitions:
                    results[index] = Result(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{index} does not exist"
                    )
                    continue
                in_progress = bool(current.adding.get(index) or current.removing.get(index))
                original = current.original(index)
                if target is None:
                    if not in_progress:
                        results[index] = Result(
                            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment in progress for {topic}-{index}"
                        )
                        continue
                    target = original
                else:
                    target = [int(b) for b in target]
                    invalid = validate_target(target, original, live)
                    if invalid is not None:
                        results[index] = invalid
                        continue
                results[index] = Result()
                add = [b for b in target if b not in original]
                remove = [b for b in original if b not in target]
                adding.pop(index, None)
                removing.pop(index, None)
                if not add and not remove:  # a cancel, or a reordering: nothing to copy
                    settle[index] = target
                    continue
                partitions[index] = _distinct(target + original)
                adding[index], removing[index] = add, remove
                if set(current.partitions[index]) - set(partitions[index]):
                    narrowed[index] = partitions[index]
            for index, target in settle.items():
                if not self._settle_state(topic, index, target, live, controller_epoch):
                    results[index] = Result(ErrorCode.REQUEST_TIMED_OUT, f"{topic}-{index} kept changing; try again")
                    continue
                partitions[index] = target
            for index, full in narrowed.items():  # the ISR first: it must never name a non-replica
                self._settle_state(topic, index, full, live, controller_epoch, prefer=False)
            updated = TopicAssignment(topic, partitions, current.topic_id, adding, removing)
            if updated == current:
                return results
            try:
                self.store.set(model.topic_path(topic), updated.to_json(), found[1])
            except BadVersionError:
                continue
            for index, result in results.items():
                if result.code == ErrorCode.NONE:
                    log.info(
                        "reassignment of %s-%d: replicas %s (adding %s, removing %s)",
                        topic,
                        index,
                        partitions[index],
                        adding.get(index, []),
                        removing.get(index, []),
                    )
            return results
        return {p: Result(ErrorCode.REQUEST_TIMED_OUT, f"topic '{topic}' kept changing; try again") for p in requests}

    def _settle_state(
        self, topic: str, index: int, target: list[int], live: set[int], controller_epoch: int, prefer: bool = True
    ) -> bool:
        """Write the partition state for a replica set (before the topic znode names it)."""
        path = model.partition_state_path(topic, index)
        for _ in range(CAS_ATTEMPTS):
            try:
                data, version = self.store.get(path)
            except NoNodeError:
                return True  # no state yet: the controller creates it from the replica set
            new = settled_state(PartitionState.from_json(data), target, live, controller_epoch, prefer)
            if new is None:
                return True
            try:
                self.store.set(path, new.to_json(), version)
            except BadVersionError:
                continue
            log.info(
                "%s-%d: leader %d, isr %s (epoch %d) for replicas %s",
                topic,
                index,
                new.leader,
                new.isr,
                new.leader_epoch,
                target,
            )
            return True
        return False

    # -- progress (the controller's reconcile pass) ------------------------------------------------
    def complete_ready(self, metadata, controller_epoch: int) -> int:
        """Finish every move whose target replicas are all in the ISR; returns the number of writes."""
        writes = 0
        live = set(metadata.brokers)
        for topic in list(metadata.topics.values()):
            moving = sorted(set(topic.adding) | set(topic.removing))
            if not moving:
                continue
            done: dict[int, list[int]] = {}
            for index in moving:
                replicas = topic.replicas.get(index)
                state = topic.states.get(index)
                if replicas is None or state is None:
                    continue
                removing = topic.removing.get(index, ())
                target = [b for b in replicas if b not in removing]
                if not all(b in state.isr for b in target):
                    continue
                if self._settle_state(topic.name, index, target, live, controller_epoch):
                    done[index] = target
                    writes += 1
            if done:
                writes += self._finish_topic(topic.name, done)
        return writes

    def _finish_topic(self, topic: str, done: dict[int, list[int]]) -> int:
        for _ in range(CAS_ATTEMPTS):
            found = self.store.get_or_none(model.topic_path(topic))
            if found is None:
                return 0
            current = TopicAssignment.from_json(topic, found[0])
            partitions, adding, removing = dict(current.partitions), dict(current.adding), dict(current.removing)
            for index, target in done.items():
                # only if the move is still the one we saw (a new AlterPartitionReassignments may have replaced it)
                if current.target(index) != target or not (adding.get(index) or removing.get(index)):
                    continue
                partitions[index] = target
                adding.pop(index, None)
                removing.pop(index, None)
                log.info("reassignment of %s-%d completed: replicas %s", topic, index, target)
            try:
                self.store.set(
                    model.topic_path(topic),
                    TopicAssignment(topic, partitions, current.topic_id, adding, removing).to_json(),
                    found[1],
                )
                return 1
            except BadVersionError:
                continue
        return 0


def ongoing(metadata, wanted: dict[str, list[int]] | None) -> list[dict]:
    """ListPartitionReassignments' topics: every move in progress, or those of the partitions asked for."""
    topics = []
    names = sorted(metadata.topics) if wanted is None else list(wanted)
    for name in names:
        info = metadata.topics.get(name)
        if info is None:
            continue
        moving = sorted(set(info.adding) | set(info.removing))
        if wanted is not None:
            moving = [p for p in wanted[name] if p in moving]
        partitions = [
            {
                "partition_index": p,
                "replicas": list(info.replicas.get(p, [])),
                "adding_replicas": list(info.adding.get(p, [])),
                "removing_replicas": list(info.removing.get(p, [])),
            }
            for p in moving
        ]
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    return topics
