"""AlterClientQuotas: set or remove producer_byte_rate, consumer_byte_rate and request_percentage,
and an address's connection_creation_rate (KIP-612).

Each entry names an entity (``user``, ``client-id`` or both, or ``ip`` alone; a null name is the
<default>) and its operations; an entry with any invalid part is refused whole with INVALID_REQUEST and a
message, the others still apply. Written to the entity's znode with the node's other keys kept;
every broker's watch picks the change up.
"""

from __future__ import annotations

import ipaddress
import math

from strom.cluster.store import StoreError
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed
from strom.server.quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    DEFAULT,
    IP,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
    Entity,
)

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1


def _ip_entity(entry) -> str | None:
    """The address (or DEFAULT) of an ``ip`` entity, or None when the entry names no ip."""
    ips = [part for part in entry.entity if part.entity_type == IP]
    if not ips:
        return None
    if len(entry.entity) > 1:
        raise ValueError("An ip entity cannot be combined with any other entity type")
    name = ips[0].entity_name
    if name is None:
        return DEFAULT
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        raise ValueError(f"{name} is not a valid IP address") from None


def _ip_rate(entry) -> float | None:
    """The one operation of an ip entity: set or remove connection_creation_rate."""
    if len(entry.ops) != 1 or entry.ops[0].key != CONNECTION_CREATION_RATE:
        raise ValueError(f"An ip entity has one quota key, {CONNECTION_CREATION_RATE}")
    op = entry.ops[0]
    if op.remove:
        return None
    value = float(op.value)
    if not math.isfinite(value) or value < 0 or not value.is_integer():
        raise ValueError(f"Invalid value {op.value} for {op.key}: connections per second are a whole number >= 0")
    return value


def _entity(entry) -> Entity:
    names: dict[str, str] = {}
    for part in entry.entity:
        if part.entity_type not in (USER, CLIENT_ID):
            raise ValueError(
                f"Unsupported quota entity type: {part.entity_type} (strom has user, client-id and ip quotas)"
            )
        if part.entity_type in names:
            raise ValueError(f"Duplicate {part.entity_type} entity type")
        if part.entity_name == "":
            raise ValueError(f"Empty {part.entity_type} name (a null name is the default entity)")
        names[part.entity_type] = DEFAULT if part.entity_name is None else part.entity_name
    if not names:
        raise ValueError("An entity names a user, a client-id or both")
    return names.get(USER), names.get(CLIENT_ID)


def _changes(entry) -> dict[str, float | None]:
    changes: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            raise ValueError(f"Unknown quota key {op.key}; strom has {', '.join(QUOTA_KEYS)}")
        if op.key in changes:
            raise ValueError(f"Duplicate quota key {op.key}")
        if op.remove:
            changes[op.key] = None
            continue
        value = float(op.value)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"Invalid value {op.value} for {op.key}: a quota is a number >= 0")
        if op.key != REQUEST_PERCENTAGE and not value.is_integer():
            raise ValueError(f"Invalid value {op.value} for {op.key}: bytes per second are a whole number")
        changes[op.key] = value
    return changes


def handle(ctx, request):
    permitted = cluster_allowed(ctx, Operation.ALTER_CONFIGS)
    quotas = ctx.broker.quotas
    results = []
    for entry in request.entries:
        code, message = ErrorCode.NONE, None
        if not permitted:
            code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "AlterConfigs on the cluster is required"
        else:
            try:
                ip = _ip_entity(entry)
                if ip is not None:
                    rate = _ip_rate(entry)
                    if not request.validate_only:
                        quotas.alter_ip(ip, rate)
                else:
                    entity, changes = _entity(entry), _changes(entry)
                    if not request.validate_only:
                        quotas.alter(entity, changes)
            except ValueError as exc:
                code, message = ErrorCode.INVALID_REQUEST, str(exc)
            except StoreError as exc:
                code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"could not store the quotas: {exc}"
        results.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": part.entity_type, "entity_name": part.entity_name} for part in entry.entity],
            }
        )
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "entries": results})
