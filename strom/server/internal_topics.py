"""The internal topics, created on first use as Kafka does: ``__consumer_offsets`` (the group
coordinator's), ``__transaction_state`` (the transaction coordinator's) and ``_schemas`` (the
Schema Registry's).

Each is compacted, with the partitions and replication factor of its broker keys
(``offsets.topic.*``, ``transaction.state.log.*``; ``_schemas`` has one partition and is replicated
as ``__consumer_offsets``). The replication factor is capped at the brokers alive now: Kafka instead
refuses to create the topic until that many brokers are up, which leaves a fresh single-broker or
two-broker cluster without consumer groups.

The coordinators and the registry call these through the broker's callables; creating a topic is
the broker's (``create_topic``, which goes through the controller), so this module takes it as one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from strom.cluster import model
from strom.cluster.metadata_cache import MetadataCache
from strom.group.offset_store import OFFSETS_TOPIC
from strom.protocol.errors import TopicAlreadyExistsError
from strom.schemas.records import SCHEMAS_TOPIC
from strom.txn.coordinator import TRANSACTION_STATE_TOPIC


class CreateTopic(Protocol):
    """strom.server.topic_creation.TopicCreation.create: name, partitions, replication factor, topic configs."""

    def __call__(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> Any: ...


class InternalTopicKeys(Protocol):
    """The broker keys the internal topics are made with (BrokerConfig has them)."""

    @property
    def offsets_topic_num_partitions(self) -> int: ...
    @property
    def offsets_topic_replication_factor(self) -> int: ...
    @property
    def offsets_topic_segment_bytes(self) -> int: ...
    @property
    def transaction_state_log_num_partitions(self) -> int: ...
    @property
    def transaction_state_log_replication_factor(self) -> int: ...
    @property
    def transaction_state_log_min_isr(self) -> int: ...
    @property
    def transaction_state_log_segment_bytes(self) -> int: ...


class InternalTopics:
    def __init__(
        self,
        config: Callable[[], InternalTopicKeys],
        metadata: MetadataCache,
        create_topic: CreateTopic,
        refresh_metadata: Callable[[set[str]], None],
    ):
        """``config``: the broker's current config (dynamic configs replace it); ``refresh_metadata``
        re-reads the given znodes, here the topic list when another broker created the topic first."""
        self._config = config
        self._metadata = metadata
        self._create_topic = create_topic
        self._refresh_metadata = refresh_metadata

    def ensure_offsets_topic(self) -> None:
        """Create __consumer_offsets on first use (offsets.topic.*)."""
        config = self._config()
        self._ensure(
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            lambda factor: {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
            },
        )

    def ensure_schemas_topic(self) -> None:
        """Create _schemas on the registry's first write: one compacted partition, replicated as
        __consumer_offsets is (offsets.topic.replication.factor)."""
        self._ensure(
            SCHEMAS_TOPIC,
            1,
            self._config().offsets_topic_replication_factor,
            lambda factor: {"cleanup.policy": "compact", "unclean.leader.election.enable": "false"},
        )

    def ensure_transaction_state_topic(self) -> None:
        """Create __transaction_state on first use (transaction.state.log.*; its min.insync.replicas
        capped at the replication factor it gets)."""
        config = self._config()
        self._ensure(
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            lambda factor: {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(min(config.transaction_state_log_min_isr, factor)),
                "unclean.leader.election.enable": "false",
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
            },
        )

    def _ensure(
        self, name: str, partitions: int, replication_factor: int, configs: Callable[[int], Mapping[str, str]]
    ) -> None:
        if name in self._metadata.topics:
            return
        factor = max(1, min(replication_factor, len(self._metadata.brokers)))
        try:
            self._create_topic(name, partitions, factor, dict(configs(factor)))
        except TopicAlreadyExistsError:
            self._refresh_metadata({model.BROKERS_TOPICS})
