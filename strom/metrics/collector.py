"""What a scrape of ``/metrics`` returns: Kafka's metric families, read from broker state at scrape time.

Names follow the Prometheus JMX exporter's Kafka rules (lower-cased MBean type and name; a
``*PerSec`` meter's count becomes ``*_total``), so Kafka dashboards read them unchanged:
``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t`` is
``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``, and the sample without a
``topic`` label is the all-topics total, as the exporter publishes it. Consumer lag uses
kafka_exporter's names (``kafka_consumergroup_lag{consumergroup,topic,partition}``), which the
common Kafka lag dashboards read. Families with no Kafka MBean are prefixed ``strom_``.

The scrape runs on prometheus_client's HTTP thread, while the state belongs to the event loop:
``snapshot`` copies the numbers on the loop (a short callback, no I/O) and the families are
built and formatted on the scrape thread, so a scrape never iterates a dict the loop is changing
and the loop never spends time formatting text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Protocol, cast

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from strom.metrics.stats import FETCH_CONSUMER, FETCH_FOLLOWER, TIME_BOUNDS_S
from strom.protocol.api import ApiKey

if TYPE_CHECKING:
    from strom.cluster.controller import Controller
    from strom.cluster.metadata_cache import MetadataCache
    from strom.group.coordinator import GroupCoordinator
    from strom.iceberg.translator import TopicCounters
    from strom.metrics.stats import BrokerStats, RequestMetrics
    from strom.replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.metrics")

SNAPSHOT_TIMEOUT_S = 5.0  # below Prometheus' default scrape timeout of 10 s
_GROUP_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")


def request_name(api_key: int) -> str:
    """Kafka's ``request`` tag: the ApiKeys name in CamelCase (Produce, ApiVersions, OffsetCommit)."""
    if api_key == FETCH_FOLLOWER:
        return "FetchFollower"
    if api_key == FETCH_CONSUMER:
        return "FetchConsumer"
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


class Listened(Protocol):
    """A connection as a scrape counts it: by the listener it came in on."""

    @property
    def listener(self) -> str: ...


class LoopLagReading(Protocol):
    """How late the event loop ran its last timer (``strom.metrics.server.LoopLag``)."""

    @property
    def last_s(self) -> float: ...

    @property
    def max_s(self) -> float: ...


@dataclasses.dataclass(frozen=True)
class Sources:
    """What a scrape reads: the broker's live objects, read on its event loop at each scrape."""

    stats: BrokerStats
    metadata: MetadataCache
    replica_manager: ReplicaManager | None = None
    controller: Controller | None = None
    group_coordinator: GroupCoordinator | None = None
    connections: Collection[Listened] = ()
    request_metrics: RequestMetrics | None = None
    loop_lag: LoopLagReading | None = None
    # iceberg.enabled: (topic, partition, committed records not yet in its Iceberg table, seconds the
    # oldest of them has waited) of each led partition
    iceberg_lag: Callable[[], list[tuple[str, int, int, float]]] | None = None
    # iceberg.enabled: topic -> what translation and table maintenance did on this broker (copies)
    iceberg_counters: Callable[[], dict[str, TopicCounters]] | None = None


def register_process_collectors(registry: CollectorRegistry) -> None:
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


@dataclasses.dataclass
class Snapshot:
    topics: dict[str, tuple[int, int, int, int, int, int, int]]
    # (topic, partition, leader, size, log start, log end, hw, segments, isr, replicas, min isr)
    partitions: list[tuple[str, int, bool, int, int, int, int, int, int, int, int]]
    active_controller: bool
    offline_partitions: int
    leader_elections: int
    unclean_elections: int
    isr_shrinks: int
    isr_expands: int
    replication_bytes_in: int
    replication_bytes_out: int
    connections: dict[str, int]
    connections_created: dict[str, int]
    connections_closed: dict[str, int]
    connections_refused: dict[tuple[str, str], int]
    connection_accept_throttle_ms: dict[str, int]
    groups: list[tuple[str, str, int]]  # (group, state, members)
    offsets: list[tuple[str, str, int, int, int]]  # (group, topic, partition, committed, end or -1)
    completed_rebalances: int
    requests: dict[int, tuple[int, list[int], tuple[float, ...]]]
    loop_lag_s: float
    loop_lag_max_s: float
    iceberg_lag: list[tuple[str, int, int, float]] = dataclasses.field(default_factory=list)
    iceberg_counters: dict[str, TopicCounters] = dataclasses.field(default_factory=dict)


