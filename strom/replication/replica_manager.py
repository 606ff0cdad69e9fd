"""The broker's partitions: creating them from metadata, appending, reading and waiting.

Leadership comes from the partition state in the metadata cache: where this broker is the
leader it serves Produce and Fetch, elsewhere it answers NOT_LEADER_OR_FOLLOWER. Waiting
(acks=all, long-poll Fetch) goes through the purgatory, woken by appends and HW moves.
"""

from __future__ import annotations

import logging
from typing import Callable

from strom.cluster.metadata_cache import MetadataCache
from strom.protocol.errors import NotLeaderError, UnknownTopicOrPartitionError
from strom.replication.partition import Partition
from strom.replication.purgatory import Purgatory
from strom.storage.log import LogAppendInfo
from strom.storage.log_manager import LogManager

log = logging.getLogger("strom.replication")


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager, metadata: MetadataCache):
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata = metadata
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.purgatory = Purgatory()
        # called with (partition, is_leader) whenever this broker gains or loses a leadership
        self.leadership_listeners: list[Callable[[Partition, bool], None]] = []

    def apply_metadata(self) -> None:
        """Bring local replicas in line with the metadata: create, lead, follow or delete."""
        wanted: set[tuple[str, int]] = set()
        for topic in self.metadata.topics.values():
            for index, replicas in topic.replicas.items():
                if self.broker_id not in replicas:
                    continue
                key = (topic.name, index)
                wanted.add(key)
                state = topic.states.get(index)
                partition = self.partitions.get(key)
                if partition is None:
                    log_ = self.log_manager.get_or_create_log(key)
                    partition = self.partitions[key] = Partition(topic.name, index, log_, self.broker_id)
                if state is None:
                    continue
                was_leader = partition.is_leader
                if state.leader == self.broker_id:
                    partition.make_leader(state, replicas)
                else:
                    partition.make_follower(state, replicas)
                if partition.is_leader != was_leader:
                    for listener in self.leadership_listeners:
                        listener(partition, partition.is_leader)
            for key, partition in self.partitions.items():
                if key[0] == topic.name:
                    partition.log.config = self.log_manager.config_for(topic.name)
        for key in [k for k in self.partitions if k not in wanted]:
            log.info("removing replica %s-%d", *key)
            removed = self.partitions.pop(key)
            if removed.is_leader:
                for listener in self.leadership_listeners:
                    listener(removed, False)
            self.log_manager.delete_log(key)
            self.purgatory.notify(key)
        # logs on disk for topics that no longer exist (deleted while this broker was down)
        for key in [k for k in list(self.log_manager.logs) if k not in wanted]:
            self.log_manager.delete_log(key)

    def get_partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            if topic in self.metadata.topics and index in self.metadata.topics[topic].replicas:
                raise NotLeaderError(f"broker {self.broker_id} has no replica of {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
        return partition

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self.get_partition(topic, index)
        if not partition.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {topic}-{index}")
        return partition

    def append(self, topic: str, index: int, records, required_acks: int) -> LogAppendInfo:
        partition = self.leader_partition(topic, index)
        info = partition.append_as_leader(records, required_acks)
        self.purgatory.notify(partition.key)
        return info
