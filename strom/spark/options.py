"""Options of the ``strom`` Spark data source, named and defaulted as in Spark's Kafka source.

Everything here is plain Python (no pyspark, no client library) so that it pickles to executors
and is tested without Spark. Offsets travel as Spark's Kafka source writes them in its offset
log: ``{"topic": {"0": 23, "1": 42}}`` (JSON object, string partition keys); in a starting or
ending spec, -2 means earliest and -1 latest.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

EARLIEST = -2
LATEST = -1

# Java-client properties that make no sense for a source/sink whose keys and values are bytes.
_REJECTED_CLIENT_KEYS = {
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "enable.auto.commit",
    "interceptor.classes",
}

TopicPartitionKey = tuple[str, int]
Offsets = dict[TopicPartitionKey, int]


class StromOptionError(ValueError):
    """A source or sink option is missing or malformed; the message names the option."""


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, deleted topic) and failOnDataLoss is true."""


def _bool(options: dict, name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise StromOptionError(f"option {name!r} must be true or false, got {raw!r}")
    return text == "true"


def _positive_int(options: dict, name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise StromOptionError(f"option {name!r} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise StromOptionError(f"option {name!r} must be a positive integer, got {raw!r}")
    return value


@dataclass(frozen=True)
class Subscription:
    """Exactly one of Spark's three ways to name topics: subscribe, subscribePattern, assign."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartitionKey, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None
        if self.assign:
            return any(t == topic for t, _ in self.assign)
        return topic in self.topics

    def select(self, metadata: dict[str, int]) -> list[TopicPartitionKey]:
        """The topic-partitions of ``metadata`` ({topic: partition count}) this subscription reads."""
        if self.assign:
            return sorted(tp for tp in self.assign if tp[1] < metadata.get(tp[0], 0))
        return sorted((t, p) for t, n in metadata.items() if self.matches(t) for p in range(n))


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: str | dict  # "earliest" | "latest" | {(topic, partition): offset or -2/-1}
    ending: str | dict
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_s: float
    client_config: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, options: dict, *, streaming: bool) -> SourceOptions:
        opts = {str(k).lower(): v for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise StromOptionError("option 'kafka.bootstrap.servers' is required")
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(chosen) != 1:
            raise StromOptionError(
                f"exactly one of 'subscribe', 'subscribePattern' or 'assign' is required, got {len(chosen)}"
            )
        if chosen[0] == "subscribe":
            topics = tuple(t.strip() for t in str(opts["subscribe"]).split(",") if t.strip())
            if not topics:
                raise StromOptionError("option 'subscribe' names no topic")
            subscription = Subscription(topics=topics)
        elif chosen[0] == "subscribepattern":
            try:
                re.compile(opts["subscribepattern"])
            except re.error as exc:
                raise StromOptionError(f"option 'subscribePattern' is not a regular expression: {exc}") from None
            subscription = Subscription(pattern=str(opts["subscribepattern"]))
        else:
            subscription = Subscription(assign=_parse_assign(opts["assign"]))
        starting = _parse_offsets_spec(
            opts.get("startingoffsets"), "startingOffsets", "latest" if streaming else "earliest"
        )
        ending = _parse_offsets_spec(opts.get("endingoffsets"), "endingOffsets", "latest")
        if streaming and opts.get("endingoffsets") is not None:
            raise StromOptionError("option 'endingOffsets' is for batch queries only")
        if starting == "latest" and not streaming:
            raise StromOptionError("startingOffsets=latest is for streaming queries only")
        if ending == "earliest":
            raise StromOptionError("endingOffsets=earliest is not allowed")
        if isinstance(ending, dict) and any(v == EARLIEST for v in ending.values()):
            raise StromOptionError("endingOffsets must not use -2 (earliest) for a partition")
        if isinstance(starting, dict) and not streaming and any(v == LATEST for v in starting.values()):
            raise StromOptionError("startingOffsets must not use -1 (latest) in a batch query")
        client = client_config_from_options(opts)
        isolation = client.get("isolation.level")
        if isolation is not None and isolation not in ("read_committed", "read_uncommitted"):
            raise StromOptionError(
                f"option 'kafka.isolation.level' must be read_committed or read_uncommitted, got {isolation!r}"
            )
        poll_ms = opts.get("kafkaconsumer.polltimeoutms")
        return cls(
            bootstrap_servers=str(bootstrap),
            subscription=subscription,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
            min_partitions=_positive_int(opts, "minPartitions"),
            max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            include_headers=_bool(opts, "includeHeaders", False),
            poll_timeout_s=(int(poll_ms) / 1000.0) if poll_ms else 120.0,
            client_config=client,
        )


AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
DEFAULT_TRANSACTIONAL_ID_PREFIX = "strom-sink"
# The one-partition topic whose (never written) partition 0 carries the sink groups' marker
# offsets: Kafka stores committed offsets only for partitions that exist, so the key must be real.
DEFAULT_MARKER_TOPIC = "__strom_sink_markers"
# Producer settings an exactly-once sink derives itself or cannot work without.
_EXACTLY_ONCE_OWNED = {
    "transactional.id": "derived from the query id and the Spark partition id",
    "enable.idempotence": "transactions need the idempotent producer",
}


@dataclass(frozen=True)
class SinkDelivery:
    """The sink's delivery options: ``deliveryGuarantee``, ``transactionalIdPrefix``, ``writeId``, ``markerTopic``.

    ``writeId`` names a batch (``df.write``) write: inside ``foreachBatch`` it is required, to
    tell the writes of one micro-batch apart; outside it makes a re-run of the same job write
    only what an earlier run did not commit.
    """

    exactly_once: bool = False
    transactional_id_prefix: str = DEFAULT_TRANSACTIONAL_ID_PREFIX
    write_id: str | None = None
    marker_topic: str = DEFAULT_MARKER_TOPIC

    @classmethod
    def parse(cls, opts: dict) -> SinkDelivery:
        opts = {str(k).lower(): v for k, v in opts.items()}
        raw = str(opts.get("deliveryguarantee", AT_LEAST_ONCE)).strip().lower().replace("_", "-")
        if raw not in (AT_LEAST_ONCE, EXACTLY_ONCE):
            raise StromOptionError(
                f"option 'deliveryGuarantee' must be {AT_LEAST_ONCE} or {EXACTLY_ONCE}, "
                f"got {opts.get('deliveryguarantee')!r}"
            )
        exactly_once = raw == EXACTLY_ONCE
        names = {name: opts.get(name.lower()) for name in ("transactionalIdPrefix", "writeId", "markerTopic")}
        given = [name for name, value in names.items() if value is not None]
        if given and not exactly_once:
            raise StromOptionError(f"option {given[0]!r} needs deliveryGuarantee={EXACTLY_ONCE}")
        for name, value in names.items():
            if value is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", str(value)):
                raise StromOptionError(
                    f"option {name!r} may hold only letters, digits, '.', '_' and '-', got {value!r}"
                )
        if exactly_once:
            client = client_config_from_options(opts)
            for key, why in _EXACTLY_ONCE_OWNED.items():
                if key in client:
                    raise StromOptionError(
                        f"option 'kafka.{key}' cannot be set with deliveryGuarantee={EXACTLY_ONCE}: {why}"
                    )
            if str(client.get("acks", "all")).lower() not in ("all", "-1"):
                raise StromOptionError(
                    f"deliveryGuarantee={EXACTLY_ONCE} needs kafka.acks=all "
                    f"(transactions require it), got {client['acks']!r}"
                )
        return cls(
            exactly_once=exactly_once,
            transactional_id_prefix=str(names["transactionalIdPrefix"] or DEFAULT_TRANSACTIONAL_ID_PREFIX),
            write_id=None if names["writeId"] is None else str(names["writeId"]),
            marker_topic=str(names["markerTopic"] or DEFAULT_MARKER_TOPIC),
        )

    def transactional_id(self, write: str, partition: int) -> str:
        """The transactional.id of one Spark partition of one write; also the name of its sink group."""
        return f"{self.transactional_id_prefix}-{write}-{partition}"


def connection_config(client_config: dict) -> dict:
    """The connection and security properties of ``kafka.*`` options: for admin and side clients,
    which would warn about (or reject) consumer- or producer-only keys."""
    return {
        key: value
        for key, value in client_config.items()
        if key.startswith(
            ("security.", "sasl.", "ssl.", "client.", "socket.", "broker.", "api.", "metadata.", "debug", "log_level")
        )
    }


def client_config_from_options(opts: dict) -> dict:
    """``kafka.``-prefixed options as librdkafka properties (the prefix stripped).

    The security options of Spark's Kafka source pass through as its users write them for the Java
    client (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
    ``kafka.ssl.truststore.location`` of a PEM file, ...) and become librdkafka's keys the way
    ``--command-config`` files do; librdkafka's own (``kafka.sasl.username``, ``kafka.ssl.ca.location``)
    work too. Every client the source and sink make, on the driver and on executors, starts from this.
    """
    from strom.cli.client_props import ToolError, from_java_keys

    config = {}
    for key, value in opts.items():
        key = str(key).lower()
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in _REJECTED_CLIENT_KEYS:
            raise StromOptionError(
                f"Kafka option {name!r} is not supported: keys and values are bytes "
                "and offsets are tracked by Spark's checkpoint"
            )
        config[name] = str(value)
    try:
        return from_java_keys(config)
    except ToolError as exc:
        raise StromOptionError(f"Kafka security options: {exc}") from None


def _parse_assign(raw) -> tuple[TopicPartitionKey, ...]:
    try:
        parsed = json.loads(raw)
        pairs = tuple(sorted((str(t), int(p)) for t, parts in parsed.items() for p in parts))
    except (ValueError, TypeError, AttributeError):
        raise StromOptionError(f"option 'assign' must be JSON like {{\"topic\":[0,1]}}, got {raw!r}") from None
    if not pairs:
        raise StromOptionError("option 'assign' names no partition")
    return pairs


def _parse_offsets_spec(raw, name: str, default: str) -> str | dict:
    if raw is None:
        return default
    text = str(raw).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        return offsets_from_json(text)
    except (ValueError, TypeError, AttributeError):
        raise StromOptionError(
            f'option {name!r} must be earliest, latest or JSON like {{"topic":{{"0":23}}}}, got {raw!r}'
        ) from None


def offsets_from_json(value: str | dict) -> Offsets:
    parsed = json.loads(value) if isinstance(value, str) else value
    return {(str(t), int(p)): int(o) for t, parts in parsed.items() for p, o in parts.items()}


def offsets_to_json(offsets: Offsets) -> dict:
    """Spark's Kafka offset JSON shape: {"topic": {"0": 23}} with sorted keys (stable offset logs)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def rate_limit(start: Offsets, latest: Offsets, limit: int) -> Offsets:
    """End offsets that admit at most ``limit`` records in total, shared by backlog size.

    Like Spark's Kafka source (each partition gets limit * its share of the backlog), but the
    rounding never lets the total exceed ``limit``: floors first, then the remainder one record at
    a time to the partitions with the largest fractional shares that still have a backlog.
    """
    sizes = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    shares = {tp: limit * size / total for tp, size in sizes.items()}
    take = {tp: min(sizes[tp], math.floor(share)) for tp, share in shares.items()}
    remainder = limit - sum(take.values())
    for tp in sorted(shares, key=lambda t: (-(shares[t] - math.floor(shares[t])), t)):
        if remainder <= 0:
            break
        if take[tp] < sizes[tp]:
            take[tp] += 1
            remainder -= 1
    return {tp: start.get(tp, latest[tp]) + take[tp] for tp in latest}


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None) -> list[OffsetRange]:
    """One range per topic-partition, split further to honour minPartitions / maxRecordsPerPartition.

    As Spark's KafkaOffsetRangeCalculator: with minPartitions above the number of ranges, each
    range gets a number of parts proportional to its size (at least one), split evenly.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        ranges = [part for r in ranges for part in _split(r, math.ceil(r.size / max_records))]
    if min_partitions and min_partitions > len(ranges):
        total = sum(r.size for r in ranges)
        ranges = [part for r in ranges for part in _split(r, max(1, math.ceil(r.size / total * min_partitions)))]
    return ranges


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + (r.size * i) // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
