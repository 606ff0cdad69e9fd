"""``strom features``: describe, upgrade, downgrade and disable feature levels, like kafka-features.sh.

    strom features --bootstrap-server H:P describe
    strom features --bootstrap-server H:P upgrade --feature transaction.version=2 [--dry-run]
    strom features --bootstrap-server H:P downgrade --feature transaction.version=1 [--unsafe] [--dry-run]
    strom features --bootstrap-server H:P disable --feature transaction.version [--unsafe] [--dry-run]

describe reads ApiVersions (what this broker supports, what the cluster finalized, and the epoch);
the others send UpdateFeatures. librdkafka has no feature API, so the tool speaks to the broker
over strom's own client connection (TLS and SASL from --command-config). Output and exit codes
are kafka-features.sh's: a line per feature, then "N out of M operation(s) failed." and exit 1
when any was refused.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    add_timeout_argument,
    bootstrap_broker_client,
    command_properties,
)
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode

API_VERSIONS_VERSION = 4
UPDATE_FEATURES_VERSION = 2
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker to connect to"
    )
    add_command_config_argument(parser, "admin client properties file")
    add_timeout_argument(parser)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("describe", help="the supported and finalized level of every feature")
    for name, text in (
        ("upgrade", "raise features to the given levels"),
        ("downgrade", "lower features to the given levels"),
        ("disable", "set features to level 0"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "--feature",
            action="append",
            required=True,
            metavar="NAME" if name == "disable" else "NAME=LEVEL",
            help="a feature" + ("" if name == "disable" else " and its new level") + " (repeatable)",
        )
        if name != "upgrade":
            action.add_argument("--unsafe", action="store_true", help="allow a downgrade that may lose metadata")
        action.add_argument("--dry-run", action="store_true", help="validate only, change nothing")


def _updates(args: argparse.Namespace) -> list[tuple[str, int]]:
    out = []
    for item in args.feature:
        if args.action == "disable":
            out.append((item, 0))
            continue
        name, sep, level = item.partition("=")
        if not sep or not name or not level.strip().lstrip("-").isdigit():
            raise ToolError(f"Can't parse feature={item!r}: expected NAME=LEVEL, such as transaction.version=2")
        out.append((name.strip(), int(level)))
    return out


async def _describe(request) -> None:
    response = await request(ApiKey.API_VERSIONS, API_VERSIONS_VERSION, {})
    if response.error_code:
        raise ToolError(f"ApiVersions failed: {ErrorCode(int(response.error_code)).name}")
    finalized = {f.name: int(f.max_version_level) for f in response.finalized_features}
    epoch = int(response.finalized_features_epoch)
    for feature in sorted(response.supported_features, key=lambda f: f.name):
        print(
            f"Feature: {feature.name}\tSupportedMinVersion: {feature.min_version}\t"
            f"SupportedMaxVersion: {feature.max_version}\tFinalizedVersionLevel: {finalized.get(feature.name, 0)}\t"
            f"Epoch: {epoch if epoch >= 0 else '-'}"
        )


async def _update(args: argparse.Namespace, request) -> int:
    updates = _updates(args)
    if args.action == "upgrade":
        upgrade_type = UPGRADE
    else:
        upgrade_type = UNSAFE_DOWNGRADE if args.unsafe else SAFE_DOWNGRADE
    failed = 0
    # one request per feature, as kafka-features.sh reports each on its own line
    for name, level in updates:
        response = await request(
            ApiKey.UPDATE_FEATURES,
            UPDATE_FEATURES_VERSION,
            {
                "timeout": args.timeout,
                "feature_updates": [{"feature": name, "max_version_level": level, "upgrade_type": upgrade_type}],
                "validate_only": args.dry_run,
            },
        )
        verb = {"upgrade": "upgraded", "downgrade": "downgraded", "disable": "disabled"}[args.action]
        target = "" if args.action == "disable" else f" to {level}"
        if response.error_code:
            failed += 1
            print(f"Could not {args.action} {name}{target}. {response.error_message or ''}".rstrip())
        elif args.dry_run:
            print(f"{name} can be {verb}{target}.")
        else:
            print(f"{name} was {verb}{target}.")
    if failed:
        print(f"{failed} out of {len(updates)} operation(s) failed.")
        return 1
    return 0


async def _run(args: argparse.Namespace, props: dict[str, str]) -> int:
    from strom.replication.client import BrokerConnectionError

    timeout_s = args.timeout / 1000
    client = bootstrap_broker_client(args.bootstrap_server, timeout_s, props, "strom-features")

    async def request(api_key: ApiKey, version: int, values: dict[str, Any]) -> Any:
        try:
            return await client.request(api_key, version, values, timeout_s)
        except BrokerConnectionError as exc:
            raise ToolError(str(exc)) from None

    try:
        if args.action == "describe":
            await _describe(request)
            return 0
        return await _update(args, request)
    finally:
        client.close()


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args, command_properties(args.command_config)))
    except (ToolError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
