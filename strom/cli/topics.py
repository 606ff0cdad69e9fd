"""``strom topics``: create, list, describe, alter and delete topics, like Kafka's kafka-topics.sh.

    strom topics --bootstrap-server 127.0.0.1:9092 --create --topic orders --partitions 3 \\
        --replication-factor 1 --config retention.ms=86400000
    strom topics --bootstrap-server 127.0.0.1:9092 --list
    strom topics --bootstrap-server 127.0.0.1:9092 --describe --topic orders
    strom topics --bootstrap-server 127.0.0.1:9092 --alter --topic orders --partitions 6
    strom topics --bootstrap-server 127.0.0.1:9092 --delete --topic orders

As in Kafka, ``--topic`` is a regular expression for --list/--describe/--alter/--delete (``,`` means
``|``; it must match the whole name). --describe prints TopicCommand's layout: a tab-separated topic
line whose ``Configs:`` lists only the non-default settings, then one line per partition (``Elr`` and
``LastKnownElr`` read ``N/A``, as Kafka prints them when the broker does not report them).
Errors are one line on stderr and exit code 1; when no broker answers within --timeout (default
10 s) that line names the bootstrap servers and the last connection error.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys

from strom.cli.client_props import (
    ToolError,
    add_timeout_argument,
    client_config,
    ensure_reachable,
    error_name,
    error_text,
    exits_quietly_on_broken_pipe,
    load_properties,
)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
ERROR_PREFIX = "Error while executing topic command : "
MASK64 = (1 << 64) - 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a new topic")
    actions.add_argument("--list", action="store_true", help="list all available topics")
    actions.add_argument("--describe", action="store_true", help="describe the given topics (all when no --topic)")
    actions.add_argument("--alter", action="store_true", help="alter the number of partitions")
    actions.add_argument("--delete", action="store_true", help="delete a topic")
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    parser.add_argument("--command-config", metavar="FILE", help="admin client properties file")
    parser.add_argument("--topic", help="the topic (a regular expression except with --create)")
    parser.add_argument("--partitions", type=int, help="number of partitions (--create, --alter)")
    parser.add_argument("--replication-factor", type=int, help="replication factor (--create)")
    parser.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4",
        help="manual assignment: partitions separated by ',', replicas by ':'",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config override for --create (repeatable)",
    )
    parser.add_argument("--if-not-exists", action="store_true", help="--create: do nothing if the topic exists")
    parser.add_argument(
        "--if-exists", action="store_true", help="--alter/--describe/--delete: do nothing if the topic does not exist"
    )
    parser.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    parser.add_argument(
        "--topics-with-overrides", action="store_true", help="--describe: only topics that have config overrides"
    )
    parser.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="--describe: only partitions whose ISR is smaller than the replica set",
    )
    parser.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="--describe: only partitions whose leader is not available",
    )
    parser.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="--describe: only partitions whose ISR is smaller than min.insync.replicas",
    )
    parser.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="--describe: only partitions whose ISR equals min.insync.replicas",
    )
    add_timeout_argument(parser)


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    timeout = args.timeout / 1000
    try:
        check_args(args)
        overrides = load_properties(args.command_config) if args.command_config else {}
        admin = AdminClient(client_config(args.bootstrap_server, overrides=overrides))
        ensure_reachable(admin, args.bootstrap_server, timeout)
        if args.create:
            create(admin, args)
        elif args.list:
            for name in matching_topics(admin, args.topic, args.exclude_internal, timeout):
                print(name)
        elif args.describe:
            describe(admin, args)
        elif args.alter:
            alter(admin, args)
        else:
            delete(admin, args)
        return 0
    except (ToolError, KafkaException, ValueError) as exc:
        print(ERROR_PREFIX + error_text(exc), file=sys.stderr)
        return 1


def check_args(args: argparse.Namespace) -> None:
    if (args.create or args.alter or args.delete) and not args.topic:
        raise ToolError("--topic is required with --create, --alter and --delete")
    if args.config and not args.create:
        raise ToolError("--config is only valid with --create (use strom configs to alter topic configs)")
    if args.alter and args.partitions is None:
        raise ToolError("--partitions is required with --alter")
    if args.create and args.replica_assignment and (args.partitions or args.replication_factor):
        raise ToolError("--replica-assignment cannot be used with --partitions or --replication-factor")
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise ToolError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise ToolError("The partitions must be greater than 0")


def wait(futures: dict, timeout: float) -> None:
    for future in futures.values():
        future.result(timeout=timeout)


# ---------------------------------------------------------------- create / alter / delete


def parse_topic_configs(items: list[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        pieces = re.split(r"\s*=\s*", item)
        if len(pieces) != 2:
            raise ToolError('Invalid topic config: all configs to be added must be in the format "key=val".')
        configs[pieces[0].strip()] = pieces[1].strip()
    return configs


def parse_replica_assignment(text: str) -> list[list[int]]:
    assignment: list[list[int]] = []
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise ToolError(f"Invalid replica assignment '{text}'") from None
        if len(set(brokers)) != len(brokers):
            raise ToolError("Partition replica lists may not contain duplicate entries: " + part)
        if assignment and len(brokers) != len(assignment[0]):
            raise ToolError(f"Partition {index} has different replication factor: {brokers}")
        assignment.append(brokers)
    return assignment


def create(admin, args: argparse.Namespace) -> None:
    from confluent_kafka.admin import NewTopic

    if "." in args.topic or "_" in args.topic:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
            "could collide. To avoid issues it is best to use either, but not both.",
            file=sys.stderr,
        )
    configs = parse_topic_configs(args.config)
    timeout = args.timeout / 1000
    if args.replica_assignment:
        assignment = parse_replica_assignment(args.replica_assignment)
        new_topic = NewTopic(args.topic, num_partitions=len(assignment), replica_assignment=assignment, config=configs)
    else:
        new_topic = NewTopic(
            args.topic,
            num_partitions=args.partitions if args.partitions is not None else -1,
            replication_factor=(args.replication_factor if args.replication_factor is not None else -1),
            config=configs,
        )
    try:
        wait(admin.create_topics([new_topic], operation_timeout=timeout, request_timeout=timeout), timeout)
    except Exception as exc:
        if args.if_not_exists and error_name(exc) == "TOPIC_ALREADY_EXISTS":
            return
        raise
    print(f"Created topic {args.topic}.")


def alter(admin, args: argparse.Namespace) -> None:
    from confluent_kafka.admin import NewPartitions

    timeout = args.timeout / 1000
    topics = matching_topics(admin, args.topic, args.exclude_internal, timeout)
    ensure_found(topics, args)
    if topics:
        wait(
            admin.create_partitions(
                [NewPartitions(t, args.partitions) for t in topics], operation_timeout=timeout, request_timeout=timeout
            ),
            timeout,
        )


def delete(admin, args: argparse.Namespace) -> None:
    timeout = args.timeout / 1000
    topics = matching_topics(admin, args.topic, args.exclude_internal, timeout)
    ensure_found(topics, args)
    if topics:
        wait(admin.delete_topics(topics, operation_timeout=timeout, request_timeout=timeout), timeout)


# ---------------------------------------------------------------- list / describe


def topic_filter(pattern: str | None):
    """Kafka's IncludeList: ',' separates alternatives, quotes and spaces are dropped, whole-name match."""
    if not pattern:
        return None
    regex = pattern.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"^[\"']+", "", regex)
    regex = re.sub(r"[\"']+$", "", regex)
    try:
        return re.compile(regex)
    except re.error as exc:
        raise ToolError(f"{pattern} is an invalid regex: {exc}") from None


