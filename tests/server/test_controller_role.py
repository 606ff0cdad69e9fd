"""This broker's part in the controller's work built from its collaborators alone, no broker: a real
controller over the embedded store (which answers at once, so elections and writes are made right
away), a real metadata cache and a real replica manager over logs in a tmp dir."""

from __future__ import annotations

import asyncio

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.model import Broker
from strom.server.controller_role import ControllerRole
from strom.storage.log_config import LogConfig
from tests.replication.replicas import Replicas, make_replicas


def role_of(replicas: Replicas, controller: Controller, reloads: list[str]) -> ControllerRole:
    return ControllerRole(
        lambda: controller,
        replicas.metadata,
        lambda: replicas.store,
        lambda: replicas.manager,
        lambda topic: False,  # unclean.leader.election.enable
        lambda: reloads.append("everything"),
        lambda: False,  # started
        asyncio.Event(),
    )


def test_an_empty_office_is_taken_and_a_new_topic_gets_its_leaders(tmp_path):
    replicas = make_replicas(tmp_path, broker_id=1)
    store, metadata = replicas.store, replicas.metadata
    store.ensure_path(model.BROKERS_TOPICS)
    store.create(model.broker_path(1), Broker(1, "127.0.0.1", 9001).to_json(), ephemeral=True, makepath=True)
    controller, reloads = Controller(store, 1, LogConfig()), []
    role = role_of(replicas, controller, reloads)

    metadata.load(store)
    assert metadata.controller_id == -1
    role.after_metadata_pass(metadata.load(store))
    assert controller.is_active and metadata.controller_id == 1  # this broker stood and won

    # a topic whose znodes another broker wrote: this controller's next pass gives it leaders
    Controller(store, 2, LogConfig()).create_topic("orders", 2, 1)  # broker 2 is not the controller
    delta = metadata.load(store)
    written = role.after_metadata_pass(delta)
    assert set(written) >= {model.partition_state_path("orders", p) for p in (0, 1)}
    states = metadata.topics["orders"].states
    assert {p: (states[p].leader, states[p].isr) for p in (0, 1)} == {0: (1, [1]), 1: (1, [1])}
    assert {("orders", 0), ("orders", 1)} <= delta.partitions  # what the replica manager's pass looks at
    assert reloads == []  # every write was answered
    role.close()