def take_snapshot(sources: Sources) -> Snapshot:
    """Copy what the scrape reports; runs on the broker's event loop."""
    stats = sources.stats
    topics = {
        name: (
            t.messages_in,
            t.bytes_in,
            t.bytes_out,
            t.failed_produce,
            t.failed_fetch,
            t.produce_requests,
            t.fetch_requests,
        )
        for name, t in stats.topics.items()
    }
    replicas = sources.replica_manager
    partitions = []
    local_hw: dict[tuple[str, int], int] = {}
    if replicas is not None:
        for (topic, index), p in replicas.partitions.items():
            log_ = p.log
            hw = log_.high_watermark
            local_hw[(topic, index)] = hw
            partitions.append(
                (
                    topic,
                    index,
                    p.is_leader and not replicas.fenced,
                    log_.size_in_bytes,
                    log_.log_start_offset,
                    log_.log_end_offset,
                    hw,
                    len(log_.segments),
                    len(p.isr),
                    len(p.replicas),
                    log_.config.min_insync_replicas,
                )
            )
    controller = sources.controller
    active = controller is not None and controller.is_active
    offline = 0
    if active:
        for info in sources.metadata.topics.values():
            for index in info.replicas:
                state = info.states.get(index)
                if state is None or state.leader < 0:
                    offline += 1
    connections: dict[str, int] = {}
    for connection in list(sources.connections):
        name = connection.listener
        connections[name] = connections.get(name, 0) + 1
    groups, offsets, rebalances = [], [], 0
    coordinator = sources.group_coordinator
    if coordinator is not None:
        rebalances = coordinator.completed_rebalances
        for group_id, group in coordinator.groups.items():
            groups.append((group_id, group.state.value, len(group.members)))
            for (topic, index), committed in group.offsets.items():
                offsets.append((group_id, topic, index, committed.offset, local_hw.get((topic, index), -1)))
    timing = sources.request_metrics
    lag = sources.loop_lag
    return Snapshot(
        topics=topics,
        partitions=partitions,
        active_controller=active,
        offline_partitions=offline,
        leader_elections=controller.leader_elections if controller else 0,
        unclean_elections=controller.unclean_leader_elections if controller else 0,
        isr_shrinks=stats.isr_shrinks,
        isr_expands=stats.isr_expands,
        replication_bytes_in=stats.replication_bytes_in,
        replication_bytes_out=stats.replication_bytes_out,
        connections=connections,
        connections_created=dict(stats.connections_created),
        connections_closed=dict(stats.connections_closed),
        connections_refused=dict(stats.connections_refused),
        connection_accept_throttle_ms=dict(stats.connection_accept_throttle_ms),
        groups=groups,
        offsets=offsets,
        completed_rebalances=rebalances,
        requests=timing.snapshot() if timing is not None else {},
        loop_lag_s=lag.last_s if lag else 0.0,
        loop_lag_max_s=lag.max_s if lag else 0.0,
        iceberg_lag=sources.iceberg_lag() if sources.iceberg_lag is not None else [],
        iceberg_counters=sources.iceberg_counters() if sources.iceberg_counters is not None else {},
    )


def _counter(name: str, doc: str, per_topic: dict[str, int], total: int) -> Metric:
    """A BrokerTopicMetrics meter: one sample per topic plus the unlabelled all-topics sample."""
    family = Metric(name, doc, "counter")
    for topic, value in sorted(per_topic.items()):
        family.add_sample(name + "_total", {"topic": topic}, value)
    family.add_sample(name + "_total", {}, total)
    return family


