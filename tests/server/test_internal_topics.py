"""The internal topics built from their collaborators alone, no broker: a real controller on the
embedded store creates them, and the metadata cache reads them back."""

from strom.cluster import model
from strom.cluster.controller import Controller
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.model import Broker
from strom.group.offset_store import OFFSETS_TOPIC
from strom.schemas.records import SCHEMAS_TOPIC
from strom.server.config import BrokerConfig
from strom.server.internal_topics import InternalTopics
from strom.storage.log_config import LogConfig
from strom.txn.coordinator import TRANSACTION_STATE_TOPIC


class Cluster:
    """``brokers`` registered brokers, this one (0) the controller; ``created``: create_topic's calls."""

    def __init__(self, tmp_path, brokers: int, config: BrokerConfig):
        self.store = LocalStore(str(tmp_path))
        for broker_id in range(brokers):
            registration = Broker(broker_id, "127.0.0.1", 9000 + broker_id).to_json()
            self.store.create(model.broker_path(broker_id), registration, ephemeral=True, makepath=True)
        self.controller = Controller(self.store, 0, LogConfig())
        self.controller.elect()
        self.store.ensure_path(model.BROKERS_TOPICS)
        self.metadata = MetadataCache()
        self.metadata.load(self.store)
        self.created: list[tuple[str, int, int, dict[str, str]]] = []
        self.refreshed: list[set[str]] = []
        self.topics = InternalTopics(lambda: config, self.metadata, self.create_topic, self.refresh)

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]):
        self.created.append((name, partitions, replication_factor, configs))
        created = self.controller.create_topic(name, partitions, replication_factor, configs)
        self.metadata.load(self.store)  # the broker reads back what it wrote
        return created

    def refresh(self, paths: set[str]) -> None:
        self.refreshed.append(paths)
        self.metadata.load(self.store)


def test_internal_topics_get_their_keys_and_a_factor_capped_at_the_live_brokers(tmp_path):
    config = BrokerConfig.from_mapping(
        {
            "offsets.topic.num.partitions": "3",
            "offsets.topic.segment.bytes": "1048576",
            "transaction.state.log.num.partitions": "2",
            "transaction.state.log.min.isr": "2",
        }
    )
    cluster = Cluster(tmp_path, brokers=1, config=config)
    cluster.topics.ensure_offsets_topic()
    cluster.topics.ensure_transaction_state_topic()
    cluster.topics.ensure_schemas_topic()
    assert cluster.created == [
        (
            OFFSETS_TOPIC,
            3,
            1,
            {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "1048576"},
        ),
        (
            TRANSACTION_STATE_TOPIC,
            2,
            1,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": "1",  # transaction.state.log.min.isr 2, capped at the factor
                "unclean.leader.election.enable": "false",
                "segment.bytes": "104857600",
            },
        ),
        (SCHEMAS_TOPIC, 1, 1, {"cleanup.policy": "compact", "unclean.leader.election.enable": "false"}),
    ]
    assert len(cluster.metadata.topics[OFFSETS_TOPIC].replicas) == 3
    assert cluster.metadata.topics[TRANSACTION_STATE_TOPIC].configs["min.insync.replicas"] == "1"
    # made once: a second call finds them in the metadata
    cluster.topics.ensure_offsets_topic()
    cluster.topics.ensure_transaction_state_topic()
    cluster.topics.ensure_schemas_topic()
    assert len(cluster.created) == 3


def test_three_brokers_get_kafkas_factor_of_three(tmp_path):
    cluster = Cluster(tmp_path, brokers=3, config=BrokerConfig())
    cluster.topics.ensure_offsets_topic()
    name, partitions, factor, _ = cluster.created[0]
    assert (name, partitions, factor) == (OFFSETS_TOPIC, 50, 3)
    assert all(len(replicas) == 3 for replicas in cluster.metadata.topics[OFFSETS_TOPIC].replicas.values())


def test_a_topic_another_broker_created_first_is_read_back(tmp_path):
    cluster = Cluster(tmp_path, brokers=1, config=BrokerConfig())
    cluster.controller.create_topic(SCHEMAS_TOPIC, 1, 1, {"cleanup.policy": "compact"})  # not in the cache yet
    cluster.topics.ensure_schemas_topic()
    assert cluster.refreshed == [{model.BROKERS_TOPICS}]
    assert SCHEMAS_TOPIC in cluster.metadata.topics
