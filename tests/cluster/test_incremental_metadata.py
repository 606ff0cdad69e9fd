"""Metadata changes are read and acted on per changed znode, not by re-reading the cluster.

A broker's death re-reads the registrations under /brokers/ids and nothing else; the controller
then writes new states only for the partitions that broker was part of, in one batch, and puts
them in its cache with their versions, so that neither it nor the read its watches cause has to
read them back. Every test also checks that the cache so kept equals a fresh full read.
"""

from __future__ import annotations

import time
import uuid

import pytest

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker
from strom.cluster.read_ahead import ReadAheadStore
from strom.cluster.zk_store import ZkStore
from strom.storage.log_config import LogConfig

# brokers 0 and 1 hold "far"; "near" has a replica on broker 2 in each partition
FAR = {p: [p % 2, 1 - p % 2] for p in range(40)}
NEAR = {p: [2, 0, 1] if p % 2 else [0, 2, 1] for p in range(6)}


class Counting:
    """Counts the znodes a store is asked to read (get, get_many, exists, children)."""

    def __init__(self, store):
        self.store, self.reads = store, 0

    def __getattr__(self, name):
        return getattr(self.store, name)

    def get(self, path, watch=None):
        self.reads += 1
        return self.store.get(path, watch)

    def get_or_none(self, path):
        self.reads += 1
        return self.store.get_or_none(path)

    def get_many(self, paths, watch=None):
        self.reads += len(paths)
        return self.store.get_many(paths, watch)

    def exists(self, path, watch=None):
        self.reads += 1
        return self.store.exists(path, watch)

    def exists_many(self, paths, watch=None):
        self.reads += len(paths)
        return self.store.exists_many(paths, watch)

    def children(self, path, watch=None):
        self.reads += 1
        return self.store.children(path, watch)


@pytest.fixture(params=["zookeeper", "embedded"])
def store(request, tmp_path):
    if request.param == "embedded":
        made = LocalStore(str(tmp_path))
    else:
        connect = request.getfixturevalue("zookeeper") + f"/incremental-{uuid.uuid4().hex[:8]}"
        made = ZkStore(connect, session_timeout_ms=6000)
    try:
        yield made
    finally:
        made.close()


def register(store, broker_id: int) -> None:
    store.create(
        model.broker_path(broker_id), Broker(broker_id, "127.0.0.1", 9000 + broker_id).to_json(), ephemeral=True
    )


def cluster(store) -> tuple[Controller, MetadataCache, set[str]]:
    store.ensure_path(model.BROKERS_IDS)
    store.ensure_path(model.BROKERS_TOPICS)
    for broker_id in (0, 1, 2):
        register(store, broker_id)
    controller = Controller(store, 0, LogConfig())
    assert controller.elect()
    controller.create_topic("far", 0, 0, assignment=FAR)
    controller.create_topic("near", 0, 0, assignment=NEAR)
    fired: set[str] = set()
    cache = MetadataCache()
    cache.load(store, watch=fired.add)
    return controller, cache, fired


def versions(store, topic: str, partitions) -> dict[int, int]:
    return {p: store.get(model.partition_state_path(topic, p))[1] for p in partitions}


def same_as_a_fresh_read(store, cache: MetadataCache) -> None:
    fresh = MetadataCache()
    fresh.load(store)
    assert fresh.brokers == cache.brokers
    assert {n: (t.replicas, t.states, t.state_versions, t.configs) for n, t in fresh.topics.items()} == {
        n: (t.replicas, t.states, t.state_versions, t.configs) for n, t in cache.topics.items()
    }


def wait_fired(fired: set[str], path: str) -> None:
    deadline = time.monotonic() + 10
    while path not in fired:
        assert time.monotonic() < deadline, f"no watch fired for {path}"
        time.sleep(0.01)


