"""This broker's registration built from its collaborators alone, no broker: the embedded store, a
real replica manager over logs in a tmp dir and a real controller; what is checked is the
/brokers/ids/<id> znode the rest of the cluster reads."""

from __future__ import annotations

import asyncio

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.model import Broker
from strom.server.config import BrokerConfig
from strom.server.registration import BrokerRegistration
from strom.storage.log_config import LogConfig
from tests.replication.replicas import make_replicas


def test_the_znode_carries_the_endpoints_then_the_offline_replicas_then_new_endpoints(tmp_path):
    replicas = make_replicas(tmp_path, broker_id=1)
    store, reloads = replicas.store, []
    controller = Controller(store, 1, LogConfig())
    loop = asyncio.new_event_loop()
    try:
        registration = BrokerRegistration(
            1,
            lambda: store,
            lambda: replicas.manager,
            lambda: controller,
            BrokerConfig,
            lambda: loop,
            asyncio.Event(),
            lambda: reloads.append("everything"),
        )
        endpoints = (("PLAINTEXT", "127.0.0.1", 9092),)
        registration.info = Broker(1, "127.0.0.1", 9092, endpoints=endpoints, protocols=(("PLAINTEXT", "PLAINTEXT"),))
        store.ensure_path(model.BROKERS_IDS)  # the broker's start() makes the base paths first
        registration.register()

        def znode() -> Broker:
            return Broker.from_json(1, store.get(model.broker_path(1))[0])

        assert znode().endpoints == endpoints and znode().offline_replicas == frozenset()

        replicas.manager.offline.add(("orders", 3))  # its log dir failed
        registration.publish_offline_replicas()
        assert znode().offline_replicas == {("orders", 3)}  # the controller moves it

        moved = (("PLAINTEXT", "127.0.0.1", 9093),)
        assert registration.publish_endpoints(moved, (("PLAINTEXT", "PLAINTEXT"),))
        assert znode().endpoints == moved and znode().offline_replicas == {("orders", 3)}
        assert not registration.publish_endpoints(moved, (("PLAINTEXT", "PLAINTEXT"),))  # nothing new
        registration.check_session()  # the embedded store has no session to lose: never fenced
        assert not replicas.manager.fenced and reloads == []
        registration.close()
    finally:
        loop.close()
