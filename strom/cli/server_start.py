"""``strom server-start [server.properties] [--override key=value ...]``: run one broker in the foreground.

With no properties file it runs the embedded single-node default: 127.0.0.1:9092, data in
./strom-data. The bound port is printed and written to ``<first log dir>/strom.port`` (useful
with ``listeners=PLAINTEXT://127.0.0.1:0``). SIGTERM or Ctrl-C shuts down cleanly.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("properties", nargs="?", help="a Kafka-style server.properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config key, overriding the file (repeatable)",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text lines, or one JSON object per line for log collectors (default text)",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        metavar="PID",
        help="shut down (as on SIGTERM) once process PID is no longer this broker's parent: "
        "for tools that start a broker as their child (strom.server.parent_watch)",
    )


def parse_overrides(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"strom server-start: --override expects KEY=VALUE, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def run(args: argparse.Namespace) -> int:
    # kio registers test-data hooks when the hypothesis library is importable, which costs a
    # broker a few hundred milliseconds of startup in environments that have it installed.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from strom.cluster.store import StoreError
    from strom.server import logs
    from strom.server.broker import run_broker
    from strom.server.config import BrokerConfig
    from strom.startup import StartupError
    from strom.storage.log_config import ConfigError
    from strom.storage.log_dir_error import LogDirError

    logs.configure(args.log_level, args.log_format)
    try:
        config = BrokerConfig.from_properties(args.properties, parse_overrides(args.override))
    except ConfigError as exc:
        return refuse("invalid configuration", exc, 2)
    except OSError as exc:
        print(f"strom server-start: cannot read {args.properties}: {exc}", file=sys.stderr)
        return 2
    try:
        return run_broker(config, parent_pid=args.parent_pid)
    except ConfigError as exc:  # found at startup: a certificate or key file named by the config
        return refuse("invalid configuration", exc, 2)
    # StartupError names its key; a LogDirError (damage recovery cannot repair, a log dir another
    # broker holds) its log dir; a StoreError the ZooKeeper keys (no session within the timeout)
    except (StartupError, LogDirError, StoreError) as exc:
        return refuse("cannot start", exc, 1)


def refuse(what: str, exc: Exception, code: int) -> int:
    """The one line on stderr (logs go to stdout); the traceback only in the DEBUG log."""
    import logging

    logging.getLogger("strom.broker").debug("startup failed", exc_info=exc)
    print(f"strom server-start: {what}: {exc}", file=sys.stderr)
    return code