def matching_topics(admin, pattern: str | None, exclude_internal: bool, timeout: float, metadata=None) -> list[str]:
    names = sorted((metadata or admin.list_topics(timeout=timeout)).topics)
    regex = topic_filter(pattern)
    return [
        name
        for name in names
        if (regex is None or regex.fullmatch(name)) and not (exclude_internal and name in INTERNAL_TOPICS)
    ]


def ensure_found(topics: list[str], args: argparse.Namespace) -> None:
    if args.topic and not topics and not args.if_exists:
        raise ToolError(f"Topic '{args.topic}' does not exist as expected")


def kafka_uuid(uuid) -> str | None:
    """A topic id as Kafka prints it: URL-safe base64 of the 16 bytes, no padding; None for the zero id."""
    if uuid is None:
        return None
    high, low = uuid.get_most_significant_bits(), uuid.get_least_significant_bits()
    if high == 0 and low == 0:
        return None
    raw = (((high & MASK64) << 64) | (low & MASK64)).to_bytes(16, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def node_ids(nodes) -> str:
    return ",".join(str(node.id) for node in nodes)


def topic_configs(admin, names: list[str], timeout: float) -> dict[str, dict[str, tuple[str, bool]] | None]:
    """name -> {config: (value, is_default)}; None for every topic when the broker has no DescribeConfigs."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    if not names:
        return {}
    futures = admin.describe_configs([ConfigResource("topic", name) for name in names], request_timeout=timeout)
    result: dict[str, dict[str, tuple[str, bool]] | None] = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=timeout)
        except Exception as exc:
            if error_name(exc) in ("_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION"):
                result[resource.name] = None
                continue
            raise
        result[resource.name] = {
            name: (entry.value, entry.source == ConfigSource.DEFAULT_CONFIG.value or entry.is_default)
            for name, entry in entries.items()
        }
    return result


def describe(admin, args: argparse.Namespace) -> None:
    from confluent_kafka import TopicCollection

    timeout = args.timeout / 1000
    metadata = admin.list_topics(timeout=timeout)
    topics = matching_topics(admin, args.topic, args.exclude_internal, timeout, metadata)
    ensure_found(topics, args)
    if not topics:
        return
    futures = admin.describe_topics(TopicCollection(topics), request_timeout=timeout)
    descriptions = {name: future.result(timeout=timeout) for name, future in futures.items()}
    configs = topic_configs(admin, topics, timeout)
    live = set(metadata.brokers)
    moves = ongoing_reassignments(admin, args, timeout)
    partition_filters = (
        args.under_replicated_partitions
        or args.unavailable_partitions
        or args.under_min_isr_partitions
        or args.at_min_isr_partitions
    )
    for name in topics:
        description = descriptions[name]
        config = configs.get(name) or {}
        partitions = sorted(description.partitions, key=lambda p: p.id)
        overrides = [(key, value) for key, (value, is_default) in sorted(config.items()) if not is_default]
        if not partition_filters and (not args.topics_with_overrides or overrides):
            fields = [f"Topic: {name}"]
            topic_id = kafka_uuid(getattr(description, "topic_id", None))
            if topic_id:
                fields.append(f"TopicId: {topic_id}")
            fields.append(f"PartitionCount: {len(partitions)}")
            adding = len(moves[(name, partitions[0].id)][1]) if partitions and (name, partitions[0].id) in moves else 0
            fields.append(f"ReplicationFactor: {len(partitions[0].replicas) - adding if partitions else 0}")
            fields.append("Configs: " + ",".join(f"{k}={v}" for k, v in overrides))
            print("\t".join(fields))
        if args.topics_with_overrides:
            continue
        min_isr = int(config.get("min.insync.replicas", ("1", True))[0] or 1)
        iceberg_lags = iceberg_lag_fields(admin, args, name, config.get("iceberg.mode", ("disabled", True))[0])
        for partition in partitions:
            if partition_filters and not wanted(partition, args, live, min_isr):
                continue
            leader = partition.leader.id if partition.leader is not None and partition.leader.id >= 0 else "none"
            move = moves.get((name, partition.id))  # Kafka shows a reassignment in progress
            moving = (
                (f"\tAdding Replicas: {','.join(map(str, move[1]))}\tRemoving Replicas: {','.join(map(str, move[2]))}")
                if move
                else ""
            )
            print(
                f"\tTopic: {name}\tPartition: {partition.id}\tLeader: {leader}"
                f"\tReplicas: {node_ids(partition.replicas)}\tIsr: {node_ids(partition.isr)}{moving}"
                f"\tElr: N/A\tLastKnownElr: N/A{iceberg_lags.get(partition.id, '')}"
            )


def iceberg_lag_fields(admin, args: argparse.Namespace, topic: str, mode: str | None) -> dict[int, str]:
    """Partition -> "\tIcebergLag: ..." for an Iceberg topic (none for other topics, as Kafka prints).

    The lag is ``strom iceberg status``'s: committed records not in the table yet, and the age of
    the oldest of them. When the brokers' catalog cannot be opened from here, one warning on stderr."""
    if mode in (None, "disabled"):
        return {}
    from strom.cli import iceberg

    timeout = args.timeout / 1000
    overrides = load_properties(args.command_config) if args.command_config else {}
    try:
        catalog = iceberg.open_brokers_catalog(admin, None, timeout)
        lags = iceberg.partition_lags(
            admin, client_config(args.bootstrap_server, overrides=overrides), catalog, topic, timeout
        )
    except ToolError as exc:
        print(f"WARNING the Iceberg lag of {topic} is unknown: {exc}", file=sys.stderr)
        return {}
    return {
        lag.partition: f"\tIcebergLag: {lag.lag_records}"
        + (f" ({lag.lag_seconds:.1f} s)" if lag.lag_seconds is not None else "")
        for lag in lags
    }


def ongoing_reassignments(admin, args: argparse.Namespace, timeout: float) -> dict:
    """(topic, partition) -> (replicas, adding, removing) of the moves in progress; none when they cannot be listed."""
    from confluent_kafka import KafkaException

    from strom.cli.reassign_partitions import ReassignTool
    from strom.protocol.errors import KafkaError

    try:
        tool = ReassignTool(args.bootstrap_server, timeout, args.command_config, admin=admin)
        try:
            return tool.ongoing()
        finally:
            tool.close()
    except (ToolError, KafkaException, KafkaError):
        return {}


def wanted(partition, args: argparse.Namespace, live: set[int], min_isr: int) -> bool:
    has_leader = partition.leader is not None and partition.leader.id >= 0
    isr = len(partition.isr)
    return (
        (args.under_replicated_partitions and len(partition.replicas) > isr)
        or (args.unavailable_partitions and (not has_leader or partition.leader.id not in live))
        or (args.under_min_isr_partitions and (not has_leader or isr < min_isr))
        or (args.at_min_isr_partitions and isr == min_isr)
    )