def test_a_broker_death_rereads_the_registrations_and_writes_only_its_partitions(store):
    controller, cache, fired = cluster(store)
    far_before = versions(store, "far", FAR)

    store.delete(model.broker_path(2))  # its session expired
    wait_fired(fired, model.BROKERS_IDS)
    counting = Counting(store)
    delta = cache.apply_changes(counting, set(fired), watch=fired.add)
    fired.clear()
    assert (delta.brokers, delta.partitions, delta.full) == ({2}, set(), False)
    assert counting.reads <= 4  # the children of /brokers/ids and the two registrations left
    assert set(cache.brokers) == {0, 1}

    written = controller.reconcile(cache, lambda topic: False, delta)
    assert sorted(written) == sorted(model.partition_state_path("near", p) for p in NEAR)
    for p, replicas in NEAR.items():  # leadership moved off 2; 2 left every ISR
        state = cache.topics["near"].states[p]
        assert state.leader == (0 if replicas[0] == 2 else replicas[0])
        assert 2 not in state.isr
    assert versions(store, "far", FAR) == far_before  # unrelated partitions untouched
    same_as_a_fresh_read(store, cache)  # the cache holds what was written, with its versions
    assert cache.take_written() == {("near", p) for p in NEAR}  # for the replica manager's pass

    # the watches of the controller's own writes: read again (to watch again), but nothing changed
    for p in NEAR:
        wait_fired(fired, model.partition_state_path("near", p))
    assert not cache.apply_changes(store, set(fired), watch=fired.add)

    # the broker comes back: nothing to elect (its replicas are not in sync yet)
    fired.clear()
    register(store, 2)
    wait_fired(fired, model.BROKERS_IDS)
    back = cache.apply_changes(store, set(fired), watch=fired.add)
    assert back.brokers == {2}
    assert controller.reconcile(cache, lambda topic: False, back) == []
    same_as_a_fresh_read(store, cache)


def test_a_new_topic_and_a_config_change_are_read_alone(store):
    controller, cache, fired = cluster(store)
    controller.create_topic("later", 0, 0, assignment={0: [1, 0], 1: [0, 1]})
    wait_fired(fired, model.BROKERS_TOPICS)
    counting = Counting(store)
    delta = cache.apply_changes(counting, set(fired), watch=fired.add)
    fired.clear()
    assert delta.partitions == {("later", 0), ("later", 1)}
    assert counting.reads < len(FAR)  # the new topic's znodes, not every partition's state
    assert cache.leader_of("later", 0) == 1

    controller.alter_topic_config("far", {"retention.ms": "1000"})
    wait_fired(fired, model.topic_config_path("far"))
    delta = cache.apply_changes(store, set(fired), watch=fired.add)
    assert delta.configs == {"far"}
    assert cache.topic_configs("far") == {"retention.ms": "1000"}
    same_as_a_fresh_read(store, cache)

    fired.clear()
    controller.delete_topic("near")
    wait_fired(fired, model.BROKERS_TOPICS)
    delta = cache.apply_changes(store, set(fired), watch=fired.add)
    assert delta.topics_removed == {"near"}
    assert "near" not in cache.topics
    same_as_a_fresh_read(store, cache)


def test_a_state_changed_by_another_writer_is_reported(store):
    """A leader's ISR change (someone else's write) is read and named in the delta."""
    _, cache, fired = cluster(store)
    path = model.partition_state_path("far", 3)
    state, version = cache.topics["far"].states[3], cache.topics["far"].state_versions[3]
    shrunk = model.PartitionState(state.leader, state.leader_epoch, state.isr[:1], state.controller_epoch)
    store.set(path, shrunk.to_json(), version)
    wait_fired(fired, path)
    delta = cache.apply_changes(store, set(fired), watch=fired.add)
    assert delta.partitions == {("far", 3)}
    assert cache.topics["far"].states[3] == shrunk


def zookeeper_packets_received(connect: str) -> int:
    """ZooKeeper's own count of requests received (the srvr command), all sessions together."""
    import socket

    host, port = connect.split("/")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"srvr")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return int(next(line for line in answer.decode().splitlines() if line.startswith("Received:")).split()[1])


