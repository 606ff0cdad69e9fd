"""Topic creation on a broker's behalf built from its collaborators alone, no broker: a real
controller over the embedded store, a real metadata cache read back by the metadata pass given
here, and a real metadata reloader for what cannot be read now."""

from __future__ import annotations

import asyncio

import pytest

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker
from strom.cluster.store import StoreError
from strom.protocol.errors import ResourceExhaustedError
from strom.server.config import BrokerConfig
from strom.server.metadata_reload import MetadataReloader
from strom.server.topic_creation import TopicCreation
from strom.storage.log_config import LogConfig


class Cluster:
    """One broker's store, cache and controller, and the passes the creation asked for."""

    def __init__(self, config: BrokerConfig):
        self.store, self.metadata = LocalStore(None), MetadataCache()
        for path in (model.BROKERS_IDS, model.BROKERS_TOPICS, model.CONFIG_TOPICS):
            self.store.ensure_path(path)
        self.store.create(model.broker_path(1), Broker(1, "127.0.0.1", 9092).to_json(), ephemeral=True)
        self.controller = Controller(self.store, 1, LogConfig())
        assert self.controller.elect()
        self.metadata.load(self.store)
        self.passes: list[set[str]] = []
        self.failing = False
        self.stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        self.reloader = MetadataReloader(
            lambda: self.store, self.metadata, lambda changed, reads: None, lambda: loop, self.stop, lambda: None
        )
        self.topics = TopicCreation(
            1, self.metadata, lambda: self.controller, lambda: config, self.refresh, self.reloader
        )

    def refresh(self, changed: set[str]) -> None:
        self.passes.append(set(changed))
        if self.failing:
            raise StoreError("ZooKeeper does not answer")
        self.metadata.apply_changes(self.store, changed)


def test_a_created_topic_is_in_the_broker_metadata_when_the_call_returns():
    async def scenario() -> None:
        cluster = Cluster(BrokerConfig.from_mapping({"num.partitions": "2", "default.replication.factor": "3"}))
        cluster.topics.create("orders", 3, 1, {"retention.ms": "60000"})
        assert sorted(cluster.metadata.topics["orders"].states) == [0, 1, 2]  # read back, no reload waited for
        assert cluster.passes == [{model.BROKERS_TOPICS, model.topic_path("orders")}]  # the new topic alone
        assert cluster.metadata.topics["orders"].configs == {"retention.ms": "60000"}

        cluster.topics.create("checked", 1, 1, validate_only=True)
        assert (
            "checked" not in cluster.metadata.topics and cluster.store.get_or_none(model.topic_path("checked")) is None
        )

        cluster.topics.auto_create("named-by-metadata")  # num.partitions; the factor no more than the brokers
        auto = cluster.metadata.topics["named-by-metadata"]
        assert len(auto.states) == 2 and auto.replicas == {0: [1], 1: [1]}
        cluster.stop.set()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_topic_this_process_could_not_open_is_refused_before_anything_is_recorded():
    async def scenario() -> None:
        cluster = Cluster(BrokerConfig.from_mapping({}))
        with pytest.raises(ResourceExhaustedError, match="topic 'huge' was not created"):
            cluster.topics.create("huge", 10_000_000, 1)
        assert cluster.store.get_or_none(model.topic_path("huge")) is None and cluster.passes == []
        cluster.stop.set()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_write_that_cannot_be_read_back_is_reloaded_once_the_store_answers():
    async def scenario() -> None:
        cluster = Cluster(BrokerConfig.from_mapping({}))
        cluster.failing = True
        written = {model.topic_config_path("orders")}
        cluster.topics.read_back(written)  # the write stands: no error for the request
        assert cluster.passes == [written]
        assert written <= cluster.reloader.unapplied_changes()  # read again by the reloader
        cluster.stop.set()

    asyncio.run(asyncio.wait_for(scenario(), 30))
