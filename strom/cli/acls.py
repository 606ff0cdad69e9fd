"""``strom acls``: add, list and remove ACLs, like Kafka's kafka-acls.sh.

    strom acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:alice --operation Read \\
        --topic orders --group billing
    strom acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:alice --producer --topic orders
    strom acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:bob --consumer --topic orders \\
        --group billing
    strom acls --bootstrap-server 127.0.0.1:9092 --list --topic orders
    strom acls --bootstrap-server 127.0.0.1:9092 --remove --allow-principal User:alice --operation Read \\
        --topic orders --force

As kafka-acls.sh: --operation defaults to All, a principal without --allow-host/--deny-host gets host
``*``, --producer means Write, Describe and Create on the topics (Write and Describe on a
--transactional-id, IdempotentWrite on the cluster with --idempotent), --consumer Read and Describe
on the topics and Read on the groups. --list and --remove accept --resource-pattern-type any or
match; --remove asks before it deletes unless --force. The output is kafka-acls.sh's.
"""

from __future__ import annotations

import argparse
import sys

from strom.cli.acl_args import ERROR_PREFIX, _block, _confirm, _pattern_type, _principal, entries, parse_operation
from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    add_timeout_argument,
    client_config,
    command_properties,
    ensure_reachable,
    error_text,
    exits_quietly_on_broken_pipe,
)
from strom.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)

