"""Cluster metadata records and their JSON, as Kafka writes them in ZooKeeper.

Kafka's tools and users who have looked inside ZooKeeper recognise these payloads; keeping the
layout also keeps the path open to reading a Kafka cluster's ZooKeeper state.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field

BROKERS_IDS = "/brokers/ids"
BROKERS_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"


def topic_path(topic: str) -> str:
    return f"{BROKERS_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKERS_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_path(broker_id: int) -> str:
    return f"{BROKERS_IDS}/{broker_id}"


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Broker:
    broker_id: int
    host: str
    port: int
    rack: str | None = None

    def to_json(self) -> bytes:
        return _dump({
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://{self.host}:{self.port}"],
            "jmx_port": -1, "features": {}, "host": self.host, "port": self.port,
            "timestamp": str(int(time.time() * 1000)), "version": 5, "rack": self.rack,
        })

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> "Broker":
        value = json.loads(data)
        return cls(broker_id, value["host"], int(value["port"]), value.get("rack"))


@dataclass(frozen=True)
class TopicAssignment:
    """Partition -> replica broker ids; the first replica is the preferred leader."""

    topic: str
    partitions: dict[int, list[int]]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)

    def to_json(self) -> bytes:
        return _dump({
            "partitions": {str(p): replicas for p, replicas in sorted(self.partitions.items())},
            "topic_id": base64url_uuid(self.topic_id), "adding_replicas": {}, "removing_replicas": {}, "version": 3,
        })

    @classmethod
    def from_json(cls, topic: str, data: bytes) -> "TopicAssignment":
        value = json.loads(data)
        partitions = {int(p): list(r) for p, r in value["partitions"].items()}
        raw_id = value.get("topic_id")
        return cls(topic, partitions, parse_base64url_uuid(raw_id) if raw_id else uuid.uuid4())


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int = 1

    def to_json(self) -> bytes:
        return _dump({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                      "leader_epoch": self.leader_epoch, "isr": self.isr})

    @classmethod
    def from_json(cls, data: bytes) -> "PartitionState":
        value = json.loads(data)
        return cls(int(value["leader"]), int(value["leader_epoch"]), [int(b) for b in value["isr"]],
                   int(value.get("controller_epoch", 0)))


def topic_config_json(config: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(sorted(config.items()))})


def parse_topic_config(data: bytes) -> dict[str, str]:
    return {k: str(v) for k, v in json.loads(data).get("config", {}).items()}


def base64url_uuid(value: uuid.UUID) -> str:
    """Kafka prints topic ids in URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_base64url_uuid(text: str) -> uuid.UUID:
    import base64

    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