class BrokerCollector(Collector):
    """Builds every strom family from a snapshot taken on the broker's loop."""

    def __init__(self, sources: Sources, loop: asyncio.AbstractEventLoop):
        self.sources = sources
        self.loop = loop

    def _snapshot(self) -> Snapshot | None:
        if self.loop.is_closed():
            return None
        done: concurrent.futures.Future[Snapshot] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(take_snapshot(self.sources))
            except Exception as exc:  # noqa: BLE001  (re-raised on the scrape thread, which reports it)
                done.set_exception(exc)

        try:
            self.loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop closed meanwhile: the broker is gone
            return None
        return done.result(timeout=SNAPSHOT_TIMEOUT_S)

    def collect(self) -> Iterator[Metric]:
        try:
            snap = self._snapshot()
        except TimeoutError:
            # The loop has not run a callback for SNAPSHOT_TIMEOUT_S: say so (the process
            # families still come from their own collectors) rather than fail the scrape.
            log.warning("metrics: the event loop did not run the scrape's snapshot within %.0fs", SNAPSHOT_TIMEOUT_S)
            yield from self._loop_metrics(SNAPSHOT_TIMEOUT_S, SNAPSHOT_TIMEOUT_S)
            return
        except Exception:  # into the broker's log; the scrape itself gets a 500
            log.exception("metrics scrape failed")
            raise
        if snap is not None:
            yield from self.families(snap)

    @classmethod
    def families(cls, snap: Snapshot) -> Iterator[Metric]:
        yield from cls._topic_metrics(snap)
        yield from cls._replica_metrics(snap)
        yield from cls._log_metrics(snap)
        yield from cls._request_metrics(snap)
        yield from cls._connection_metrics(snap)
        yield from cls._group_metrics(snap)
        yield from cls._loop_metrics(snap.loop_lag_s, snap.loop_lag_max_s)
        yield from cls._iceberg_metrics(snap)

    @classmethod
    def _iceberg_metrics(cls, snap: Snapshot) -> Iterator[Metric]:
        yield from cls._iceberg_counter_metrics(snap.iceberg_counters)
        if not snap.iceberg_lag:
            return
        lag = GaugeMetricFamily(
            "strom_iceberg_translation_lag_records",
            "Committed records of a partition this broker leads that its Iceberg table does not hold yet "
            "(the last stable offset minus the table's offset as the last translation round read it back)",
            labels=["topic", "partition"],
        )
        seconds = GaugeMetricFamily(
            "strom_iceberg_translation_lag_seconds",
            "How long the oldest committed record of a partition this broker leads has waited for its "
            "Iceberg table, from when this broker first saw it committed (at a translation round or a "
            "scrape, so at least this long); 0 when the table holds every committed record",
            labels=["topic", "partition"],
        )
        for topic, partition, records, waited in snap.iceberg_lag:
            lag.add_metric([topic, str(partition)], records)
            seconds.add_metric([topic, str(partition)], waited)
        yield lag
        yield seconds

    @staticmethod
    def _iceberg_counter_metrics(counters: dict[str, TopicCounters]) -> Iterator[Metric]:
        """Per topic (its table and its dead-letter table), what this broker's translation and the
        table maintenance it ran (as the leader of partition 0) did since the broker started."""
        if not counters:
            return
        simple = [
            ("compactions", "compactions", "Compaction commits of the topic's tables (small files rewritten)"),
            ("compaction_input_files", "files_rewritten", "Small data files that compaction replaced"),
            ("compaction_output_files", "files_written", "Data files that compaction wrote in their place"),
            ("compaction_input_bytes", "bytes_rewritten", "Bytes of the small data files compaction replaced"),
            ("compaction_output_bytes", "bytes_written", "Bytes of the data files compaction wrote"),
            ("snapshots_expired", "snapshots_expired", "Snapshots removed by expiry (history.expire.*)"),
            (
                "deleted_data_bytes",
                "data_bytes_deleted",
                "Bytes of the data files deleted because only expired snapshots referenced them, or their "
                "table was dropped with its topic (iceberg.delete)",
            ),
            (
                "deleted_orphan_bytes",
                "orphan_bytes_deleted",
                "Bytes of the files deleted that no metadata referenced (iceberg.orphan.files.older.than.ms, "
                "a dropped table's leftovers)",
            ),
            ("tables_purged", "tables_purged", "Tables dropped with their deleted topic and their files purged"),
            ("maintenance_failures", "maintenance_failures", "Maintenance runs that failed (retried next interval)"),
            ("translation_failures", "translation_failures", "Translation rounds that failed (retried next round)"),
        ]
        for name, field, doc in simple:
            family = CounterMetricFamily(f"strom_iceberg_{name}", doc, labels=["topic"])
            for topic, found in sorted(counters.items()):
                family.add_metric([topic], getattr(found, field))
            yield family
        deleted = CounterMetricFamily(
            "strom_iceberg_files_deleted",
            "Files deleted from the warehouse because only expired snapshots referenced them or their table "
            "was dropped with its topic, by kind (data, manifest, manifest_list, metadata), and files no "
            "metadata referenced (orphan)",
            labels=["topic", "kind"],
        )
        conflicts = CounterMetricFamily(
            "strom_iceberg_commit_conflicts",
            "Commits that lost a race to another writer of the table and were planned again, by writer "
            "(translation, maintenance)",
            labels=["topic", "writer"],
        )
        for topic, found in sorted(counters.items()):
            deleted.add_metric([topic, "data"], found.data_files_deleted)
            deleted.add_metric([topic, "manifest"], found.manifests_deleted)
            deleted.add_metric([topic, "manifest_list"], found.manifest_lists_deleted)
            deleted.add_metric([topic, "metadata"], found.metadata_files_deleted)
            deleted.add_metric([topic, "orphan"], found.orphan_files_deleted)
            conflicts.add_metric([topic, "translation"], found.translation_conflicts)
            conflicts.add_metric([topic, "maintenance"], found.maintenance_conflicts)
        yield deleted
        yield conflicts

    @staticmethod
    def _loop_metrics(last_s: float, max_s: float) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "strom_eventloop_lag_seconds",
            "How late the broker's event loop ran a timer at its last check (every 0.25 s); "
            "during a stall that keeps a scrape from reading the broker, at least "
            f"{SNAPSHOT_TIMEOUT_S:.0f} s",
            value=last_s,
        )
        yield GaugeMetricFamily(
            "strom_eventloop_lag_max_seconds",
            "The largest event-loop lag among the last 40 checks (about 10 s)",
            value=max_s,
        )

    @staticmethod
    def _topic_metrics(snap: Snapshot) -> Iterator[Metric]:
        columns = [
            ("messagesin", "Records appended by this broker as leader (from producers and coordinators)"),
            ("bytesin", "Bytes of record batches appended as leader, as the producer sent them"),
            ("bytesout", "Record bytes sent to consumers (follower fetches excluded)"),
            ("failedproducerequests", "Partition appends that failed"),
            ("failedfetchrequests", "Partition reads that failed"),
            ("totalproducerequests", "Partition appends requested"),
            ("totalfetchrequests", "Partition reads requested"),
        ]
        for i, (name, doc) in enumerate(columns):
            per_topic = {topic: values[i] for topic, values in snap.topics.items()}
            yield _counter(f"kafka_server_brokertopicmetrics_{name}", doc, per_topic, sum(per_topic.values()))
        yield CounterMetricFamily(
            "kafka_server_brokertopicmetrics_replicationbytesin",
            "Bytes appended as follower",
            value=snap.replication_bytes_in,
        )
        yield CounterMetricFamily(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Record bytes sent to followers",
            value=snap.replication_bytes_out,
        )

    @staticmethod
    def _replica_metrics(snap: Snapshot) -> Iterator[Metric]:
        leaders = [p for p in snap.partitions if p[2]]
        gauges = [
            ("kafka_server_replicamanager_partitioncount", "Replicas on this broker", len(snap.partitions)),
            ("kafka_server_replicamanager_leadercount", "Partitions this broker leads", len(leaders)),
            (
                "kafka_server_replicamanager_underreplicatedpartitions",
                "Partitions led here whose ISR is smaller than their replica set",
                sum(1 for p in leaders if p[8] < p[9]),
            ),
            (
                "kafka_server_replicamanager_underminisrpartitioncount",
                "Partitions led here with fewer in-sync replicas than min.insync.replicas",
                sum(1 for p in leaders if p[8] < p[10]),
            ),
            (
                "kafka_server_replicamanager_atminisrpartitioncount",
                "Partitions led here with exactly min.insync.replicas in sync",
                sum(1 for p in leaders if p[8] == p[10]),
            ),
            (
                "kafka_controller_kafkacontroller_activecontrollercount",
                "1 on the active controller, else 0",
                int(snap.active_controller),
            ),
            (
                "kafka_controller_kafkacontroller_offlinepartitionscount",
                "Partitions without a leader (reported by the active controller only)",
                snap.offline_partitions,
            ),
        ]
        for name, doc, value in gauges:
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks made by this broker as leader",
            value=snap.isr_shrinks,
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions made by this broker as leader",
            value=snap.isr_expands,
        )
        elections = Metric(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            "Leader elections made by this broker as controller",
            "counter",
        )
        elections.add_sample(
            "kafka_controller_controllerstats_leaderelectionrateandtimems_count", {}, snap.leader_elections
        )
        yield elections
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Unclean leader elections made by this broker as controller",
            value=snap.unclean_elections,
        )

    @staticmethod
    def _log_metrics(snap: Snapshot) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        families = [
            (GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log on disk", labels=labels), 3),
            (GaugeMetricFamily("kafka_log_log_logstartoffset", "The log start offset", labels=labels), 4),
            (GaugeMetricFamily("kafka_log_log_logendoffset", "The log end offset", labels=labels), 5),
            (GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the log", labels=labels), 7),
            (
                GaugeMetricFamily(
                    "kafka_cluster_partition_highwatermark",
                    "The high watermark as this replica knows it (strom's addition)",
                    labels=labels,
                ),
                6,
            ),
            (
                GaugeMetricFamily(
                    "kafka_cluster_partition_insyncreplicascount", "ISR size (leaders only)", labels=labels
                ),
                8,
            ),
            (
                GaugeMetricFamily(
                    "kafka_cluster_partition_replicascount", "Replica count (leaders only)", labels=labels
                ),
                9,
            ),
        ]
        under = GaugeMetricFamily(
            "kafka_cluster_partition_underreplicated",
            "1 if the ISR is smaller than the replica set (leaders only)",
            labels=labels,
        )
        for p in snap.partitions:
            key = [p[0], str(p[1])]
            for family, column in families:
                if column in (8, 9) and not p[2]:
                    continue
                family.add_metric(key, cast(int, p[column]))
            if p[2]:
                under.add_metric(key, int(p[8] < p[9]))
        for family, _ in families:
            yield family
        yield under

    @staticmethod
    def _request_metrics(snap: Snapshot) -> Iterator[Metric]:
        """Kafka's TotalTimeMs as a histogram; the phases as count and sum, so dashboards draw their means.

        The requests counter counts every request; the histogram and the phases count the timed
        ones, all of them up to about 500 request batches a second and an even sample above
        (``strom.metrics.stats.RequestMetrics``), so their quantiles and means hold either way.

        Queue: from when the broker began handling the bytes the request came in with to its
        handler, i.e. the time behind requests pipelined before it (the read is not timed). Local:
        the handler's synchronous run (with the encoding of a response sent at once). Remote: an
        awaited handler's wait (acks=all, long-poll Fetch, a coordinator's write). ResponseSend:
        encoding an awaited handler's response and handing it to the transport; the kernel's send
        happens after and is not timed.
        """
        rate = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered, per API", labels=["request"]
        )
        total = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its response handed to the transport "
            "(every request up to about 500 request batches a second, an even sample above)",
            labels=["request"],
        )
        phases = [
            SummaryMetricFamily(f"kafka_network_requestmetrics_{phase}timems", doc, labels=["request"])
            for phase, doc in _PHASE_DOCS
        ]
        bounds = [_ms(b) for b in TIME_BOUNDS_S] + ["+Inf"]
        for api_key, (count, buckets, sums) in sorted(snap.requests.items()):
            name = request_name(api_key)
            rate.add_metric([name], count)
            cumulative, running = [], 0
            for bound, n in zip(bounds, buckets):
                running += n
                cumulative.append((bound, running))
            total.add_metric([name], cumulative, sums[4] * 1000.0)
            for family, seconds in zip(phases, sums):
                family.add_metric([name], running, seconds * 1000.0)  # the timed requests' count
        yield rate
        yield total
        yield from phases

    @staticmethod
    def _connection_metrics(snap: Snapshot) -> Iterator[Metric]:
        count = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count", "Open client connections", labels=["listener"]
        )
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation", "Connections accepted", labels=["listener"]
        )
        closed = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_close", "Connections closed", labels=["listener"]
        )
        for listener in sorted(set(snap.connections) | set(snap.connections_created)):
            count.add_metric([listener], snap.connections.get(listener, 0))
            created.add_metric([listener], snap.connections_created.get(listener, 0))
            closed.add_metric([listener], snap.connections_closed.get(listener, 0))
        refused = CounterMetricFamily(
            "strom_server_connections_refused",
            "Connections closed at once for breaking a connection limit (strom.server.connection_limits)",
            labels=["listener", "limit"],
        )
        for (listener, limit), value in sorted(snap.connections_refused.items()):
            refused.add_metric([listener, limit], value)
        throttled = CounterMetricFamily(
            "kafka_network_acceptor_acceptor_blocked_time_ms",
            "Time new connections waited to be read, over a connection creation rate",
            labels=["listener"],
        )
        for listener, value in sorted(snap.connection_accept_throttle_ms.items()):
            throttled.add_metric([listener], value)
        yield from (count, created, closed, refused, throttled)

    @staticmethod
    def _group_metrics(snap: Snapshot) -> Iterator[Metric]:
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        by_state = {state: 0 for state in _GROUP_STATES}
        for _, state, _ in snap.groups:
            by_state[state] = by_state.get(state, 0) + 1
        yield GaugeMetricFamily(prefix + "numgroups", "Groups this broker coordinates", value=len(snap.groups))
        for state in _GROUP_STATES:
            yield GaugeMetricFamily(
                prefix + "numgroups" + state.lower(), f"Groups in state {state}", value=by_state[state]
            )
        yield GaugeMetricFamily(prefix + "numoffsets", "Committed offsets this broker holds", value=len(snap.offsets))
        yield CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_completed_rebalance",
            "Rebalances completed (a generation handed out)",
            value=snap.completed_rebalances,
        )
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
        for group_id, _, count in snap.groups:
            members.add_metric([group_id], count)
        yield members
        labels = ["consumergroup", "topic", "partition"]
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset", labels=labels)
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the committed offset, computed by the "
            "group's coordinator where it holds a replica of the partition",
            labels=labels,
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "The group's lag summed over a topic's partitions",
            labels=["consumergroup", "topic"],
        )
        sums: dict[tuple[str, str], int] = {}
        for group_id, topic, index, committed, end in snap.offsets:
            key = [group_id, topic, str(index)]
            current.add_metric(key, committed)
            if end >= 0:
                behind = max(0, end - committed)
                lag.add_metric(key, behind)
                sums[(group_id, topic)] = sums.get((group_id, topic), 0) + behind
        for (group_id, topic), total in sorted(sums.items()):
            lag_sum.add_metric([group_id, topic], total)
        yield from (current, lag, lag_sum)


