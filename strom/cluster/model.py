"""Cluster metadata records and their JSON, as Kafka writes them in ZooKeeper.

Kafka's tools and users who have looked inside ZooKeeper recognise these payloads; keeping the
layout also keeps the path open to reading a Kafka cluster's ZooKeeper state.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from strom.clock import wall_ms

BROKERS_IDS = "/brokers/ids"
BROKERS_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_USERS = "/config/users"
CONFIG_BROKERS = "/config/brokers"  # dynamic broker configs: /config/brokers/<id>, or <default> for all
DEFAULT_BROKER_ENTITY = "<default>"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"


def topic_path(topic: str) -> str:
    return f"{BROKERS_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKERS_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(entity: str) -> str:
    """/config/brokers/<id> (or <default>): Kafka's dynamic broker configs, {"version":1,"config":{...}}."""
    return f"{CONFIG_BROKERS}/{entity}"


def broker_path(broker_id: int) -> str:
    return f"{BROKERS_IDS}/{broker_id}"


def sanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer: a user or client id as a znode name (URL-encoded; '*' as %2A, space as %20)."""
    from urllib.parse import quote

    return quote(name, safe="").replace("~", "%7E")


def user_config_path(user: str) -> str:
    """/config/users/<user>: a user's SCRAM credentials (and, in Kafka, its quotas)."""
    return f"{CONFIG_USERS}/{sanitize_entity_name(user)}"


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Broker:
    """A broker's registration, /brokers/ids/<id>: ephemeral, so it exists while the broker lives.

    ``offline_replicas`` (topic, partition) are replicas whose log dir failed on this broker.
    Kafka's ZooKeeper mode tells its controller through /log_dir_event_notification and then a
    LeaderAndIsr round trip, and KRaft through OfflineLogDirs in the broker heartbeat; here the
    registration carries them (only when there are any, so a healthy broker's JSON is Kafka's).

    ``endpoints`` are (listener name, host, port) of every advertised listener and ``protocols``
    each listener's security protocol, written as Kafka does ("endpoints": ["SASL_SSL://h:p", ...],
    "listener_security_protocol_map"); "host" and "port" are the first PLAINTEXT endpoint's (null
    and -1 without one). No endpoints: a single PLAINTEXT listener at host:port.
    """

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    offline_replicas: frozenset[tuple[str, int]] = frozenset()
    endpoints: tuple[tuple[str, str, int], ...] = ()
    protocols: tuple[tuple[str, str], ...] = ()
    # strom's own: the URL of this broker's Schema Registry (schema.registry.listeners), written
    # as "schema_registry" only when it serves one; another broker forwards registry writes there
    schema_registry: str | None = None

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of this broker's listener of that name, or None if it has none."""
        if not self.endpoints:
            return (self.host, self.port) if listener == "PLAINTEXT" else None
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None

    def to_json(self) -> bytes:
        endpoints = self.endpoints or (("PLAINTEXT", self.host, self.port),)
        protocols = dict(self.protocols) or {"PLAINTEXT": "PLAINTEXT"}
        plain = next(((h, p) for n, h, p in endpoints if protocols.get(n) == "PLAINTEXT"), (None, -1))
        value = {
            "listener_security_protocol_map": {name: protocols.get(name, name) for name, _, _ in endpoints},
            "endpoints": [f"{name}://{_bracketed(host)}:{port}" for name, host, port in endpoints],
            "jmx_port": -1,
            "features": {},
            "host": plain[0],
            "port": plain[1],
            "timestamp": str(wall_ms()),
            "version": 5,
            "rack": self.rack,
        }
        if self.offline_replicas:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(self.offline_replicas):
                by_topic.setdefault(topic, []).append(partition)
            value["offline_replicas"] = by_topic
        if self.schema_registry:
            value["schema_registry"] = self.schema_registry
        return _dump(value)

    @classmethod
    def from_json(cls, broker_id: int, data: bytes) -> Broker:
        value = json.loads(data)
        offline = frozenset(
            (topic, int(p)) for topic, partitions in (value.get("offline_replicas") or {}).items() for p in partitions
        )
        endpoints = []
        for text in value.get("endpoints") or ():
            name, _, address = str(text).partition("://")
            host, _, port = address.rpartition(":")
            endpoints.append((name, host.strip("[]"), int(port)))
        protocols = tuple(sorted((value.get("listener_security_protocol_map") or {}).items()))
        return cls(
            broker_id,
            value.get("host") or "",
            int(value.get("port", -1)),
            value.get("rack"),
            offline,
            tuple(endpoints),
            protocols,
            value.get("schema_registry") or None,
        )


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class TopicAssignment:
    """Partition -> replica broker ids; the first replica is the preferred leader.

    A partition being reassigned (KIP-455) is recorded as Kafka's ZooKeeper mode records it, in
    this topic znode: ``partitions`` holds the full replica set (target then original, without
    repeats), ``adding_replicas``/``removing_replicas`` what the move adds and removes. The
    target is the full set minus removing, the original the full set minus adding.
    """

    topic: str
    partitions: dict[int, list[int]]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return _dump(
            {
                "partitions": {str(p): replicas for p, replicas in sorted(self.partitions.items())},
                "topic_id": base64url_uuid(self.topic_id),
                "adding_replicas": {str(p): r for p, r in sorted(self.adding.items()) if r},
                "removing_replicas": {str(p): r for p, r in sorted(self.removing.items()) if r},
                "version": 3,
            }
        )

    @classmethod
    def from_json(cls, topic: str, data: bytes) -> TopicAssignment:
        value = json.loads(data)
        partitions = {int(p): list(r) for p, r in value["partitions"].items()}
        raw_id = value.get("topic_id")
        adding = {int(p): [int(b) for b in r] for p, r in (value.get("adding_replicas") or {}).items() if r}
        removing = {int(p): [int(b) for b in r] for p, r in (value.get("removing_replicas") or {}).items() if r}
        return cls(topic, partitions, parse_base64url_uuid(raw_id) if raw_id else uuid.uuid4(), adding, removing)

    def target(self, partition: int) -> list[int]:
        removing = self.removing.get(partition, ())
        return [b for b in self.partitions[partition] if b not in removing]

    def original(self, partition: int) -> list[int]:
        adding = self.adding.get(partition, ())
        return [b for b in self.partitions[partition] if b not in adding]


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int = 1

    def to_json(self) -> bytes:
        return _dump(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": self.isr,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> PartitionState:
        value = json.loads(data)
        return cls(
            int(value["leader"]),
            int(value["leader_epoch"]),
            [int(b) for b in value["isr"]],
            int(value.get("controller_epoch", 0)),
        )


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
