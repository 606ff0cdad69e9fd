"""The console's Kafka access layer: what each page shows, read through the Kafka protocol only.

Admin calls go through one confluent-kafka AdminClient (thread-safe: the HTTP server answers each
request on its own thread). Log offsets come from AdminClient.list_offsets, one batched ListOffsets
per broker instead of a round trip per partition. Messages are read by a short-lived Consumer per
page that is assigned partitions and never subscribes, so browsing never creates or joins a group.
confluent-kafka has no DescribeLogDirs, ListTransactions or DescribeTransactions: sizes are asked
of every broker with strom's small protocol client, transactions through ``strom transactions``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from strom.cli.client_props import (
    client_config,
    client_security,
    command_properties,
    ensure_reachable,
)
from strom.cli.consumer_groups import (
    UsageError,
    _assignment_text,
    _parse_datetime,
    _state,
)
from strom.cli.scram_users import _mechanism_name
from strom.cli.topics import INTERNAL_TOPICS, kafka_uuid

# states (Kafka's names) of groups without active members: only those may have their offsets reset
INACTIVE_STATES = frozenset({"Empty", "Dead"})
DESCRIBE_LOG_DIRS_VERSION = 1
MAX_PAGE_MESSAGES = 500


class ConsoleError(Exception):
    """A failure to show on the page as one line (the cluster's answer, or a bad form value)."""


@dataclass
class BrokerRow:
    id: int
    host: str
    port: int
    rack: str | None
    controller: bool
    leaders: int = 0
    replicas: int = 0


@dataclass
class PartitionRow:
    id: int
    leader: int
    replicas: list[int]
    isr: list[int]
    log_start: int | None = None
    log_end: int | None = None
    size: int | None = None

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass
class TopicRow:
    name: str
    partitions: list[PartitionRow]
    internal: bool
    error: str | None = None

    @property
    def replication(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    @property
    def under_replicated(self) -> int:
        return sum(p.under_replicated for p in self.partitions)

    @property
    def offline(self) -> int:
        return sum(p.offline for p in self.partitions)


@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    sensitive: bool


@dataclass
class Message:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class Page:
    """One page of the message browser and where the next one starts (partition -> offset)."""

    messages: list[Message]
    next_positions: dict[int, int]
    ends: dict[int, int]

    @property
    def at_end(self) -> bool:
        return all(self.next_positions.get(p, 0) >= end for p, end in self.ends.items())


@dataclass
class GroupPartition:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    member: str | None = None
    client_id: str | None = None
    host: str | None = None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(self.log_end - self.committed, 0)


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol: str
    coordinator: str
    members: list[dict[str, Any]] = field(default_factory=list)
    partitions: list[GroupPartition] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def inactive(self) -> bool:
        return self.state in INACTIVE_STATES


class Cluster:
    def __init__(self, bootstrap: str, command_config: str | None = None, timeout_s: float = 5.0):
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        # librdkafka's keys (a Kafka properties file's JAAS line and PEM stores converted), as every
        # tool reads --command-config; the same settings log in strom's own requests and the
        # transactions page's
        self.properties = command_properties(command_config)
        self.security = client_security(self.properties)
        self.config = client_config(bootstrap, overrides=self.properties)
        self.admin = AdminClient(self.config)

    def check_reachable(self) -> None:
        """Raises ToolError naming the bootstrap servers when no broker answers within the timeout."""
        ensure_reachable(self.admin, self.bootstrap, self.timeout_s)

    # -- metadata ------------------------------------------------------------------------------------

    def _metadata(self):
        return self.admin.list_topics(timeout=self.timeout_s)

    def brokers(self) -> tuple[list[BrokerRow], list[TopicRow], str]:
        """Brokers with their leader and replica counts, every topic, and the cluster id."""
        described = self.admin.describe_cluster(request_timeout=self.timeout_s).result(self.timeout_s)
        controller = described.controller.id if described.controller is not None else -1
        rows = {n.id: BrokerRow(n.id, n.host, n.port, n.rack or None, n.id == controller) for n in described.nodes}
        topics = self.topics()
        for topic in topics:
            for p in topic.partitions:
                if p.leader in rows:
                    rows[p.leader].leaders += 1
                for r in p.replicas:
                    if r in rows:
                        rows[r].replicas += 1
        return sorted(rows.values(), key=lambda b: b.id), topics, described.cluster_id or "-"

    def topics(self) -> list[TopicRow]:
        metadata = self._metadata()
        rows = []
        for name, topic in sorted(metadata.topics.items()):
            partitions = [
                PartitionRow(p.id, p.leader, list(p.replicas), list(p.isrs))
                for p in sorted(topic.partitions.values(), key=lambda p: p.id)
            ]
            rows.append(
                TopicRow(
                    name,
                    partitions,
                    name in INTERNAL_TOPICS or name.startswith("__"),
                    topic.error.str() if topic.error is not None else None,
                )
            )
        return rows

    def topic(self, name: str) -> tuple[TopicRow, str | None]:
        """One topic with log start and end per partition, and its topic id (Kafka's base64 form)."""
        from confluent_kafka import TopicCollection

        found = {t.name: t for t in self.topics()}.get(name)
        if found is None:
            raise ConsoleError(f"Topic '{name}' does not exist")
        description = self.admin.describe_topics(TopicCollection([name]), request_timeout=self.timeout_s)[name].result(
            self.timeout_s
        )
        starts = self.offsets({(name, p.id): "earliest" for p in found.partitions})
        ends = self.offsets({(name, p.id): "latest" for p in found.partitions})
        sizes = self.partition_sizes(found.partitions and [found] or [])
        for p in found.partitions:
            p.log_start, p.log_end = starts.get((name, p.id)), ends.get((name, p.id))
            p.size = sizes.get((name, p.id))
        return found, kafka_uuid(getattr(description, "topic_id", None))

    def iceberg(self, topic: str):
        """The topic's Iceberg table and each partition's translation lag, from the brokers' catalog
        (``strom iceberg status``'s view)."""
        from strom.cli import iceberg

        catalog = iceberg.open_brokers_catalog(self.admin, None, self.timeout_s)
        return iceberg.table_view(catalog, topic), iceberg.partition_lags(
            self.admin, self.config, catalog, topic, self.timeout_s
        )

    # -- offsets ---------------------------------------------------------------------------------------

    def offsets(self, wanted: dict[tuple[str, int], str | int]) -> dict[tuple[str, int], int]:
        """(topic, partition) -> offset for "earliest", "latest" or a timestamp in ms (-1: none at or after it).

        Partitions the cluster fails to answer for are left out (a leader moving, a topic being deleted).
        """
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        if not wanted:
            return {}
        specs = {}
        for (topic, partition), what in wanted.items():
            spec = (
                OffsetSpec.earliest()
                if what == "earliest"
                else OffsetSpec.latest()
                if what == "latest"
                else OffsetSpec.for_timestamp(int(what))
            )
            specs[TopicPartition(topic, partition)] = spec
        futures = self.admin.list_offsets(specs, request_timeout=self.timeout_s)
        result = {}
        for tp, future in futures.items():
            try:
                result[(tp.topic, tp.partition)] = future.result(self.timeout_s).offset
            except Exception:
                continue
        return result

    def partition_sizes(self, topics: list[TopicRow]) -> dict[tuple[str, int], int]:
        """Bytes of each partition's leader replica, from DescribeLogDirs sent to each leader."""
        leaders: dict[int, list[tuple[str, int]]] = {}
        for topic in topics:
            for p in topic.partitions:
                if p.leader >= 0:
                    leaders.setdefault(p.leader, []).append((topic.name, p.id))
        if not leaders:
            return {}
        metadata = self._metadata()
        addresses = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
        return asyncio.run(self._log_dirs({b: (addresses[b], tps) for b, tps in leaders.items() if b in addresses}))

    async def _log_dirs(self, by_broker: dict[int, tuple[tuple[str, int], list[tuple[str, int]]]]):
        from strom.replication.client import BrokerClient

        async def one(address: tuple[str, int], wanted: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
            client = BrokerClient(address[0], address[1], "strom-console", self.timeout_s, self.security)
            topics: dict[str, list[int]] = {}
            for topic, partition in wanted:
                topics.setdefault(topic, []).append(partition)
            try:
                response = await client.request(
                    35,
                    DESCRIBE_LOG_DIRS_VERSION,
                    {"topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]},
                )
            except Exception:
                return {}  # sizes are a nicety: the page shows "-" rather than failing
            finally:
                client.close()
            sizes = {}
            keep = set(wanted)
            for result in response.results:
                for topic in result.topics:
                    for p in topic.partitions:
                        if (topic.name, p.partition_index) in keep:
                            sizes[(topic.name, p.partition_index)] = p.partition_size
            return sizes

        found: dict[tuple[str, int], int] = {}
        for part in await asyncio.gather(*(one(a, tps) for a, tps in by_broker.values())):
            found.update(part)
        return found

    # -- topics: create, delete, configs ----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication: int, configs: dict[str, str]) -> None:
        from confluent_kafka.admin import NewTopic

        future = self.admin.create_topics(
            [NewTopic(name, partitions, replication, config=configs)],
            operation_timeout=self.timeout_s,
            request_timeout=self.timeout_s,
        )[name]
        future.result(self.timeout_s)
        self._await_metadata(
            lambda topics: name in topics and all(p.leader >= 0 for p in topics[name].partitions.values())
        )

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topics([name], operation_timeout=self.timeout_s, request_timeout=self.timeout_s)[name].result(
            self.timeout_s
        )
        self._await_metadata(lambda topics: name not in topics)

    def _await_metadata(self, done: Callable[[dict[str, Any]], bool]) -> None:
        """Wait (at most the timeout) until the metadata shows a change, so the next page shows it too."""
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if done(self._metadata().topics):
                return
            time.sleep(0.1)

    def configs(self, resource_type: str, name: str) -> list[ConfigRow]:
        from confluent_kafka.admin import ConfigResource, ConfigSource

        resource = ConfigResource(resource_type, name)
        entries = self.admin.describe_configs([resource], request_timeout=self.timeout_s)[resource].result(
            self.timeout_s
        )
        rows = []
        for key, entry in sorted(entries.items()):
            try:
                source = ConfigSource(entry.source).name
            except ValueError:
                source = str(entry.source)
            rows.append(
                ConfigRow(
                    key,
                    entry.value,
                    source,
                    entry.is_default or entry.source == ConfigSource.DEFAULT_CONFIG.value,
                    bool(entry.is_read_only),
                    bool(entry.is_sensitive),
                )
            )
        return rows

    def alter_topic_config(self, topic: str, key: str, value: str | None) -> None:
        """IncrementalAlterConfigs: SET the key, or DELETE the override when value is None."""
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
        entry = ConfigEntry(key, value if value is not None else "", incremental_operation=op)
        resource = ConfigResource("topic", topic, incremental_configs=[entry])
        for future in self.admin.incremental_alter_configs([resource], request_timeout=self.timeout_s).values():
            future.result(self.timeout_s)

    # -- messages ---------------------------------------------------------------------------------------

    def start_offsets(self, topic: str, partitions: list[int], mode: str, value: str, limit: int) -> dict[int, int]:
        """Where a page starts for beginning / end (the newest ``limit`` messages) / offset / timestamp."""
        starts = self.offsets({(topic, p): "earliest" for p in partitions})
        ends = self.offsets({(topic, p): "latest" for p in partitions})
        positions = {}
        if mode == "timestamp":
            at = self.offsets({(topic, p): parse_time_ms(value) for p in partitions})
        for p in partitions:
            start, end = starts.get((topic, p), 0), ends.get((topic, p), 0)
            if mode == "beginning":
                positions[p] = start
            elif mode == "end":
                positions[p] = max(start, end - max(1, limit // max(len(partitions), 1)))
            elif mode == "offset":
                try:
                    positions[p] = min(max(int(value), start), end)
                except ValueError:
                    raise ConsoleError(f"Invalid offset '{value}': expected a whole number") from None
            elif mode == "timestamp":
                found = at.get((topic, p), -1)
                positions[p] = end if found < 0 else found
            else:
                raise ConsoleError(f"Unknown start '{mode}': expected beginning, end, offset or timestamp")
        return positions

    def read(self, topic: str, positions: dict[int, int], limit: int) -> Page:
        """Up to ``limit`` messages from ``positions`` (partition -> offset), stopping at each log end.

        Waits at most the console's timeout: reading stops early once every partition reached the
        end it had when the page was asked for, so the wait only runs out when a leader does not answer.
        """
        from confluent_kafka import Consumer, TopicPartition

        limit = max(1, min(limit, MAX_PAGE_MESSAGES))
        ends = {p: e for (_, p), e in self.offsets({(topic, p): "latest" for p in positions}).items()}
        pending = {p: o for p, o in positions.items() if o < ends.get(p, 0)}
        next_positions = dict(positions)
        messages: list[Message] = []
        if not pending:
            return Page(messages, next_positions, ends)
        consumer = Consumer(
            {
                **self.config,
                "group.id": "strom-console-browser",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            consumer.assign([TopicPartition(topic, p, o) for p, o in pending.items()])
            deadline = time.monotonic() + self.timeout_s
            while pending and len(messages) < limit and time.monotonic() < deadline:
                for record in consumer.consume(min(limit - len(messages), 100), timeout=0.2):
                    error = record.error()
                    if error is not None:
                        if error.name() == "_PARTITION_EOF":
                            continue
                        raise ConsoleError(error.str())
                    p, offset = record.partition(), record.offset()
                    if p is None or offset is None or p not in pending or offset >= ends[p] or len(messages) >= limit:
                        continue
                    _, ts = record.timestamp()
                    headers = [(h[0], h[1].encode() if isinstance(h[1], str) else h[1]) for h in record.headers() or []]
                    messages.append(Message(p, offset, ts, _raw(record.key()), _raw(record.value()), headers))
                    next_positions[p] = offset + 1
                    if offset + 1 >= ends[p]:
                        pending.pop(p, None)
        finally:
            consumer.close()
        messages.sort(key=lambda m: (m.timestamp_ms, m.partition, m.offset))
        return Page(messages, next_positions, ends)

    # -- consumer groups --------------------------------------------------------------------------------

    def groups(self) -> list[tuple[str, str, str]]:
        """(group id, state, protocol type) of every group, sorted."""
        result = self.admin.list_consumer_groups(request_timeout=self.timeout_s).result(self.timeout_s)
        if result.errors:
            raise ConsoleError("; ".join(str(e) for e in result.errors))
        return sorted(
            (g.group_id, _state(g.state), "consumer" if g.is_simple_consumer_group is False else "simple")
            for g in result.valid
        )

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout_s
        )
        result = futures[group_id].result(self.timeout_s)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}

    def group(self, group_id: str) -> GroupView:
        description = self.admin.describe_consumer_groups([group_id], request_timeout=self.timeout_s)[group_id].result(
            self.timeout_s
        )
        node = description.coordinator
        view = GroupView(
            group_id,
            _state(description.state),
            description.partition_assignor or "-",
            f"{node.id} ({node.host}:{node.port})" if node is not None else "-",
        )
        owners: dict[tuple[str, int], Any] = {}
        for m in description.members:
            view.members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "host": m.host,
                    "instance_id": m.group_instance_id or "",
                    "assignment": _assignment_text(m.assignment),
                }
            )
            for tp in (m.assignment.topic_partitions if m.assignment is not None else None) or []:
                owners[(tp.topic, tp.partition)] = m
        committed = self.committed(group_id)
        keys = sorted(set(committed) | set(owners))
        ends = self.offsets({tp: "latest" for tp in keys})
        for tp in keys:
            owner = owners.get(tp)
            view.partitions.append(
                GroupPartition(
                    tp[0],
                    tp[1],
                    committed.get(tp),
                    ends.get(tp),
                    owner.member_id if owner else None,
                    owner.client_id if owner else None,
                    owner.host if owner else None,
                )
            )
        return view

    def reset_plan(self, group_id: str, mode: str, value: str, topic: str | None) -> dict[tuple[str, int], int]:
        """New offsets for the group's committed partitions (of one topic, when given), as Kafka's tool would."""
        view = self.group(group_id)
        if not view.inactive:
            raise ConsoleError(
                f"Assignments can only be reset if the group '{group_id}' is inactive, but the "
                f"current state is {view.state}."
            )
        partitions = [(p.topic, p.partition) for p in view.partitions if topic in (None, "", p.topic)]
        if not partitions:
            raise ConsoleError(
                f"Group '{group_id}' has no committed offsets" + (f" for topic '{topic}'" if topic else "")
            )
        starts = self.offsets({tp: "earliest" for tp in partitions})
        ends = self.offsets({tp: "latest" for tp in partitions})
        if mode == "earliest":
            return {tp: starts[tp] for tp in partitions if tp in starts}
        if mode == "latest":
            return {tp: ends[tp] for tp in partitions if tp in ends}
        if mode == "offset":
            try:
                wanted = int(value)
            except ValueError:
                raise ConsoleError(f"Invalid offset '{value}': expected a whole number") from None
            return {tp: min(max(wanted, starts.get(tp, 0)), ends.get(tp, wanted)) for tp in partitions}
        if mode == "timestamp":
            found = self.offsets({tp: parse_time_ms(value) for tp in partitions})
            return {tp: found[tp] if found.get(tp, -1) >= 0 else ends[tp] for tp in partitions if tp in ends}
        raise ConsoleError(f"Unknown reset '{mode}': expected earliest, latest, timestamp or offset")

    def commit(self, group_id: str, plan: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for (t, p), o in plan.items()])
        result = self.admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)[group_id].result(
            self.timeout_s
        )
        errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions or [] if tp.error]
        if errors:
            raise ConsoleError("; ".join(errors))

    # -- security and transactions ------------------------------------------------------------------------

    def scram_users(self) -> list[tuple[str, list[tuple[str, int]]]]:
        future = self.admin.describe_user_scram_credentials(request_timeout=self.timeout_s)
        assert isinstance(future, Future)  # a dict of futures only when users are named
        described = future.result(self.timeout_s)
        return sorted(
            (user, [(_mechanism_name(i.mechanism), i.iterations) for i in d.scram_credential_infos])
            for user, d in described.items()
        )

    def acls(self) -> list[dict[str, str]]:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        anything: Any = None  # a filter's None matches every name, principal and host
        everything = AclBindingFilter(
            ResourceType.ANY,
            anything,
            ResourcePatternType.ANY,
            anything,
            anything,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        bindings = self.admin.describe_acls(everything, request_timeout=self.timeout_s).result(self.timeout_s)
        return [
            {
                "resource_type": b.restype.name,
                "name": b.name,
                "pattern": b.resource_pattern_type.name,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation.name,
                "permission": b.permission_type.name,
            }
            for b in bindings
        ]

    def transactions(self) -> list[dict[str, str]]:
        """Every broker's ListTransactions and DescribeTransactions through one ``strom transactions``
        tool (one admin client and one connection per broker for the whole page)."""
        from strom.cli.transactions import TransactionsTool

        tool = TransactionsTool(self.bootstrap, self.timeout_s, self.properties)
        rows, described = asyncio.run(tool.list_described())
        found = []
        for transactional_id, coordinator, producer_id, state in rows:
            d = described.get(transactional_id)  # none: it ended meanwhile, keep the listed row
            found.append(
                {
                    "transactional_id": transactional_id,
                    "coordinator": coordinator,
                    "producer_id": producer_id,
                    "state": state,
                    "epoch": d[3] if d else "-",
                    "timeout_ms": d[5] if d else "-",
                    "partitions": (d[8] or "-") if d else "-",
                }
            )
        return found


def _raw(data: str | bytes | None) -> bytes | None:
    """A record's key or value: bytes from a Consumer without deserializers (typed wider by the library)."""
    return data.encode() if isinstance(data, str) else data


def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO date-time (local time unless it names a zone)."""
    text = (text or "").strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return _parse_datetime(text)
    except UsageError:
        raise ConsoleError(
            f"Invalid timestamp '{text}': expected milliseconds since the epoch or "
            "an ISO date-time such as 2024-01-31T12:00:00Z"
        ) from None
