"""A replica manager built from its collaborators alone: real logs in a tmp dir, the embedded
metadata store in memory, a real metadata cache and counters; no broker. Shared by the tests of
the services that stand on it (the offset store, the transaction coordinator)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from strom.cluster import model
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache, TopicInfo
from strom.cluster.model import PartitionState
from strom.metrics.stats import BrokerStats
from strom.replication.replica_manager import ReplicaManager
from strom.server.config import BrokerConfig
from strom.storage.log_config import LogConfig
from strom.storage.log_manager import LogManager


@dataclass
class Replicas:
    manager: ReplicaManager
    store: LocalStore
    metadata: MetadataCache
    stats: BrokerStats
    log_manager: LogManager
    controller_epoch: int = 1
    reloads: list[str] = field(default_factory=list)  # request_metadata_reload's paths
    published: int = 0  # publish_offline_replicas calls

    def lead(self, topic: str, partitions: int = 1, replicas: list[int] | None = None) -> None:
        """Make ``topic`` with this broker as every partition's leader (ISR = replicas), as the
        controller would write it, and let the replica manager apply it."""
        broker_id = self.manager.broker_id
        replicas = replicas or [broker_id]
        info = TopicInfo(topic, uuid.uuid4(), {p: list(replicas) for p in range(partitions)})
        for p in range(partitions):
            state = PartitionState(broker_id, 0, list(replicas), self.controller_epoch)
            path = model.partition_state_path(topic, p)
            self.store.create(path, state.to_json(), makepath=True)
            info.states[p] = state
            info.state_versions[p] = self.store.get(path)[1]
        self.metadata.topics[topic] = info
        self.manager.apply_metadata()


def make_replicas(tmp_path: Path, broker_id: int = 1, **config: object) -> Replicas:
    """``config``: broker configs by key (``{"replica.lag.time.max.ms": 10}``)."""
    settings = BrokerConfig.from_mapping(
        {"broker.id": str(broker_id), **{key.replace("_", "."): str(value) for key, value in config.items()}}
    )
    log_manager = LogManager([str(tmp_path / "logs")], LogConfig(), broker_id=broker_id)
    log_manager.startup()
    store, metadata, stats = LocalStore(None), MetadataCache(), BrokerStats()
    holder: list[Replicas] = []
    manager = ReplicaManager(
        broker_id,
        settings,
        log_manager,
        metadata,
        store,
        stats,
        controller_epoch=lambda: holder[0].controller_epoch,
        request_metadata_reload=lambda path: holder[0].reloads.append(path),
        publish_offline_replicas=lambda: setattr(holder[0], "published", holder[0].published + 1),
    )
    holder.append(Replicas(manager, store, metadata, stats, log_manager))
    return holder[0]