# kafka-acls.sh's table of the operations each resource type accepts
VALID_OPERATIONS = {
    ResourceType.TOPIC: {
        Operation.READ,
        Operation.WRITE,
        Operation.CREATE,
        Operation.DESCRIBE,
        Operation.DELETE,
        Operation.ALTER,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.ALL,
    },
    ResourceType.GROUP: {Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.ALL},
    ResourceType.CLUSTER: {
        Operation.CREATE,
        Operation.CLUSTER_ACTION,
        Operation.DESCRIBE_CONFIGS,
        Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE,
        Operation.ALTER,
        Operation.DESCRIBE,
        Operation.ALL,
    },
    ResourceType.TRANSACTIONAL_ID: {Operation.DESCRIBE, Operation.WRITE, Operation.ALL},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--add", action="store_true", help="add ACLs")
    actions.add_argument("--remove", action="store_true", help="remove ACLs")
    actions.add_argument("--list", action="store_true", help="list ACLs (of the given resources, else all)")
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    add_command_config_argument(parser, "admin client properties file")
    parser.add_argument("--topic", action="append", default=[], help="topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="consumer group (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--transactional-id", action="append", default=[], help="transactional id (repeatable)")
    parser.add_argument(
        "--delegation-token", action="append", default=[], metavar="ID", help="delegation token id (repeatable)"
    )
    parser.add_argument(
        "--user-principal",
        action="append",
        default=[],
        metavar="User:name",
        help="the User resource of CreateTokens/DescribeTokens (repeatable)",
    )
    parser.add_argument(
        "--resource-pattern-type",
        default="literal",
        type=str.lower,
        choices=["literal", "prefixed", "match", "any"],
        help="literal or prefixed (--add); also match or any (--list, --remove)",
    )
    parser.add_argument("--allow-principal", action="append", default=[], metavar="Type:name")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="Type:name")
    parser.add_argument(
        "--principal", action="append", default=[], metavar="Type:name", help="--list: only the ACLs of this principal"
    )
    parser.add_argument("--allow-host", action="append", default=[], help="host (default * with --allow-principal)")
    parser.add_argument("--deny-host", action="append", default=[], help="host (default * with --deny-principal)")
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite or All (default All; repeatable)",
    )
    parser.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    parser.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (with --group)")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument("--force", action="store_true", help="remove without asking")
    add_timeout_argument(parser)


def resources(args: argparse.Namespace, pattern_type: PatternType) -> list[ResourcePattern]:
    found = [ResourcePattern(ResourceType.TOPIC, t, pattern_type) for t in args.topic]
    found += [ResourcePattern(ResourceType.GROUP, g, pattern_type) for g in args.group]
    found += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    return found


def wanted_acls(args: argparse.Namespace, pattern_type: PatternType) -> dict[ResourcePattern, set[AccessControlEntry]]:
    """Each resource and the entries to add or remove on it (the --producer/--consumer shortcuts expanded)."""
    if args.producer or args.consumer:
        if args.operation:
            raise ToolError("--operation cannot be used with --producer or --consumer")
        if args.consumer and not args.group:
            raise ToolError("With --consumer you must specify a --group")
        if not args.topic:
            raise ToolError("With --producer or --consumer you must specify a --topic")
        out: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for resource in resources(args, pattern_type):
            ops: set[Operation] = set()
            if args.producer:
                ops |= {
                    ResourceType.TOPIC: {Operation.WRITE, Operation.DESCRIBE, Operation.CREATE},
                    ResourceType.TRANSACTIONAL_ID: {Operation.WRITE, Operation.DESCRIBE},
                    ResourceType.CLUSTER: {Operation.IDEMPOTENT_WRITE},
                }.get(resource.resource_type, set())
            if args.consumer:
                ops |= {
                    ResourceType.TOPIC: {Operation.READ, Operation.DESCRIBE},
                    ResourceType.GROUP: {Operation.READ},
                }.get(resource.resource_type, set())
            if ops:
                out[resource] = entries(args, ops)
        return out
    operations = {parse_operation(op) for op in args.operation} or {Operation.ALL}
    out = {}
    for resource in resources(args, pattern_type):
        invalid = operations - VALID_OPERATIONS[resource.resource_type]
        if invalid:
            names = ", ".join(sorted(o.name for o in invalid))
            raise ToolError(
                f"ResourceType {resource.resource_type.name} only supports operations "
                f"{', '.join(sorted(o.name for o in VALID_OPERATIONS[resource.resource_type]))} "
                f"(not {names})"
            )
        out[resource] = entries(args, operations)
    return out


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    if args.delegation_token or args.user_principal:  # resource types librdkafka lacks
        from strom.cli.token_acls import run as run_token_acls

        return run_token_acls(args)
    timeout = args.timeout / 1000
    try:
        overrides = command_properties(args.command_config)
        admin = AdminClient(client_config(args.bootstrap_server, overrides=overrides))
        ensure_reachable(admin, args.bootstrap_server, timeout)
        if args.add:
            add(admin, args, timeout)
        elif args.remove:
            remove(admin, args, timeout)
        else:
            list_acls(admin, args, timeout)
        return 0
    except (ToolError, KafkaException, ValueError) as exc:
        print(ERROR_PREFIX + error_text(exc), file=sys.stderr)
        return 1


def _binding(pattern: ResourcePattern, entry: AccessControlEntry):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as ClientResourceType

    return AclBinding(
        ClientResourceType(int(pattern.resource_type)),
        pattern.name,
        ResourcePatternType(int(pattern.pattern_type)),
        entry.principal,
        entry.host,
        AclOperation(int(entry.operation)),
        AclPermissionType(int(entry.permission)),
    )


def _filter(
    resource_type: ResourceType,
    name: str | None,
    pattern_type: PatternType,
    entry: AccessControlEntry | None = None,
    principal: str | None = None,
):
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as ClientResourceType

    # None matches anything in a filter (confluent-kafka's annotations say str)
    return AclBindingFilter(
        ClientResourceType(int(resource_type)),
        name,  # type: ignore[arg-type]
        ResourcePatternType(int(pattern_type)),
        entry.principal if entry else principal,  # type: ignore[arg-type]
        entry.host if entry else None,  # type: ignore[arg-type]
        AclOperation(int(entry.operation)) if entry else AclOperation.ANY,
        AclPermissionType(int(entry.permission)) if entry else AclPermissionType.ANY,
    )


def _from_client(binding) -> tuple[ResourcePattern, AccessControlEntry]:
    return (
        ResourcePattern(
            ResourceType(int(binding.restype.value)),
            binding.name,
            PatternType(int(binding.resource_pattern_type.value)),
        ),
        AccessControlEntry(
            binding.principal,
            binding.host,
            Operation(int(binding.operation.value)),
            Permission(int(binding.permission_type.value)),
        ),
    )


def add(admin, args: argparse.Namespace, timeout: float) -> None:
    pattern_type = _pattern_type(args)
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ToolError(
            f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid when adding acls."
        )
    wanted = wanted_acls(args, pattern_type)
    if not wanted:
        raise ToolError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    if not any(wanted.values()):
        raise ToolError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    bindings = []
    for pattern, acls in wanted.items():
        print(_block(f"Adding ACLs for resource `{pattern}`", sorted(acls, key=str)))
        bindings += [_binding(pattern, entry) for entry in sorted(acls)]
    for future in admin.create_acls(bindings, request_timeout=timeout).values():
        future.result(timeout=timeout)
    _print_current(admin, list(wanted), timeout)


def list_acls(admin, args: argparse.Namespace, timeout: float) -> None:
    pattern_type = _pattern_type(args)
    patterns = resources(args, pattern_type)
    principals: list[str | None] = [_principal(p) for p in args.principal] or [None]
    filters = [
        _filter(p.resource_type, p.name, pattern_type, principal=principal)
        for p in patterns
        for principal in principals
    ] or [_filter(ResourceType.ANY, None, PatternType.ANY, principal=principal) for principal in principals]
    found: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for acl_filter in filters:
        for binding in admin.describe_acls(acl_filter, request_timeout=timeout).result(timeout=timeout):
            pattern, entry = _from_client(binding)
            found.setdefault(pattern, set()).add(entry)
    if args.principal:
        for principal in args.principal:
            mine = {p: {e for e in es if e.principal == principal} for p, es in found.items()}
            print(f"ACLs for principal `{principal}`")
            for pattern, acls in sorted(mine.items()):
                if acls:
                    print(_block(f"Current ACLs for resource `{pattern}`", sorted(acls, key=str)))
        return
    for pattern, acls in sorted(found.items()):
        print(_block(f"Current ACLs for resource `{pattern}`", sorted(acls, key=str)))


def _print_current(admin, patterns: list[ResourcePattern], timeout: float) -> None:
    for pattern in patterns:
        future = admin.describe_acls(
            _filter(pattern.resource_type, pattern.name, pattern.pattern_type), request_timeout=timeout
        )
        acls = {_from_client(b)[1] for b in future.result(timeout=timeout)}
        print(_block(f"Current ACLs for resource `{pattern}`", sorted(acls, key=str)))


def remove(admin, args: argparse.Namespace, timeout: float) -> None:
    pattern_type = _pattern_type(args)
    if args.producer or args.consumer or args.allow_principal or args.deny_principal:
        wanted = wanted_acls(args, pattern_type)
    else:
        wanted = {p: set() for p in resources(args, pattern_type)}
    if not wanted:
        raise ToolError("You must specify one of: --topic, --cluster, --group, --transactional-id")
    for pattern, acls in wanted.items():
        shown = (
            f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
            f"patternType={pattern.pattern_type.name})"
        )
        if not acls:
            if _confirm(args, f"Are you sure you want to delete all ACLs for resource filter `{shown}`? (y/n)"):
                filters = [_filter(pattern.resource_type, pattern.name, pattern_type)]
            else:
                continue
        else:
            question = (
                _block("Are you sure you want to remove ACLs", sorted(acls, key=str)).rstrip("\n")
                + f" from resource filter `{shown}`? (y/n)"
            )
            if not _confirm(args, question):
                continue
            filters = [_filter(pattern.resource_type, pattern.name, pattern_type, entry) for entry in sorted(acls)]
        for future in admin.delete_acls(filters, request_timeout=timeout).values():
            future.result(timeout=timeout)
