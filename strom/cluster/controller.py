"""The controller: the one broker that owns topic creation, deletion and leader election.

Kafka's classic design: the first broker to create the ephemeral /controller znode is the
controller; /controller_epoch is bumped on every election so brokers can ignore a stale one.
Partition state znodes are written with the version read as a compare-and-set, so a deposed
controller's writes fail instead of overwriting its successor's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from strom.clock import wall_ms
from strom.cluster import model
from strom.cluster.metadata_cache import MetadataCache, MetadataDelta
from strom.cluster.model import Broker, PartitionState, TopicAssignment
from strom.cluster.placement import assign_replicas
from strom.cluster.reassignment import Reassigner, Result
from strom.cluster.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    StoreError,
    StoreUnavailableError,
)
from strom.protocol.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from strom.storage.log_config import ConfigError, LogConfig

log = logging.getLogger("strom.controller")

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
NO_LEADER = -1


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name is {len(name)} characters long, the limit is {MAX_TOPIC_NAME}")
    if not _LEGAL.match(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    """'.' and '_' collide in metric names, so Kafka refuses topics differing only by them."""
    return name.replace(".", "_")


# what a config write left when its answer was lost, for the message of a REQUEST_TIMED_OUT
CONFIG_RETRY = "the configs are one znode, written whole or not at all: writing them again is safe"


@contextlib.contextmanager
def store_failures_as_errors(during: str, retry: str) -> Iterator[None]:
    """An admin request whose store stops answering gets a Kafka error code, not a dropped connection.

    ``during`` says what was under way ("topic 't' was being deleted"); ``retry`` says what state a
    lost answer can have left and what a retry then answers, so the user knows whether to retry.
    No answer is REQUEST_TIMED_OUT (retriable: ZooKeeper may have done the write or not), as a
    client hears from Kafka when its controller does not finish in time. Any other store error is
    an answer no admin write expects (a node changed under it, say): UNKNOWN_SERVER_ERROR.
    """
    try:
        yield
    except StoreUnavailableError as exc:
        raise RequestTimedOutError(f"ZooKeeper did not answer while {during} ({exc}); retry: {retry}") from None
    except StoreError as exc:
        raise KafkaError(f"ZooKeeper failed while {during}: {exc}", error_code=ErrorCode.UNKNOWN_SERVER_ERROR) from None


@dataclass(frozen=True)
class Election:
    """An election's outcome: the epoch this broker won (None: no new term) and who holds office."""

    epoch: int | None
    holder: int


@dataclass
class ReconcilePlan:
    """What a reconcile pass decided to write: the first states of partitions that have none
    (per topic), and the elections and ISR changes as (topic, partition, state read, new state,
    the version read for the compare-and-set)."""

    missing: dict[str, list[tuple[int, PartitionState]]] = field(default_factory=dict)
    changes: list[tuple[str, int, PartitionState, PartitionState, int]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.changes)

    def keys(self) -> set[tuple[str, int]]:
        return {(name, index) for name, firsts in self.missing.items() for index, _ in firsts} | {
            (name, index) for name, index, *_ in self.changes
        }


@dataclass
class PlanResults:
    """The store's answers to a plan: per topic, each missing state's create; each change's new
    version or the error that refused it; or the disk error that stopped them all."""

    created: dict[str, list[StoreError | None]]
    changes: list[int | StoreError]
    disk_error: OSError | None


