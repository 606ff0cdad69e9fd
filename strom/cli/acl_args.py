"""The parts of kafka-acls.sh that ``strom acls`` (strom.cli.acls) and its two token resource types
(strom.cli.token_acls) share: parsing operations and principals, the entries of --allow-principal
and --deny-principal, the resource pattern type, the output blocks and the question of --remove."""

from __future__ import annotations

import argparse
import sys

from strom.cli.client_props import ToolError
from strom.security.acl import OPERATION_BY_NAME, WILDCARD, AccessControlEntry, Operation, PatternType, Permission

ERROR_PREFIX = "Error while executing ACL command: "


def parse_operation(text: str) -> Operation:
    key = text.replace("_", "").replace("-", "").lower()
    operation = OPERATION_BY_NAME.get(key)
    if operation is None:
        raise ToolError(f"Invalid operation {text!r}: one of {', '.join(sorted(OPERATION_BY_NAME))}")
    return operation


def _principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        raise ToolError(f"Invalid principal {text!r}: expected PrincipalType:name, such as User:alice")
    return text


def entries(args: argparse.Namespace, operations: set[Operation]) -> set[AccessControlEntry]:
    out = set()
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, Permission.ALLOW),
        (args.deny_principal, args.deny_host, Permission.DENY),
    ):
        for principal in principals:
            for host in hosts or [WILDCARD]:
                for operation in operations:
                    out.add(AccessControlEntry(_principal(principal), host, operation, permission))
    return out


def _pattern_type(args: argparse.Namespace) -> PatternType:
    return PatternType[args.resource_pattern_type.upper()]


def _block(title: str, items) -> str:
    """kafka-acls.sh's block: ``title: \\n \\t(entry)\\n\\t(entry) \\n`` then a blank line."""
    return f"{title}: \n " + "\n".join(f"\t{item}" for item in items) + " \n"


def _confirm(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")
