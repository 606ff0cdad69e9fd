"""Two brokers creating the same topic at once end with one topic and a retriable answer."""

import pytest

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker
from strom.protocol.errors import TopicAlreadyExistsError
from strom.storage.log_config import LogConfig


class RacingStore(LocalStore):
    """Lets another broker create the topic between this broker's existence check and its writes."""

    rival: Controller | None = None

    def create(self, path, data=b"", *, ephemeral=False, makepath=False):
        rival, self.rival = self.rival, None
        if rival is not None and path == model.topic_config_path("__consumer_offsets"):
            rival.create_topic("__consumer_offsets", 3, 2)
        return super().create(path, data, ephemeral=ephemeral, makepath=makepath)


def test_the_loser_of_a_creation_race_gets_topic_already_exists(tmp_path):
    store = RacingStore(str(tmp_path))
    for broker_id in (0, 1):
        store.create(
            model.broker_path(broker_id),
            Broker(broker_id, "127.0.0.1", 9000 + broker_id).to_json(),
            ephemeral=True,
            makepath=True,
        )
    store.ensure_path(model.BROKERS_TOPICS)
    winner, loser = Controller(store, 0, LogConfig()), Controller(store, 1, LogConfig())
    winner.elect()
    loser.elect()
    store.rival = winner
    with pytest.raises(TopicAlreadyExistsError):
        loser.create_topic("__consumer_offsets", 3, 2, {"cleanup.policy": "compact"})
    metadata = MetadataCache()
    metadata.load(store)
    topic = metadata.topics["__consumer_offsets"]
    assert sorted(topic.replicas) == [0, 1, 2] and all(len(r) == 2 for r in topic.replicas.values())
    assert all(topic.states[p].leader in (0, 1) for p in range(3))