def test_a_killed_broker_costs_the_survivors_no_full_read(cluster):
    """kill -9 of a broker: its partitions get new leaders in every survivor's Metadata, the
    partitions it had no replica of keep their state znodes as they were, and ZooKeeper gets fewer
    requests in all than there are such partitions (a full re-read would be one per partition)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until

    wait_until(lambda: cluster.controller() >= 0, 20, "a controller")
    controller = cluster.controller()
    victim = next(b for b in cluster.brokers if b != controller)
    a, b = (x for x in cluster.brokers if x != victim)
    far = [[a, b] if p % 2 else [b, a] for p in range(200)]
    near = [[victim, a, b], [a, victim, b], [b, victim, a]]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name, assignment in (("far", far), ("near", near)):
        admin.create_topics(
            [NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)], request_timeout=30
        )[name].result(30)
        cluster.wait_full_isr(name, 60)

    def far_epochs() -> dict[int, tuple[int, int]]:
        """(leader, leader epoch) of each far partition: what the controller decides (a leader's own
        ISR change, say for a follower slowed by a loaded machine, changes neither)."""
        states = (cluster.state("far", p) for p in range(len(far)))
        return {p: (s.leader, s.leader_epoch) for p, s in enumerate(states) if s is not None}

    far_before = far_epochs()

    def led(broker_id: int) -> dict[str, dict[int, int]]:
        found = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap}).list_topics(timeout=10)
        return {t: {p: m.leader for p, m in found.topics[t].partitions.items()} for t in ("far", "near")}

    def wait_leaders(broker_id: int, near: dict[int, int], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (seen := led(broker_id))["near"] != near:
            assert time.monotonic() < deadline, f"broker {broker_id}'s Metadata shows {seen}, not near {near}"
            time.sleep(0.1)

    for broker_id in cluster.brokers:
        wait_leaders(broker_id, {0: victim, 1: a, 2: b}, 30)
    before = zookeeper_packets_received(cluster.zookeeper)
    cluster.kill(victim)
    for broker_id in (a, b):
        wait_leaders(broker_id, {0: a, 1: a, 2: b}, SESSION_TIMEOUT_MS / 1000 + 30)
    received = zookeeper_packets_received(cluster.zookeeper) - before
    for broker_id in (a, b):
        assert led(broker_id)["far"] == {p: replicas[0] for p, replicas in enumerate(far)}
    assert far_epochs() == far_before
    assert received < len(far), f"ZooKeeper received {received} requests during the failover"


def test_a_reload_read_ahead_on_a_shadow_is_answered_from_memory_and_never_undoes_a_newer_state(store):
    """The broker reads a reload's znodes on a thread (``ReadAheadStore`` on the cache's shadow)
    and applies them on its event loop: the reload there asks the store nothing, and reads that
    predate a state the broker wrote meanwhile do not put the older state back."""
    controller, cache, fired = cluster(store)
    store.delete(model.broker_path(2))
    wait_fired(fired, model.BROKERS_IDS)
    changed = set(fired) | {model.partition_state_path("near", p) for p in NEAR}
    fired.clear()

    reads = ReadAheadStore(store)
    cache.shadow().apply_changes(reads, changed, watch=fired.add)  # what the reader thread does
    everything = ReadAheadStore(store)
    MetadataCache().load(everything)  # the same for a full reload: its shadow starts empty
    # meanwhile the controller, on the loop, elects away from broker 2 and writes the states
    delta = cache.apply_changes(store, {model.BROKERS_IDS}, watch=fired.add)
    controller.reconcile(cache, lambda topic: False, delta)
    newer = {p: (cache.topics["near"].states[p], cache.topics["near"].state_versions[p]) for p in NEAR}

    reads.start_replay()
    cache.apply_changes(reads, changed, watch=fired.add)
    assert reads.missed == 0, "the reload on the loop asked the store again"
    assert {p: (cache.topics["near"].states[p], cache.topics["near"].state_versions[p]) for p in NEAR} == newer

    store.set(model.topic_config_path("far"), model.topic_config_json({"retention.ms": "1"}))  # after the reads
    everything.start_replay()
    cache.load(everything)
    assert everything.missed == 0
    assert {p: (cache.topics["near"].states[p], cache.topics["near"].state_versions[p]) for p in NEAR} == newer
    assert cache.topics["far"].configs == {}, "answered from the reads made ahead, not from the store"
    with pytest.raises(TypeError):
        everything.set(model.topic_config_path("far"), b"{}")