_PHASE_DOCS = [
    ("queue", "Time a request waited behind requests before it on its connection until its handler ran"),
    ("local", "Time the handler ran on the event loop (with the encoding of a response sent at once)"),
    ("remote", "Time an awaited handler waited (acks=all, long-poll Fetch, coordinator writes)"),
    ("responsesend", "Time to encode an awaited handler's response and hand it to the socket transport"),
]


def _ms(seconds: float) -> str:
    return repr(round(seconds * 1000, 6))


def exported_names() -> set[str]:
    """Every family and sample name a broker exports (a dashboard's expressions are checked against it)."""
    registry = CollectorRegistry()
    register_process_collectors(registry)
    families = list(registry.collect())
    families.extend(BrokerCollector.families(_sample_snapshot()))
    return {f.name for f in families} | {s.name for f in families for s in f.samples}


def _sample_snapshot() -> Snapshot:
    """A snapshot with one of everything, so that every family has its samples."""
    from strom.iceberg.translator import TopicCounters

    return Snapshot(
        topics={"t": (1, 1, 1, 1, 1, 1, 1)},
        partitions=[("t", 0, True, 1, 0, 1, 1, 1, 1, 1, 1)],
        active_controller=True,
        offline_partitions=0,
        leader_elections=0,
        unclean_elections=0,
        isr_shrinks=0,
        isr_expands=0,
        replication_bytes_in=0,
        replication_bytes_out=0,
        connections={"PLAINTEXT": 1},
        connections_created={"PLAINTEXT": 1},
        connections_closed={},
        connections_refused={},
        connection_accept_throttle_ms={},
        groups=[("g", "Stable", 1)],
        offsets=[("g", "t", 0, 0, 1)],
        completed_rebalances=0,
        requests={0: (1, [1] + [0] * len(TIME_BOUNDS_S), (0.0, 0.0, 0.0, 0.0, 0.0))},
        loop_lag_s=0.0,
        loop_lag_max_s=0.0,
        iceberg_lag=[("t", 0, 0, 0.0)],
        iceberg_counters={"t": TopicCounters()},
    )
