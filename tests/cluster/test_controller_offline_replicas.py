"""A replica in a failed log dir counts as dead for elections, though its broker lives.

The broker lists such replicas in its /brokers/ids registration; the controller's reconcile
then elects another in-sync replica and drops the broker from the ISR (Kafka's offline replica).
"""

from strom.cluster import model
from strom.cluster.controller import NO_LEADER, Controller
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker
from strom.storage.log_config import LogConfig


def register(store, broker_id: int, offline=frozenset()) -> None:
    data = Broker(broker_id, "127.0.0.1", 9000 + broker_id, None, frozenset(offline)).to_json()
    path = model.broker_path(broker_id)
    if store.exists(path):
        store.set(path, data)
    else:
        store.create(path, data, ephemeral=True, makepath=True)


def setup(tmp_path):
    store = LocalStore(str(tmp_path))
    for broker_id in (0, 1, 2):
        register(store, broker_id)
    controller = Controller(store, 0, LogConfig())
    controller.elect()
    store.ensure_path(model.BROKERS_TOPICS)
    controller.create_topic("t", 2, 3, assignment={0: [0, 1, 2], 1: [1, 0, 2]})
    controller.create_topic("one", 1, 1, assignment={0: [0]})
    metadata = MetadataCache()
    metadata.load(store)
    return store, controller, metadata


def test_registration_round_trips_offline_replicas_and_stays_kafkas_json_without_them():
    plain = Broker(1, "h", 9092)
    assert b"offline_replicas" not in plain.to_json()
    assert Broker.from_json(1, plain.to_json()).offline_replicas == frozenset()
    failed = Broker(1, "h", 9092, "r1", frozenset({("t", 0), ("t", 2), ("u", 5)}))
    assert b'"offline_replicas":{"t":[0,2],"u":[5]}' in failed.to_json()
    assert Broker.from_json(1, failed.to_json()).offline_replicas == failed.offline_replicas


def test_offline_replicas_lose_leadership_and_isr_membership(tmp_path):
    store, controller, metadata = setup(tmp_path)
    assert [metadata.topics["t"].states[i].leader for i in range(2)] == [0, 1]
    assert metadata.topics["one"].states[0].leader == 0

    register(store, 0, {("t", 0), ("t", 1), ("one", 0)})
    metadata.load(store)
    assert metadata.offline_replicas == {("t", 0): {0}, ("t", 1): {0}, ("one", 0): {0}}
    assert len(controller.reconcile(metadata, lambda topic: False)) == 3
    metadata.load(store)
    states = metadata.topics["t"].states
    assert (states[0].leader, states[0].isr, states[0].leader_epoch) == (1, [1, 2], 1)  # leader moved
    assert (states[1].leader, states[1].isr) == (1, [1, 2])  # a follower left the ISR
    only = metadata.topics["one"].states[0]
    assert (only.leader, only.isr) == (NO_LEADER, [0])  # no other replica: offline, as in Kafka
    assert len(controller.reconcile(metadata, lambda topic: False)) == 0  # settled
    # and the preferred-leader pass does not hand leadership back while the replica is offline
    assert controller.preferred_leader_moves(metadata, 0) == 0

    register(store, 0)  # the broker restarted with its dir repaired: its registration lists nothing
    metadata.load(store)
    assert len(controller.reconcile(metadata, lambda topic: False)) == 1
    metadata.load(store)
    assert metadata.topics["one"].states[0].leader == 0  # the last ISR member leads again


def test_an_unclean_election_never_picks_an_offline_replica(tmp_path):
    store, controller, metadata = setup(tmp_path)
    register(store, 0, {("one", 0)})
    metadata.load(store)
    controller.reconcile(metadata, lambda topic: True)
    metadata.load(store)
    assert metadata.topics["one"].states[0].leader == NO_LEADER
