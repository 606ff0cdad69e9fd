"""auto.leader.rebalance.enable: the controller's preferred-leader pass, on the embedded store."""

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker, PartitionState
from strom.storage.log_config import LogConfig


def cluster(tmp_path, leaders):
    store = LocalStore(str(tmp_path))
    for broker_id in (0, 1, 2):
        store.create(
            model.broker_path(broker_id),
            Broker(broker_id, "127.0.0.1", 9000 + broker_id).to_json(),
            ephemeral=True,
            makepath=True,
        )
    controller = Controller(store, 0, LogConfig())
    controller.elect()
    store.ensure_path(model.BROKERS_TOPICS)
    controller.create_topic("t", 3, 3, assignment={0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
    for index, leader in enumerate(leaders):
        path = model.partition_state_path("t", index)
        store.set(path, PartitionState(leader, 1, [0, 1, 2]).to_json())
    metadata = MetadataCache()
    metadata.load(store)
    return store, controller, metadata


def test_leadership_returns_to_the_preferred_replica(tmp_path):
    store, controller, metadata = cluster(tmp_path, [1, 1, 2])  # broker 0 leads none of its partitions
    assert controller.preferred_leader_moves(metadata, 10) == 1
    metadata.load(store)
    assert [metadata.topics["t"].states[i].leader for i in range(3)] == [0, 1, 2]
    assert metadata.topics["t"].states[0].leader_epoch == 2


def test_balanced_cluster_is_left_alone(tmp_path):
    store, controller, metadata = cluster(tmp_path, [0, 1, 2])
    assert controller.preferred_leader_moves(metadata, 10) == 0
