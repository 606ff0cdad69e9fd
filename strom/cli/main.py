"""``strom``: one command with subcommands in the spirit of Kafka's bin/ scripts.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args)``.
Modules keep heavy imports (the broker, the client library) inside ``run`` so that building the
parser stays cheap and ``strom server-start`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from strom import version_line

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "server-start": ("strom.cli.server_start", "run a broker in the foreground"),
    "dump-log": ("strom.cli.dump_log", "print the batches and records of segment and index files"),
    "ingest": ("strom.cli.ingest", "tail log files into a topic (survives rotation and restarts)"),
    "gen-access-log": ("strom.cli.gen_access_log", "write realistic nginx access-log lines"),
    "demo": ("strom.cli.demo", "access logs -> strom -> Spark, with a live terminal table"),
    "consumer-groups": ("strom.cli.consumer_groups", "list, describe, delete consumer groups; reset their offsets"),
    "topics": ("strom.cli.topics", "create, list, describe, alter and delete topics"),
    "console-producer": ("strom.cli.console_producer", "send lines from stdin as messages"),
    "console-consumer": ("strom.cli.console_consumer", "print messages of a topic to stdout"),
    "configs": ("strom.cli.configs", "describe and alter topic and broker configs"),
    "acls": ("strom.cli.acls", "add, list and remove ACLs (kafka-acls.sh)"),
    "features": (
        "strom.cli.features",
        "describe, upgrade and downgrade the cluster's feature levels (kafka-features.sh)",
    ),
    "delegation-tokens": (
        "strom.cli.delegation_tokens",
        "create, renew, expire and describe delegation tokens (kafka-delegation-tokens.sh)",
    ),
    "producer-perf-test": ("strom.cli.producer_perf_test", "measure producer throughput and latency"),
    "consumer-perf-test": ("strom.cli.consumer_perf_test", "measure consumer throughput"),
    "cluster": ("strom.cli.cluster", "start, stop and inspect a multi-broker cluster on this machine"),
    "leader-election": ("strom.cli.leader_election", "elect preferred or unclean leaders for partitions"),
    "transactions": ("strom.cli.transactions", "list and describe transactions and producers; abort hanging ones"),
    "console": ("strom.cli.web_console", "a web console for the cluster: topics, messages, groups, lag"),
    "reassign-partitions": ("strom.cli.reassign_partitions", "move partition replicas between brokers (KIP-455)"),
    "docs": ("strom.cli.docs", "build this documentation site and serve it on 127.0.0.1"),
    "iceberg": ("strom.cli.iceberg", "list the Iceberg tables of topics and their translation lag"),
    "schemas": ("strom.cli.schemas", "list, get, register, check and delete schemas; compatibility and mode"),
}


def add_version(parser: argparse.ArgumentParser, version: str) -> None:
    """``--version`` on ``parser`` and on every subcommand below it, as every Kafka script has."""
    parser.add_argument("--version", action="version", version=version, help="print the versions and exit")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_version(sub, version)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand's module is imported (fast startup)."""
    parser = argparse.ArgumentParser(prog="strom", description="strom: a Kafka-compatible log")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if only is not None and name != only:
            sub.add_parser(name, help=help_text)
            continue
        module = importlib.import_module(module_name)
        command_parser = sub.add_parser(
            name, help=help_text, description=module.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        module.add_arguments(command_parser)
        command_parser.set_defaults(_module=module)
    add_version(parser, version_line())
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
