"""``strom acls --delegation-token ID`` and ``--user-principal User:x``: kafka-acls.sh's two token resources.

    strom acls --bootstrap-server H:P --add --allow-principal User:dave --operation Describe --delegation-token ID
    strom acls --bootstrap-server H:P --add --allow-principal User:alice --operation CreateTokens \\
        --user-principal User:carol
    strom acls --bootstrap-server H:P --list --delegation-token ID
    strom acls --bootstrap-server H:P --remove --user-principal User:carol --force

librdkafka's admin API has no DelegationToken or User resource types, so these commands send
CreateAcls, DescribeAcls and DeleteAcls over strom's own client connection (TLS and SASL from
--command-config). The options, checks and output are strom.cli.acls's (kafka-acls.sh's).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from strom.cli.acl_args import ERROR_PREFIX, _block, _confirm, _pattern_type, entries, parse_operation
from strom.cli.client_props import ToolError, client_security, command_properties
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.security.acl import (
    AccessControlEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

VERSION = 3
# kafka-acls.sh's table for the two resource types
VALID_OPERATIONS = {
    ResourceType.DELEGATION_TOKEN: {Operation.DESCRIBE, Operation.ALL},
    ResourceType.USER: {Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS, Operation.ALL},
}


def wanted(args: argparse.Namespace) -> list[ResourcePattern]:
    if args.topic or args.group or args.transactional_id or args.cluster or args.producer or args.consumer:
        raise ToolError(
            "--delegation-token and --user-principal cannot be combined with other resources or "
            "--producer/--consumer in one command"
        )
    pattern_type = _pattern_type(args)
    found = [ResourcePattern(ResourceType.DELEGATION_TOKEN, t, pattern_type) for t in args.delegation_token]
    return found + [ResourcePattern(ResourceType.USER, u, pattern_type) for u in args.user_principal]


class _Client:
    def __init__(self, args: argparse.Namespace):
        from strom.replication.client import BrokerClient

        props = command_properties(args.command_config)
        host, _, port = args.bootstrap_server.split(",")[0].strip().rpartition(":")
        if not host or not port.isdigit():
            raise ToolError(f"Invalid bootstrap server {args.bootstrap_server!r}: expected HOST:PORT")
        self.timeout_s = args.timeout / 1000
        self.client = BrokerClient(
            host.strip("[]"), int(port), props.get("client.id", "strom-acls"), self.timeout_s, client_security(props)
        )

    async def request(self, api_key: ApiKey, values: dict[str, Any]) -> Any:
        from strom.replication.client import BrokerConnectionError

        try:
            return await self.client.request(api_key, VERSION, values, self.timeout_s)
        except BrokerConnectionError as exc:
            raise ToolError(str(exc)) from None

    async def describe(self, pattern: ResourcePattern, pattern_type: PatternType) -> set[AccessControlEntry]:
        response = await self.request(ApiKey.DESCRIBE_ACLS, _filter(pattern, pattern_type))
        _check(response.error_code, response.error_message)
        return {
            AccessControlEntry(acl.principal, acl.host, Operation(acl.operation), Permission(acl.permission_type))
            for resource in response.resources
            for acl in resource.acls
        }


def _check(code: Any, message: str | None) -> None:
    if int(code) != ErrorCode.NONE:
        raise ToolError(message or ErrorCode(int(code)).name)


def _filter(pattern: ResourcePattern, pattern_type: PatternType, entry: AccessControlEntry | None = None) -> dict:
    return {
        "resource_type_filter": int(pattern.resource_type),
        "resource_name_filter": pattern.name,
        "pattern_type_filter": int(pattern_type),
        "principal_filter": entry.principal if entry else None,
        "host_filter": entry.host if entry else None,
        "operation": int(entry.operation) if entry else int(Operation.ANY),
        "permission_type": int(entry.permission) if entry else int(Permission.ANY),
    }


async def _run(args: argparse.Namespace) -> None:
    patterns = wanted(args)
    pattern_type = _pattern_type(args)
    client = _Client(args)
    try:
        if args.add:
            await _add(client, args, patterns, pattern_type)
        elif args.remove:
            await _remove(client, args, patterns, pattern_type)
        else:
            for pattern in patterns:
                acls = await client.describe(pattern, pattern_type)
                if args.principal:
                    acls = {a for a in acls if a.principal in args.principal}
                print(_block(f"Current ACLs for resource `{pattern}`", sorted(acls, key=str)))
    finally:
        client.client.close()


def _operations(args: argparse.Namespace, pattern: ResourcePattern) -> set[Operation]:
    operations = {parse_operation(op) for op in args.operation} or {Operation.ALL}
    valid = VALID_OPERATIONS[pattern.resource_type]
    if operations - valid:
        raise ToolError(
            f"ResourceType {pattern.resource_type.name} only supports operations "
            f"{', '.join(sorted(o.name for o in valid))} (not {', '.join(sorted(o.name for o in operations - valid))})"
        )
    return operations


async def _add(client: _Client, args: argparse.Namespace, patterns, pattern_type: PatternType) -> None:
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ToolError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid when adding acls."
        )
    for pattern in patterns:
        acls = entries(args, _operations(args, pattern))
        if not acls:
            raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        print(_block(f"Adding ACLs for resource `{pattern}`", sorted(acls, key=str)))
        creations = [
            {
                "resource_type": int(pattern.resource_type),
                "resource_name": pattern.name,
                "resource_pattern_type": int(pattern_type),
                "principal": entry.principal,
                "host": entry.host,
                "operation": int(entry.operation),
                "permission_type": int(entry.permission),
            }
            for entry in sorted(acls)
        ]
        response = await client.request(ApiKey.CREATE_ACLS, {"creations": creations})
        for result in response.results:
            _check(result.error_code, result.error_message)
        current = await client.describe(pattern, pattern_type)
        print(_block(f"Current ACLs for resource `{pattern}`", sorted(current, key=str)))


async def _remove(client: _Client, args: argparse.Namespace, patterns, pattern_type: PatternType) -> None:
    for pattern in patterns:
        acls = entries(args, _operations(args, pattern)) if args.allow_principal or args.deny_principal else set()
        if not _confirm(args, f"Are you sure you want to remove ACLs from resource filter `{pattern}`? (y/n)"):
            continue
        filters = [_filter(pattern, pattern_type, entry) for entry in sorted(acls)] or [_filter(pattern, pattern_type)]
        response = await client.request(ApiKey.DELETE_ACLS, {"filters": filters})
        for result in response.filter_results:
            _check(result.error_code, result.error_message)


def run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(_run(args))
        return 0
    except (ToolError, ValueError) as exc:
        print(ERROR_PREFIX + str(exc), file=sys.stderr)
        return 1
