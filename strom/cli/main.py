"""``strom``: one command with subcommands in the spirit of Kafka's bin/ scripts.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args)``.
Modules keep heavy imports (the broker, the client library) inside ``run`` so that building the
parser stays cheap and ``strom server-start`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "server-start": ("strom.cli.server_start", "run a broker in the foreground"),
    "dump-log": ("strom.cli.dump_log", "print the batches and records of segment and index files"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strom", description="strom: a Kafka-compatible log")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        command_parser = sub.add_parser(name, help=help_text, description=module.__doc__,
                                        formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(command_parser)
        command_parser.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
