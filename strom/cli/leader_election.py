"""``strom leader-election``: Kafka's kafka-leader-election.sh (ElectLeaders, KIP-460).

    strom leader-election --bootstrap-server 127.0.0.1:9092 --election-type preferred --all-topic-partitions
    strom leader-election --bootstrap-server 127.0.0.1:9092 --election-type unclean --topic orders --partition 0

Preferred moves each partition's leadership back to its first assigned replica when that
replica is alive and in sync; unclean gives a partition whose leader is gone a leader even if
no in-sync replica survives (committed messages that replica lacks are lost). The output is
Kafka's: the partitions elected, the ones whose leader was already valid, then one line per
failure; failures exit with status 1. When no broker answers within --timeout (default 10 s) it
fails with one line naming the bootstrap servers.
"""

from __future__ import annotations

import argparse
import json
import sys

from strom.cli.client_props import (
    ToolError,
    add_timeout_argument,
    client_config,
    ensure_reachable,
    error_text,
    load_properties,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    parser.add_argument(
        "--admin.config", "--command-config", dest="admin_config", metavar="FILE", help="admin client properties file"
    )
    parser.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=("PREFERRED", "UNCLEAN"),
        help="REQUIRED: preferred or unclean",
    )
    targets = parser.add_mutually_exclusive_group(required=True)
    targets.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    targets.add_argument("--topic", help="the topic (with --partition)")
    targets.add_argument(
        "--path-to-json-file", metavar="FILE", help='{"partitions": [{"topic": "t", "partition": 0}, ...]}'
    )
    parser.add_argument("--partition", type=int, help="the partition of --topic")
    add_timeout_argument(parser)


def partitions_from_args(args: argparse.Namespace):
    from confluent_kafka import TopicPartition

    if args.all_topic_partitions:
        if args.partition is not None:
            raise ToolError("--partition cannot be used with --all-topic-partitions")
        return None
    if args.topic is not None:
        if args.partition is None:
            raise ToolError("--partition is required with --topic")
        return [TopicPartition(args.topic, args.partition)]
    if args.partition is not None:
        raise ToolError("--partition is only valid with --topic")
    try:
        with open(args.path_to_json_file) as handle:
            entries = json.load(handle)["partitions"]
        partitions = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"cannot read partitions from {args.path_to_json_file}: {exc}") from None
    if len({(p.topic, p.partition) for p in partitions}) != len(partitions):
        raise ToolError(f"{args.path_to_json_file} lists a partition twice")
    return partitions


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import ElectionType, KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    try:
        partitions = partitions_from_args(args)
        overrides = load_properties(args.admin_config) if args.admin_config else {}
        admin = AdminClient(client_config(args.bootstrap_server, overrides=overrides))
        ensure_reachable(admin, args.bootstrap_server, args.timeout / 1000)
        # no timeout keywords: confluent-kafka 2.16's elect_leaders fails on any of them (SystemError);
        # the wait is bounded by result(timeout=...) instead
        future = admin.elect_leaders(ElectionType[args.election_type], partitions)
        results = future.result(timeout=args.timeout / 1000)
    except (ToolError, KafkaException, ValueError) as exc:
        print(f"Error while making request: {error_text(exc)}", file=sys.stderr)
        return 1
    succeeded, noop, failed = [], [], []
    for tp, error in sorted(results.items(), key=lambda item: (item[0].topic, item[0].partition)):
        name = f"{tp.topic}-{tp.partition}"
        code = error.args[0] if isinstance(error, KafkaException) and error.args else error
        if code is None or (isinstance(code, KafkaError) and code.code() == KafkaError.NO_ERROR):
            succeeded.append(name)
        elif isinstance(code, KafkaError) and code.code() == KafkaError.ELECTION_NOT_NEEDED:
            noop.append(name)
        else:
            failed.append((name, code))
    if succeeded:
        print(f"Successfully completed leader election ({args.election_type}) for partitions {', '.join(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, code in failed:
        text = f"{code.name()}: {code.str()}" if isinstance(code, KafkaError) else str(code)
        print(f"Error completing leader election ({args.election_type}) for partition: {name}: {text}")
    if failed:
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0
