"""Every broker's in-memory view of the cluster, read from the metadata store.

Metadata, Produce and Fetch consult this cache, never the store, so a request never waits on
ZooKeeper. ``load`` re-reads everything (at startup, after a new ZooKeeper session, after a
failed read); ``apply_changes`` re-reads only the znodes whose watches fired and says what
changed (a ``MetadataDelta``), so that the controller and the replica manager look again at just
those partitions. In a cluster of 10,000 partitions a broker's death then costs the three
registrations under /brokers/ids, not 10,000 partition states, and a leader election one read
per changed partition. Reads are pipelined (``get_many``).

A state this broker wrote itself (the controller's elections, a leader's ISR change) is put in
the cache with the version the write returned (``set_state``); the read that its watch causes
finds that version and reports no change.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from strom.cluster import model
from strom.cluster.model import Broker, PartitionState, TopicAssignment
from strom.cluster.store import MetadataStore, NoNodeError, Watcher

TopicPartition = tuple[str, int]


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    replicas: dict[int, list[int]]
    states: dict[int, PartitionState] = field(default_factory=dict)
    state_versions: dict[int, int] = field(default_factory=dict)  # znode versions, for compare-and-set
    configs: dict[str, str] = field(default_factory=dict)
    # a partition reassignment in progress (KIP-455): replicas being added and being removed
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)
    version: int = -1  # the topic znode's version, for the controller's compare-and-set

    @property
    def partition_count(self) -> int:
        return len(self.replicas)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0


@dataclass
class MetadataDelta:
    """What one read of the store changed, for the passes that act on metadata.

    ``full``: everything was re-read, so anything may have changed. Otherwise ``partitions``
    lists those whose state, replicas or offline replicas changed, or that were added or removed
    (a removed topic's too); ``brokers`` the brokers that registered, went away or changed their
    registration; ``topics_removed`` the topics gone or replaced by a new topic of the same name;
    ``configs`` the topics whose config changed.
    """

    full: bool = False
    partitions: set[TopicPartition] = field(default_factory=set)
    brokers: set[int] = field(default_factory=set)
    topics_removed: set[str] = field(default_factory=set)
    configs: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return self.full or bool(self.partitions or self.brokers or self.topics_removed or self.configs)


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, Broker] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.controller_id = -1
        self.cluster_id = ""
        # (topic, partition) -> brokers whose replica of it is offline (a failed log dir)
        self.offline_replicas: dict[tuple[str, int], frozenset[int]] = {}
        # dynamic broker configs: "<id>" or "<default>" -> {key: value} (/config/brokers)
        self.broker_configs: dict[str, dict[str, str]] = {}
        self._written: set[TopicPartition] = set()  # states set by set_state, not yet in a delta

    # -- reading everything ------------------------------------------------------------------------
    def load(self, store: MetadataStore, watch: Watcher | None = None) -> MetadataDelta:
        """Re-read everything; with ``watch``, ask to be told when any of it changes."""
        brokers = self._read_brokers(store, watch)
        try:
            names = store.children(model.BROKERS_TOPICS, watch)
        except NoNodeError:
            names = []
        topics = {info.name: info for info in self._read_topics(store, names, watch) if info is not None}
        self._keep_newer_states(topics)
        self._read_states(store, [(info, p) for info in topics.values() for p in info.replicas], watch)
        self._read_controller(store, watch)
        cluster = store.get_or_none(model.CLUSTER_ID)
        if cluster is not None:
            self.cluster_id = json.loads(cluster[0])["id"]
        self.broker_configs = self._read_broker_configs(store, watch)
        self.brokers = brokers
        self.topics = topics
        self.offline_replicas = _offline(brokers)
        self._written.clear()
        return MetadataDelta(full=True)

    def shadow(self) -> MetadataCache:
        """A copy holding just what decides which znodes a reload reads: the topics, their ids and
        their partitions. A reload of the copy, on another thread, asks the store what a reload of
        this cache would ask (see ``read_ahead``)."""
        copy = MetadataCache()
        copy.topics = {
            name: TopicInfo(name, info.topic_id, dict.fromkeys(info.replicas, [])) for name, info in self.topics.items()
        }
        return copy

    def _keep_newer_states(self, topics: dict[str, TopicInfo]) -> None:
        """A reload's reads may predate a state this broker wrote since (they were made on a thread
        while the loop went on): the state it holds stays unless the store's is newer."""
        for name, info in topics.items():
            old = self.topics.get(name)
            if old is not None and old.topic_id == info.topic_id:
                for p in info.replicas.keys() & old.states.keys():
                    info.states[p] = old.states[p]
                    info.state_versions[p] = old.state_versions[p]

    # -- reading what changed ----------------------------------------------------------------------
    def apply_changes(self, store: MetadataStore, paths: Iterable[str], watch: Watcher | None = None) -> MetadataDelta:
        """Re-read the znodes among ``paths`` (watches that fired) and say what changed.

        Registrations, the controller, topics, topic and broker configs and partition states are
        each re-read alone (and watched again); a path of any other kind makes it a full ``load``.
        A state of a topic or partition the cache does not hold is not read: its topic went away
        (or is re-read whole, as new, through its own znode).
        """
        states: list[TopicPartition] = []
        topics: set[str] = set()
        configs: set[str] = set()
        brokers = controller = topic_list = broker_configs = False
        for path in paths:
            match = _STATE_PATH.fullmatch(path)
            if match is not None:
                states.append((match[1], int(match[2])))
            elif path == model.BROKERS_IDS or path.startswith(model.BROKERS_IDS + "/"):
                brokers = True
            elif path == model.BROKERS_TOPICS:
                topic_list = True
            elif (name := _child(path, model.BROKERS_TOPICS)) is not None:
                topics.add(name)
            elif (name := _child(path, model.CONFIG_TOPICS)) is not None:
                configs.add(name)
            elif path == model.CONFIG_BROKERS or path.startswith(model.CONFIG_BROKERS + "/"):
                broker_configs = True
            elif path == model.CONTROLLER:
                controller = True
            else:
                return self.load(store, watch)
        delta = MetadataDelta()
        if brokers:
            self._apply_brokers(self._read_brokers(store, watch), delta)
        if controller:
            self._read_controller(store, watch)
        if broker_configs:
            self.broker_configs = self._read_broker_configs(store, watch)
        if topic_list:
            try:
                names = set(store.children(model.BROKERS_TOPICS, watch))
            except NoNodeError:
                names = set()
            topics |= names - self.topics.keys()
            for gone in self.topics.keys() - names:
                self._drop_topic(gone, delta)
        read: set[TopicPartition] = set()
        if topics:
            read = self._apply_topics(store, sorted(topics), watch, delta)
        configs -= topics  # a topic read whole has its config read too
        if configs:
            self._apply_configs(store, sorted(configs), watch, delta)
        if states:
            wanted = [
                (info, p)
                for name, p in states
                if (name, p) not in read and (info := self.topics.get(name)) is not None and p in info.replicas
            ]
            for info, p in self._read_states(store, wanted, watch):
                delta.partitions.add((info.name, p))
        delta.partitions |= self.take_written()
        return delta

    def set_state(self, topic: str, partition: int, state: PartitionState, version: int) -> None:
        """A state this broker has just written, with the version the store gave it; the next
        delta (or ``take_written``) names the partition, as if a read had found it."""
        info = self.topics.get(topic)
        if info is not None and partition in info.replicas and version > info.state_versions.get(partition, -1):
            info.states[partition] = state
            info.state_versions[partition] = version
            self._written.add((topic, partition))

    def take_written(self) -> set[TopicPartition]:
        """The partitions ``set_state`` changed since the last delta."""
        written, self._written = self._written, set()
        return written

    # -- the parts ---------------------------------------------------------------------------------
    @staticmethod
    def _read_brokers(store: MetadataStore, watch: Watcher | None) -> dict[int, Broker]:
        try:
            ids = [int(child) for child in store.children(model.BROKERS_IDS, watch)]
        except NoNodeError:
            return {}
        found = store.get_many([model.broker_path(b) for b in ids], watch)
        return {b: Broker.from_json(b, got[0]) for b, got in zip(ids, found, strict=True) if got is not None}

    def _apply_brokers(self, brokers: dict[int, Broker], delta: MetadataDelta) -> None:
        delta.brokers.update(b for b in brokers.keys() | self.brokers.keys() if brokers.get(b) != self.brokers.get(b))
        offline = _offline(brokers)
        delta.partitions.update(
            key
            for key in offline.keys() | self.offline_replicas.keys()
            if offline.get(key) != self.offline_replicas.get(key)
        )
        self.brokers = brokers
        self.offline_replicas = offline

    def _read_controller(self, store: MetadataStore, watch: Watcher | None) -> None:
        controller = store.get_or_none(model.CONTROLLER)
        if watch is not None:
            store.exists(model.CONTROLLER, watch)
        self.controller_id = json.loads(controller[0])["brokerid"] if controller else -1

    @staticmethod
    def _read_broker_configs(store: MetadataStore, watch: Watcher | None) -> dict[str, dict[str, str]]:
        broker_configs: dict[str, dict[str, str]] = {}
        try:
            entities = store.children(model.CONFIG_BROKERS, watch)
        except NoNodeError:
            if watch is not None:
                store.exists(model.CONFIG_BROKERS, watch)
            return broker_configs
        found = store.get_many([model.broker_config_path(entity) for entity in entities], watch)
        for entity, got in zip(entities, found, strict=True):
            if got is not None:
                broker_configs[entity] = model.parse_topic_config(got[0])
        return broker_configs

    @staticmethod
    def _read_topics(store: MetadataStore, names: list[str], watch: Watcher | None) -> list[TopicInfo | None]:
        """Each topic's assignment and config (its states are read by the caller); None where it is gone."""
        assignments = store.get_many([model.topic_path(name) for name in names], watch)
        configs = store.get_many([model.topic_config_path(name) for name in names], watch)
        missing_configs = [model.topic_config_path(n) for n, c in zip(names, configs, strict=True) if c is None]
        if missing_configs and watch is not None:  # a read of a missing node leaves no watch; exists does
            store.exists_many(missing_configs, watch)
        topics: list[TopicInfo | None] = []
        for name, found, config in zip(names, assignments, configs, strict=True):
            if found is None:
                topics.append(None)
                continue
            assignment = TopicAssignment.from_json(name, found[0])
            info = TopicInfo(
                name,
                assignment.topic_id,
                assignment.partitions,
                adding=assignment.adding,
                removing=assignment.removing,
                version=found[1],
            )
            if config is not None:
                info.configs = model.parse_topic_config(config[0])
            topics.append(info)
        return topics

    def _apply_topics(
        self, store: MetadataStore, names: list[str], watch: Watcher | None, delta: MetadataDelta
    ) -> set[TopicPartition]:
        """New, changed or gone topics: a new one (or one re-created under a new id) is read whole,
        a changed one has its new partitions' states read and its changed partitions reported.
        Returns the partitions whose states were read."""
        to_read: list[tuple[TopicInfo, int]] = []
        for name, info in zip(names, self._read_topics(store, names, watch), strict=True):
            old = self.topics.get(name)
            if info is None:
                if old is not None:
                    self._drop_topic(name, delta)
                continue
            if old is None or old.topic_id != info.topic_id:
                if old is not None:
                    self._drop_topic(name, delta)
                self.topics[name] = info
                to_read.extend((info, p) for p in info.replicas)
                delta.partitions.update((name, p) for p in info.replicas)
                delta.configs.add(name)
                continue
            for p in old.replicas.keys() | info.replicas.keys():
                if (
                    old.replicas.get(p) != info.replicas.get(p)
                    or old.adding.get(p) != info.adding.get(p)
                    or old.removing.get(p) != info.removing.get(p)
                ):
                    delta.partitions.add((name, p))
            for p in old.replicas.keys() - info.replicas.keys():
                old.states.pop(p, None)
                old.state_versions.pop(p, None)
            to_read.extend((old, p) for p in info.replicas.keys() - old.replicas.keys())
            if old.configs != info.configs:
                delta.configs.add(name)
                delta.partitions.update((name, p) for p in info.replicas)
            old.replicas, old.adding, old.removing = info.replicas, info.adding, info.removing
            old.configs, old.version = info.configs, info.version
        self._read_states(store, to_read, watch)
        return {(info.name, p) for info, p in to_read}

    def _apply_configs(
        self, store: MetadataStore, names: list[str], watch: Watcher | None, delta: MetadataDelta
    ) -> None:
        paths = [model.topic_config_path(name) for name in names]
        found = store.get_many(paths, watch)
        missing = [path for path, got in zip(paths, found, strict=True) if got is None]
        if missing and watch is not None:
            store.exists_many(missing, watch)
        for name, got in zip(names, found, strict=True):
            info = self.topics.get(name)
            if info is None:
                continue
            configs = model.parse_topic_config(got[0]) if got is not None else {}
            if configs != info.configs:
                info.configs = configs
                delta.configs.add(name)
                delta.partitions.update((name, p) for p in info.replicas)

    def _drop_topic(self, name: str, delta: MetadataDelta) -> None:
        info = self.topics.pop(name, None)
        if info is not None:
            delta.topics_removed.add(name)
            delta.partitions.update((name, p) for p in info.replicas)

    def _read_states(
        self, store: MetadataStore, wanted: list[tuple[TopicInfo, int]], watch: Watcher | None
    ) -> list[tuple[TopicInfo, int]]:
        """Read partition states into the cache; returns those whose version changed."""
        paths = [model.partition_state_path(info.name, p) for info, p in wanted]
        found = store.get_many(paths, watch)
        if watch is not None:
            # a missing state: an exists-watch reports its creation; but one created between the
            # two calls is watched yet never read, and nothing fires again: read it now
            absent = [i for i, got in enumerate(found) if got is None]
            if absent:
                present = store.exists_many([paths[i] for i in absent], watch)
                again = [i for i, there in zip(absent, present, strict=True) if there]
                for i, got in zip(again, store.get_many([paths[i] for i in again], watch), strict=True):
                    found[i] = got
        changed = []
        for (info, partition), got in zip(wanted, found, strict=True):
            if got is None:
                if partition in info.states:
                    changed.append((info, partition))
                info.states.pop(partition, None)
                info.state_versions.pop(partition, None)
            elif got[1] > info.state_versions.get(partition, -1):  # an older one: this broker wrote since
                info.states[partition] = PartitionState.from_json(got[0])
                info.state_versions[partition] = got[1]
                changed.append((info, partition))
        return changed

    # -- lookups -----------------------------------------------------------------------------------
    def topic_configs(self, topic: str) -> dict[str, str]:
        info = self.topics.get(topic)
        return info.configs if info else {}

    def leader_of(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        state = info.states.get(partition) if info else None
        return state.leader if state else -1

    def partitions_of_brokers(self, brokers: set[int]) -> set[TopicPartition]:
        """Partitions that have one of ``brokers`` as a replica, leader or ISR member."""
        found: set[TopicPartition] = set()
        for info in self.topics.values():
            for p, replicas in info.replicas.items():
                state = info.states.get(p)
                if not brokers.isdisjoint(replicas) or (
                    state is not None and (state.leader in brokers or not brokers.isdisjoint(state.isr))
                ):
                    found.add((info.name, p))
        return found


_STATE_PATH = re.compile(re.escape(model.BROKERS_TOPICS) + r"/([^/]+)/partitions/(\d+)/state")


def state_key(path: str) -> TopicPartition | None:
    """(topic, partition) of a partition state znode's path; None for any other path."""
    match = _STATE_PATH.fullmatch(path)
    return (match[1], int(match[2])) if match else None


def _child(path: str, parent: str) -> str | None:
    """The name of ``path`` when it is a direct child of ``parent``."""
    if path.startswith(parent + "/"):
        name = path[len(parent) + 1 :]
        if name and "/" not in name:
            return name
    return None


def _offline(brokers: dict[int, Broker]) -> dict[tuple[str, int], frozenset[int]]:
    offline: dict[tuple[str, int], set[int]] = {}
    for broker in brokers.values():
        for key in broker.offline_replicas:
            offline.setdefault(key, set()).add(broker.broker_id)
    return {key: frozenset(ids) for key, ids in offline.items()}