class Controller:
    def __init__(self, store: MetadataStore, broker_id: int, default_log_config: LogConfig):
        self.store = store
        self.broker_id = broker_id
        self.default_log_config = default_log_config
        self.epoch = 0
        self.is_active = False
        self.reassigner = Reassigner(store)
        self._retry: set[tuple[str, int]] = set()  # partitions whose last write failed
        self.leader_elections = 0  # metrics: leaders this controller elected (Kafka's ControllerStats)
        self.unclean_leader_elections = 0

    # -- election ----------------------------------------------------------------------------------
    def elect(self) -> bool:
        """Try to become the controller; True if this broker now is."""
        return self.take_office(self.campaign(self.is_active))

    def campaign(self, active: bool) -> Election:
        """The store's part of an election (any thread; ``active``: whether this broker holds office).

        A dropped connection may have lost the answer to this broker's own create of /controller:
        the node is then its session's, and the election goes on to bump the epoch, as Kafka's does.
        """
        payload = json.dumps({"version": 2, "brokerid": self.broker_id, "timestamp": str(wall_ms())}).encode()
        try:
            self.store.create(model.CONTROLLER, payload, ephemeral=True)
        except NodeExistsError:
            if active or not self.store.ephemeral_owned(model.CONTROLLER):
                return Election(None, self.current_controller())
        found = self.store.get_or_none(model.CONTROLLER_EPOCH)
        if found is None:
            self.store.create(model.CONTROLLER_EPOCH, b"1")
            return Election(1, self.broker_id)
        epoch = int(found[0] or b"0") + 1
        self.store.set(model.CONTROLLER_EPOCH, str(epoch).encode(), found[1])
        return Election(epoch, self.broker_id)

    def take_office(self, election: Election) -> bool:
        """Act on an election's outcome (on the thread that owns this controller); True if this broker is controller."""
        if election.epoch is not None:
            self.epoch = election.epoch
            log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        self.is_active = election.holder == self.broker_id
        return self.is_active

    def current_controller(self) -> int:
        found = self.store.get_or_none(model.CONTROLLER)
        return json.loads(found[0])["brokerid"] if found else -1

    # -- brokers -----------------------------------------------------------------------------------
    def live_brokers(self) -> dict[int, Broker]:
        brokers = {}
        for child in self.store.children(model.BROKERS_IDS):
            found = self.store.get_or_none(model.broker_path(int(child)))
            if found is not None:
                brokers[int(child)] = Broker.from_json(int(child), found[0])
        return brokers

    def topics(self) -> list[str]:
        try:
            return self.store.children(model.BROKERS_TOPICS)
        except NoNodeError:
            return []

    # -- topics ------------------------------------------------------------------------------------
    def validate_configs(self, configs: dict[str, str]) -> LogConfig:
        try:
            return self.default_log_config.with_overrides(configs)
        except ConfigError as exc:
            raise InvalidConfigError(str(exc)) from None

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicAssignment:
        """Any broker may write a new topic's znodes (as Kafka's AdminZkClient does); the
        controller creates the partition states, here or in its next reconcile pass.

        A store that stops answering midway is a Kafka error, not a dropped connection:
        REQUEST_TIMED_OUT, retriable, as a client hears from Kafka when its controller does not
        complete a creation in time. No topic is left half-made: the topic znode is the one
        write that counts. Written before the failure (or by the call whose answer was lost),
        it makes the topic, and the controller's reconcile pass writes any partition state
        still missing, so a retry answers TOPIC_ALREADY_EXISTS and the topic works; not
        written, there is no topic (a config znode written first is overwritten by the retry).
        """
        with store_failures_as_errors(
            f"topic '{name}' was being created", "the topic was made whole (TOPIC_ALREADY_EXISTS) or not at all"
        ):
            return self._create_topic(name, partitions, replication_factor, configs, assignment, validate_only)

    def _create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None,
        assignment: dict[int, list[int]] | None,
        validate_only: bool,
    ) -> TopicAssignment:
        validate_topic_name(name)
        existing = self.topics()
        if name in existing:
            raise TopicAlreadyExistsError(f"topic '{name}' already exists")
        for other in existing:
            if collision_key(other) == collision_key(name):
                raise InvalidTopicError(f"topic '{name}' collides with existing topic '{other}' ('.' and '_' collide)")
        configs = dict(configs or {})
        self.validate_configs(configs)
        brokers = self.live_brokers()
        if assignment:
            self._check_assignment(assignment, brokers)
            partitions_map = {int(p): list(r) for p, r in assignment.items()}
        else:
            if partitions < 1:
                raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions}")
            if replication_factor < 1:
                raise InvalidReplicationFactorError(f"replication factor must be at least 1, got {replication_factor}")
            if replication_factor > len(brokers):
                raise InvalidReplicationFactorError(
                    f"replication factor {replication_factor} is larger than the {len(brokers)} available brokers"
                )
            partitions_map = assign_replicas({b: brokers[b].rack for b in brokers}, partitions, replication_factor)
        topic = TopicAssignment(name, partitions_map)
        if validate_only:
            return topic
        # Two brokers may create the same topic at once (say, __consumer_offsets for two groups'
        # first FindCoordinator). As in Kafka, the config is set-or-created and the topic znode
        # decides: whoever creates it second gets TOPIC_ALREADY_EXISTS, a retriable answer.
        with self.store.batch():
            config_path, config = model.topic_config_path(name), model.topic_config_json(configs)
            try:
                self.store.create(config_path, config, makepath=True)
            except NodeExistsError:
                self.store.set(config_path, config)
            try:
                self.store.create(model.topic_path(name), topic.to_json(), makepath=True)
            except NodeExistsError:
                raise TopicAlreadyExistsError(f"topic '{name}' already exists") from None
            if self.is_active:
                self._create_partition_states(name, partitions_map, brokers)
        log.info("created topic %s with %d partitions", name, len(partitions_map))
        return topic

    def _check_assignment(self, assignment: dict[int, list[int]], brokers: dict[int, Broker]) -> None:
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise InvalidReplicaAssignmentError("every partition must have the same, non-zero number of replicas")
        for partition, replicas in assignment.items():
            if len(set(replicas)) != len(replicas):
                raise InvalidReplicaAssignmentError(f"partition {partition} lists a broker twice: {replicas}")
            unknown = [b for b in replicas if b not in brokers]
            if unknown:
                raise InvalidReplicaAssignmentError(f"partition {partition} uses unknown brokers {unknown}")

    def _create_partition_states(self, name: str, partitions: dict[int, list[int]], brokers: dict[int, Broker]) -> None:
        """The first state of each new partition. ZooKeeper creates no parents, so each level of
        the path is one pipelined call for all partitions; a node that exists already was made
        by a reconcile pass first."""
        states = {}
        for partition, replicas in partitions.items():
            live = [b for b in replicas if b in brokers]
            states[partition] = PartitionState(
                live[0] if live else NO_LEADER, 0, live or list(replicas[:1]), self.epoch
            )
        root = f"{model.topic_path(name)}/partitions"
        self.store.ensure_path(root)
        self.store.create_many([(f"{root}/{partition}", b"") for partition in states])
        self.store.create_many([(model.partition_state_path(name, p), state.to_json()) for p, state in states.items()])

    def delete_topic(self, name: str) -> None:
        """Remove the topic's znodes, the topic znode itself last, then its config.

        A store that stops answering midway is REQUEST_TIMED_OUT. The topic znode is the write
        that counts: gone, the topic is deleted (a retry answers UNKNOWN_TOPIC_OR_PARTITION; a
        config znode left behind is overwritten by the next creation of that name); still there,
        the topic is, with some partition states maybe gone (the controller writes them again),
        and a retry deletes the rest.
        """
        with store_failures_as_errors(
            f"topic '{name}' was being deleted",
            "the topic is deleted (UNKNOWN_TOPIC_OR_PARTITION) or still there, and a retry deletes it",
        ):
            self._delete_topic(name)

    def _delete_topic(self, name: str) -> None:
        if name not in self.topics():
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        self.store.delete(model.topic_path(name), recursive=True)
        try:
            self.store.delete(model.topic_config_path(name))
        except NoNodeError:
            pass
        log.info("deleted topic %s", name)

    def create_partitions(
        self, name: str, total: int, assignment: list[list[int]] | None = None, validate_only: bool = False
    ) -> None:
        """Grow topic ``name`` to ``total`` partitions.

        A store that stops answering midway is REQUEST_TIMED_OUT. The topic znode (a
        compare-and-set of its assignment) is the one write that counts: written, the topic has
        the new partitions and the controller's reconcile pass writes any state still missing,
        so a retry answers INVALID_PARTITIONS (it has them already); not written, nothing changed.
        """
        with store_failures_as_errors(
            f"partitions were being added to topic '{name}'",
            f"the topic has its {total} partitions (INVALID_PARTITIONS: it has them already) or is unchanged",
        ):
            self._create_partitions(name, total, assignment, validate_only)

    def _create_partitions(
        self, name: str, total: int, assignment: list[list[int]] | None, validate_only: bool
    ) -> None:
        found = self.store.get_or_none(model.topic_path(name))
        if found is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        topic = TopicAssignment.from_json(name, found[0])
        current = len(topic.partitions)
        if total <= current:
            raise InvalidPartitionsError(
                f"topic '{name}' has {current} partitions; the new count must be larger, got {total}"
            )
        brokers = self.live_brokers()
        rf = len(topic.partitions[0])
        if assignment:
            if len(assignment) != total - current:
                raise InvalidReplicaAssignmentError(
                    f"{len(assignment)} assignments given for {total - current} new partitions"
                )
            new = {current + i: list(r) for i, r in enumerate(assignment)}
            self._check_assignment(new, brokers)
        else:
            if rf > len(brokers):
                raise InvalidReplicationFactorError(
                    f"replication factor {rf} is larger than {len(brokers)} live brokers"
                )
            new = assign_replicas({b: brokers[b].rack for b in brokers}, total - current, rf, first_partition=current)
        if validate_only:
            return
        updated = TopicAssignment(name, {**topic.partitions, **new}, topic.topic_id, topic.adding, topic.removing)
        self.store.set(model.topic_path(name), updated.to_json(), found[1])
        if self.is_active:
            self._create_partition_states(name, new, brokers)

    def alter_topic_config(self, name: str, configs: dict[str, str], validate_only: bool = False) -> None:
        """Replace the topic's overrides: one znode, so a store that stops answering leaves the old
        set or the new one (REQUEST_TIMED_OUT), and writing it again is safe."""
        with store_failures_as_errors(f"the configs of topic '{name}' were being written", CONFIG_RETRY):
            self._alter_topic_config(name, configs, validate_only)

    def _alter_topic_config(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        if name not in self.topics():
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        self.validate_configs(configs)
        if validate_only:
            return
        path = model.topic_config_path(name)
        if self.store.exists(path):
            self.store.set(path, model.topic_config_json(configs))
        else:
            self.store.create(path, model.topic_config_json(configs), makepath=True)

    def topic_config(self, name: str) -> dict[str, str]:
        """The topic's overrides as stored (IncrementalAlterConfigs applies its operations to them)."""
        with store_failures_as_errors(f"the configs of topic '{name}' were being read", "nothing was changed"):
            found = self.store.get_or_none(model.topic_config_path(name))
        return model.parse_topic_config(found[0]) if found else {}

    # -- partition state ---------------------------------------------------------------------------
    def update_partition_state(self, topic: str, partition: int, state: PartitionState, version: int) -> int:
        """Compare-and-set write of a partition's leader/ISR; raises BadVersionError when fenced."""
        return self.store.set(model.partition_state_path(topic, partition), state.to_json(), version)

    def reconcile(self, metadata: MetadataCache, unclean_enabled, changed: MetadataDelta | None = None) -> list[str]:
        """Level-triggered control loop, run on every metadata change while this broker is controller.

        For each partition looked at: create a missing state (topics created by other brokers),
        elect a leader when the leader is not alive, and drop dead brokers from the ISR. A replica
        whose log dir failed counts as dead, though its broker lives (Kafka's offline replica).
        Each leader or controller-made ISR change bumps the leader epoch. Returns the paths
        written; the states written are put in ``metadata`` at once, with their new versions, so
        that neither this pass's caller nor the read their watches cause has to read them back.

        It is ``plan``, ``write`` and ``apply`` in a row; a broker on ZooKeeper runs ``write`` on
        a thread of its own instead, so that a ZooKeeper that stops answering holds no request.
        """
        plan = self.plan(metadata, unclean_enabled, changed)
        written = self.apply(metadata, plan, self.write(plan)) if plan else []
        return written + self.complete_reassignments(metadata)

    def plan(self, metadata: MetadataCache, unclean_enabled, changed: MetadataDelta | None = None) -> ReconcilePlan:
        """Decide what ``reconcile`` writes, from the cache alone.

        With ``changed`` (what the last read of the store changed) the pass looks only at the
        partitions it names, at those of brokers that came, went or re-registered, and at those
        whose last write failed. Without it, or after a full read, it looks at every partition:
        at startup, when this broker becomes the controller (its predecessor may have died
        half-way), and after ZooKeeper was unreachable. A change that reaches no partition this
        way needs no decision: elections depend only on a partition's state and the live brokers.

        The pass decides first and writes after, all writes at once (``set_many``): a broker's
        death changes a third of a 10,000-partition cluster, and one round trip per partition
        would keep those partitions leaderless for seconds more.
        """
        plan = ReconcilePlan()
        if not self.is_active:
            return plan
        if changed is None or changed.full:
            keys: Iterable[tuple[str, int]] = [
                (name, p) for name, topic in metadata.topics.items() for p in topic.replicas
            ]
        else:
            keys = changed.partitions | self._retry
            if changed.brokers:
                keys |= metadata.partitions_of_brokers(changed.brokers)
        self._retry = set()
        all_live = set(metadata.brokers)
        offline = metadata.offline_replicas
        unclean: dict[str, bool] = {}
        for name, index in keys:
            topic = metadata.topics.get(name)
            replicas = topic.replicas.get(index) if topic is not None else None
            if topic is None or replicas is None:
                continue
            state = topic.states.get(index)
            lost = offline.get((name, index)) if offline else None
            live = all_live - lost if lost else all_live
            if state is None:
                alive = [b for b in replicas if b in live]
                first = PartitionState(alive[0] if alive else NO_LEADER, 0, alive or replicas[:1], self.epoch)
                plan.missing.setdefault(name, []).append((index, first))
                continue
            if name not in unclean:
                unclean[name] = unclean_enabled(name)
            new = self._elect(name, index, replicas, state, live, unclean[name])
            if new is not None:
                plan.changes.append((name, index, state, new, topic.state_versions.get(index, -1)))
        return plan

    def write(self, plan: ReconcilePlan) -> PlanResults:
        """Write a plan's states; touches the store only, so it may run on any thread.

        Losing the store raises StoreError, as any call; a full or failed disk under the
        embedded store is an answer: every write of the plan is then retried on the next pass.
        """
        try:
            created = {name: self._create_missing_states(name, firsts) for name, firsts in plan.missing.items()}
            results = self.store.set_many(
                [
                    (model.partition_state_path(name, index), new.to_json(), version)
                    for name, index, _, new, version in plan.changes
                ]
            )
        except OSError as exc:
            return PlanResults({}, [], exc)
        return PlanResults(created, results, None)

    def apply(self, metadata: MetadataCache, plan: ReconcilePlan, results: PlanResults) -> list[str]:
        """Put what a plan wrote into the cache; what was refused is looked at again on the next pass."""
        if results.disk_error is not None:
            log.warning(
                "the controller could not write partition states (%s); retrying on the next change", results.disk_error
            )
            self.look_again(plan.keys())
            return []
        written: list[str] = []
        for name, firsts in plan.missing.items():
            for (index, state), refused in zip(firsts, results.created[name], strict=True):
                if refused is None:  # NodeExistsError: another pass made it first; NoNodeError: the topic went
                    metadata.set_state(name, index, state, 0)
                    written.append(model.partition_state_path(name, index))
        for (name, index, state, new, _), result in zip(plan.changes, results.changes, strict=True):
            if isinstance(result, StoreError):  # BadVersionError or NoNodeError: changed under us
                log.info("partition %s-%d changed under the controller; retrying on the next pass", name, index)
                self._retry.add((name, index))
                continue
            metadata.set_state(name, index, new, result)
            written.append(model.partition_state_path(name, index))
            if new.leader >= 0 and new.leader != state.leader:
                self.leader_elections += 1
                self.unclean_leader_elections += new.leader not in state.isr
        return written

    def look_again(self, keys: Iterable[tuple[str, int]]) -> None:
        """The next pass looks at these partitions too, whatever it is told changed (a plan's whose
        writes failed, or a pass's that had to wait)."""
        self._retry.update(keys)

    def complete_reassignments(self, metadata: MetadataCache) -> list[str]:
        try:
            if self.is_active and self.reassigner.complete_ready(metadata, self.epoch):
                return [model.BROKERS_TOPICS]  # topic znodes changed: not a partition state
        except OSError as exc:
            log.warning("the controller could not complete reassignments (%s); retrying on the next change", exc)
        return []

    def _create_missing_states(self, name: str, created: list[tuple[int, PartitionState]]) -> list[StoreError | None]:
        """States of a topic's partitions that have none (a topic written by another broker):
        each level of the path in one pipelined call, as for a topic this controller creates."""
        root = f"{model.topic_path(name)}/partitions"
        self.store.ensure_path(root)
        self.store.create_many([(f"{root}/{index}", b"") for index, _ in created])
        return self.store.create_many(
            [(model.partition_state_path(name, index), state.to_json()) for index, state in created]
        )

    def alter_partition_reassignments(
        self, topic: str, requests: dict[int, list[int] | None], live: set[int]
    ) -> dict[int, Result]:
        """AlterPartitionReassignments for one topic (see cluster/reassignment.py)."""
        return self.reassigner.alter(topic, requests, live, self.epoch)

    def _elect(
        self, topic: str, index: int, replicas: list[int], state: PartitionState, live: set[int], unclean: bool
    ) -> PartitionState | None:
        isr_alive = [b for b in state.isr if b in live]
        if state.leader in live:
            if len(isr_alive) == len(state.isr):
                return None
            # a follower died: shrink the ISR now rather than after replica.lag.time.max.ms
            return PartitionState(state.leader, state.leader_epoch + 1, isr_alive, self.epoch)
        # the leader is gone: the first live replica (in preference order) that is in the ISR
        candidates = [b for b in replicas if b in isr_alive]
        if candidates:
            leader = candidates[0]
            log.info("electing %d as leader of %s-%d (epoch %d)", leader, topic, index, state.leader_epoch + 1)
            return PartitionState(leader, state.leader_epoch + 1, isr_alive, self.epoch)
        if unclean:
            alive = [b for b in replicas if b in live]
            if alive:
                log.warning(
                    "UNCLEAN leader election for %s-%d: %d was not in the ISR %s; committed messages may be lost",
                    topic,
                    index,
                    alive[0],
                    state.isr,
                )
                return PartitionState(alive[0], state.leader_epoch + 1, [alive[0]], self.epoch)
        if state.leader == NO_LEADER:
            return None
        log.warning("%s-%d has no live in-sync replica (ISR %s): offline until one returns", topic, index, state.isr)
        # Kafka keeps the last ISR member in the ISR so that it can take over when it returns.
        return PartitionState(
            NO_LEADER, state.leader_epoch + 1, state.isr[-1:] if not isr_alive else isr_alive, self.epoch
        )

    def preferred_leader_moves(self, metadata: MetadataCache, imbalance_percentage: int = 10) -> int:
        """auto.leader.rebalance.enable: give leadership back to live, in-sync preferred replicas.

        As in Kafka, only brokers whose share of preferred-but-not-leading partitions exceeds
        leader.imbalance.per.broker.percentage get their leaderships back.
        """
        if not self.is_active:
            return 0
        preferred_of: dict[int, list[tuple]] = {}
        for topic in metadata.topics.values():
            for index, replicas in topic.replicas.items():
                preferred_of.setdefault(replicas[0], []).append((topic, index))
        moves = 0
        offline = metadata.offline_replicas
        for broker_id, owned in preferred_of.items():
            if broker_id not in metadata.brokers:
                continue
            off = [
                (t, i)
                for t, i in owned
                if t.states.get(i) is not None
                and t.states[i].leader != broker_id
                and broker_id in t.states[i].isr
                and broker_id not in offline.get((t.name, i), ())
            ]
            if not off or 100 * len(off) / len(owned) <= imbalance_percentage:
                continue
            moving = [
                (
                    topic,
                    index,
                    PartitionState(
                        broker_id, topic.states[index].leader_epoch + 1, topic.states[index].isr, self.epoch
                    ),
                )
                for topic, index in off
            ]
            results = self.store.set_many(
                [
                    (model.partition_state_path(topic.name, index), new.to_json(), topic.state_versions.get(index, -1))
                    for topic, index, new in moving
                ]
            )
            for (topic, index, new), result in zip(moving, results, strict=True):
                if not isinstance(result, StoreError):  # else changed meanwhile: the next check looks again
                    metadata.set_state(topic.name, index, new, result)
                    moves += 1
                    self.leader_elections += 1
        return moves

    def resign(self) -> None:
        self.is_active = False


__all__ = ["Controller", "validate_topic_name", "BadVersionError"]
