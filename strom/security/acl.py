"""Kafka's ACL model: resource patterns, entries, bindings and the filters that select them.

The numeric codes are Kafka's wire codes (CreateAcls/DescribeAcls/DeleteAcls); the names are
the ones Kafka writes in ZooKeeper. An ACL lives in the znode of its resource pattern::

    /kafka-acl/<ResourceType>/<name>                     (LITERAL, including the "*" wildcard)
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   (PREFIXED)
    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}

Every change also writes a sequential notification naming the pattern (see ``change_node``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from urllib.parse import quote, unquote

WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
# Kafka's change notifications: a sequential node per changed pattern, which brokers watch instead
# of every ACL znode, and purge once older than CHANGE_EXPIRATION_MS (as ZkNodeChangeNotificationListener)
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


# the names Kafka writes in znode paths and JSON (its Java enums in camel case)
RESOURCE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
RESOURCE_BY_NAME = {name.lower(): rtype for rtype, name in RESOURCE_NAMES.items()}
OPERATION_NAMES = {
    Operation.ALL: "All",
    Operation.READ: "Read",
    Operation.WRITE: "Write",
    Operation.CREATE: "Create",
    Operation.DELETE: "Delete",
    Operation.ALTER: "Alter",
    Operation.DESCRIBE: "Describe",
    Operation.CLUSTER_ACTION: "ClusterAction",
    Operation.DESCRIBE_CONFIGS: "DescribeConfigs",
    Operation.ALTER_CONFIGS: "AlterConfigs",
    Operation.IDEMPOTENT_WRITE: "IdempotentWrite",
    Operation.CREATE_TOKENS: "CreateTokens",
    Operation.DESCRIBE_TOKENS: "DescribeTokens",
}
OPERATION_BY_NAME = {name.lower(): op for op, name in OPERATION_NAMES.items()}
PERMISSION_NAMES = {Permission.ALLOW: "Allow", Permission.DENY: "Deny"}
PERMISSION_BY_NAME = {name.lower(): p for p, name in PERMISSION_NAMES.items()}

# An ALLOW of one of these operations also allows the key (Kafka's AclAuthorizer): a principal that
# may read or write a topic may see it, one that may alter configs may read them.
IMPLIED_BY = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}


class AclError(ValueError):
    """An ACL or filter that cannot be stored or matched (INVALID_REQUEST on the wire)."""


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def path(self) -> str:
        root = PREFIXED_ROOT if self.pattern_type == PatternType.PREFIXED else LITERAL_ROOT
        return f"{root}/{RESOURCE_NAMES[self.resource_type]}/{quote(self.name, safe='')}"

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def to_json(self) -> dict:
        return {
            "principal": self.principal,
            "permissionType": PERMISSION_NAMES[self.permission],
            "operation": OPERATION_NAMES[self.operation],
            "host": self.host,
        }

    @classmethod
    def from_json(cls, value: dict) -> AccessControlEntry:
        return cls(
            str(value["principal"]),
            str(value.get("host", WILDCARD)),
            OPERATION_BY_NAME[str(value["operation"]).lower()],
            PERMISSION_BY_NAME[str(value["permissionType"]).lower()],
        )

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission.name})"
        )


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def encode_acls(entries: set[AccessControlEntry] | list[AccessControlEntry]) -> bytes:
    return json.dumps({"version": 1, "acls": [e.to_json() for e in sorted(entries)]}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> set[AccessControlEntry]:
    value = json.loads(data) if data else {}
    return {AccessControlEntry.from_json(item) for item in (value.get("acls") or [])}


def change_node(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(path prefix, data) of the notification Kafka writes for a change to ``pattern``'s ACLs:
    ``TOPIC:orders`` (its ResourceType's Java name) under /kafka-acl-changes for LITERAL, and
    ``{"version":1,"resourceType":"GROUP","name":"billing-","patternType":"PREFIXED"}`` under
    /kafka-acl-extended-changes for the others."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(event, separators=(",", ":")).encode()


def _resource_type(name: str) -> ResourceType:
    """Kafka's ResourceType.fromString (Java names, any case), and the camel-case znode names too."""
    try:
        return ResourceType[name.upper()]
    except KeyError:
        return RESOURCE_BY_NAME[name.lower()]


def pattern_from_change(root: str, data: bytes) -> ResourcePattern:
    """The pattern a change notification names; raises ValueError/KeyError for one it cannot read."""
    if root == LITERAL_CHANGES:
        type_name, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {data!r}")
        return ResourcePattern(_resource_type(type_name), name, PatternType.LITERAL)
    event = json.loads(data)
    if int(event.get("version", 1)) > 1:
        raise ValueError(f"ACL change event of unsupported version {event['version']}")
    return ResourcePattern(
        _resource_type(str(event["resourceType"])), str(event["name"]), PatternType[str(event["patternType"]).upper()]
    )


def pattern_from_path(root: str, type_name: str, node: str) -> ResourcePattern | None:
    rtype = RESOURCE_BY_NAME.get(type_name.lower())
    if rtype is None:
        return None
    kind = PatternType.PREFIXED if root == PREFIXED_ROOT else PatternType.LITERAL
    return ResourcePattern(rtype, unquote(node), kind)


def validate_binding(binding: AclBinding) -> None:
    """What CreateAcls refuses, with Kafka's messages."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in RESOURCE_NAMES:
        raise AclError(f"Invalid resource type {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid pattern type {pattern.pattern_type.name}")
    if entry.operation not in OPERATION_NAMES:
        raise AclError(f"Invalid operation {entry.operation.name}")
    if entry.permission not in PERMISSION_NAMES:
        raise AclError(f"Invalid permission type {entry.permission.name}")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise AclError("Invalid empty resource name")
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"Invalid principal {entry.principal!r}: expected PrincipalType:name")
    if not entry.host:
        raise AclError("Invalid empty host")


@dataclass(frozen=True)
class AclFilter:
    """Kafka's AclBindingFilter: None names match anything; ANY and MATCH as Kafka matches them."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def validate(self) -> None:
        if (
            self.resource_type == ResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
            or self.operation == Operation.UNKNOWN
            or self.permission == Permission.UNKNOWN
        ):
            raise AclError("Filter contains UNKNOWN elements")

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation == Operation.ANY or self.operation == entry.operation)
            and (self.permission == Permission.ANY or self.permission == entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def _coerce(enum: type[IntEnum], value: int):
    try:
        return enum(value)
    except ValueError:
        return enum(0)  # UNKNOWN: refused by validation with a message rather than a crash


def binding_from_wire(
    resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int, permission: int
) -> AclBinding:
    return AclBinding(
        ResourcePattern(_coerce(ResourceType, resource_type), name, _coerce(PatternType, pattern_type)),
        AccessControlEntry(principal, host, _coerce(Operation, operation), _coerce(Permission, permission)),
    )


def filter_from_wire(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> AclFilter:
    return AclFilter(
        _coerce(ResourceType, resource_type),
        name,
        _coerce(PatternType, pattern_type),
        principal,
        host,
        _coerce(Operation, operation),
        _coerce(Permission, permission),
    )
