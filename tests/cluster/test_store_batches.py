"""The pipelined many-node calls of both metadata stores, and the metadata cache's partial reload.

A 10,000-partition cluster reads and writes one znode per partition; these calls are what keep
that from taking one ZooKeeper round trip each. They must answer exactly as the single calls do,
node by node, on a real ZooKeeper and on the embedded store.
"""

from __future__ import annotations

import uuid

import pytest

from strom.cluster import model
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import PartitionState, TopicAssignment
from strom.cluster.store import BadVersionError, NodeExistsError, NoNodeError
from strom.cluster.zk_store import PIPELINE_DEPTH, ZkStore


@pytest.fixture(params=["zookeeper", "embedded"])
def store(request, tmp_path):
    if request.param == "embedded":
        made = LocalStore(str(tmp_path))
    else:
        connect = request.getfixturevalue("zookeeper") + f"/batches-{uuid.uuid4().hex[:8]}"
        made = ZkStore(connect, session_timeout_ms=6000)
    try:
        yield made
    finally:
        made.close()


def test_many_node_calls_answer_node_by_node(store):
    count = PIPELINE_DEPTH + 7  # more than one pipelined chunk
    store.ensure_path("/t")
    paths = [f"/t/{i}" for i in range(count)]
    created = store.create_many([(path, b"v0-%d" % i) for i, path in enumerate(paths)])
    assert created == [None] * count
    again = store.create_many([(paths[0], b"x"), ("/t/absent-parent/child", b"x")])
    assert isinstance(again[0], NodeExistsError) and isinstance(again[1], NoNodeError)

    found = store.get_many([*paths, "/t/missing"])
    assert found[:count] == [(b"v0-%d" % i, 0) for i in range(count)]
    assert found[count] is None

    # compare-and-set per node: right versions win, a stale one and a missing node lose alone
    writes = [(path, b"v1-%d" % i, 0) for i, path in enumerate(paths)]
    writes[3] = (paths[3], b"stale", 5)
    writes.append(("/t/missing", b"x", -1))
    results = store.set_many(writes)
    assert isinstance(results[3], BadVersionError) and isinstance(results[-1], NoNodeError)
    assert [r for i, r in enumerate(results[:count]) if i != 3] == [1] * (count - 1)
    assert store.get(paths[3]) == (b"v0-3", 0)
    assert store.get(paths[-1]) == (b"v1-%d" % (count - 1), 1)


def test_a_changed_partition_state_is_reloaded_alone(store):
    """A watch on a partition state re-reads that state alone and names it in the delta."""
    topic = TopicAssignment("orders", {p: [1] for p in range(3)})
    store.create(model.topic_path("orders"), topic.to_json(), makepath=True)
    for p in range(3):
        store.create(model.partition_state_path("orders", p), PartitionState(1, 0, [1], 1).to_json(), makepath=True)
    fired: list[str] = []
    cache = MetadataCache()
    cache.load(store, watch=fired.append)
    assert {p: s.leader_epoch for p, s in cache.topics["orders"].states.items()} == {0: 0, 1: 0, 2: 0}

    path = model.partition_state_path("orders", 1)
    store.set(path, PartitionState(1, 4, [1], 1).to_json(), 0)
    _wait_for(lambda: path in fired)
    assert cache.apply_changes(store, {path}, watch=fired.append).partitions == {("orders", 1)}
    assert cache.topics["orders"].states[1].leader_epoch == 4
    assert cache.topics["orders"].state_versions[1] == 1
    assert cache.topics["orders"].states[0].leader_epoch == 0

    # the watch was set again by the partial read: the next change is reported too
    fired.clear()
    store.set(path, PartitionState(1, 5, [1], 1).to_json(), 1)
    _wait_for(lambda: path in fired)

    # a topic znode is re-read alone too (unchanged here); a state of a topic not held is not read
    assert not cache.apply_changes(store, {model.topic_path("orders")}, watch=fired.append)
    assert not cache.apply_changes(store, {model.partition_state_path("unknown", 0)}, watch=fired.append)
    assert "unknown" not in cache.topics


def _wait_for(condition, timeout_s: float = 10) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the watch did not fire"
        time.sleep(0.01)
