"""DescribeClientQuotas: the quota entities matching a filter, as Kafka's ZooKeeper mode answers.

Each filter component names an entity type (``user``, ``client-id`` or ``ip``) and matches one name
(EXACT), the <default> entity (DEFAULT) or any named entity (SPECIFIED). ``strict`` asks for
entities with exactly the filter's entity types; otherwise entities may name more. Only quota
keys are shown (a user's SCRAM credentials share its node and are never listed here).
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed
from strom.server.quotas import CLIENT_ID, CONNECTION_CREATION_RATE, DEFAULT, IP, USER, Entity

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
MIN_VERSION = 0
MAX_VERSION = 1

EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2


def _error(ctx, code: int, message: str):
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "error_code": code, "error_message": message, "entries": None},
    )


def _parts(entity: Entity) -> dict[str, str]:
    user, client = entity
    parts = {}
    if user is not None:
        parts[USER] = user
    if client is not None:
        parts[CLIENT_ID] = client
    return parts


def _matches(parts: dict[str, str], filters: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    if strict and set(parts) != set(filters):
        return False
    for entity_type, (match_type, match) in filters.items():
        name = parts.get(entity_type)
        if name is None:
            return False
        if match_type == EXACT and name != match:
            return False
        if match_type == DEFAULT_MATCH and name != DEFAULT:
            return False
        if match_type == SPECIFIED and name == DEFAULT:
            return False
    return True


def handle(ctx, request):
    if not cluster_allowed(ctx, Operation.DESCRIBE_CONFIGS):
        return _error(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DescribeConfigs on the cluster is required")
    filters: dict[str, tuple[int, str | None]] = {}
    for component in request.components:
        entity_type = component.entity_type
        if entity_type not in (USER, CLIENT_ID, IP):
            return _error(
                ctx,
                ErrorCode.INVALID_REQUEST,
                f"Unsupported quota entity type: {entity_type} (strom has user, client-id and ip quotas)",
            )
        if entity_type in filters:
            return _error(ctx, ErrorCode.INVALID_REQUEST, f"Duplicate {entity_type} filter component entity type")
        if component.match_type not in (EXACT, DEFAULT_MATCH, SPECIFIED):
            return _error(ctx, ErrorCode.INVALID_REQUEST, f"Unknown match type {component.match_type}")
        if component.match_type == EXACT and component.match is None:
            return _error(ctx, ErrorCode.INVALID_REQUEST, "An exact match needs a name")
        filters[entity_type] = (component.match_type, component.match)
    quotas = ctx.broker.quotas
    configured = [
        (_parts(entity), values) for entity, values in sorted(quotas.entities.items(), key=lambda i: str(i[0]))
    ]
    configured += [({IP: ip}, {CONNECTION_CREATION_RATE: rate}) for ip, rate in sorted(quotas.ip_rates.items())]
    entries = []
    for parts, values in configured:
        if not _matches(parts, filters, request.strict):
            continue
        entries.append(
            {
                "entity": [{"entity_type": t, "entity_name": None if n == DEFAULT else n} for t, n in parts.items()],
                "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())],
            }
        )
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries},
    )
