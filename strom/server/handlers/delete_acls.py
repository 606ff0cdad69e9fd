"""DeleteAcls: remove every binding each filter matches and name them (Alter on the cluster)."""

from __future__ import annotations

from strom.cluster.store import StoreError
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import AclError, Operation, PatternType, filter_from_wire
from strom.server.authorization import cluster_allowed
from strom.server.handlers.create_acls import NO_AUTHORIZER

API_KEY = ApiKey.DELETE_ACLS
MIN_VERSION = 0  # v0 (Kafka 3.9) has no pattern type filter: it matches LITERAL bindings only
MAX_VERSION = 3


def _failed(code: int, message: str) -> dict:
    return {"error_code": code, "error_message": message, "matching_acls": []}


def handle(ctx, request):
    authorizer = ctx.broker.authorizer
    results: list[dict] = []
    if authorizer is None:
        results = [_failed(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER) for _ in request.filters]
    elif not cluster_allowed(ctx, Operation.ALTER):
        results = [
            _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.") for _ in request.filters
        ]
    else:
        filters, positions = [], []
        for f in request.filters:
            acl_filter = filter_from_wire(
                f.resource_type_filter,
                f.resource_name_filter,
                field_value(f, "pattern_type_filter", PatternType.LITERAL),
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
            try:
                acl_filter.validate()
            except AclError as exc:
                results.append(_failed(ErrorCode.INVALID_REQUEST, str(exc)))
                continue
            positions.append(len(results))
            results.append({})
            filters.append(acl_filter)
        try:
            matched = authorizer.delete(filters)
        except StoreError as exc:
            matched = None
            for position in positions:
                results[position] = _failed(ErrorCode.UNKNOWN_SERVER_ERROR, f"could not delete the ACLs: {exc}")
        for position, bindings in zip(positions, matched or ()):
            results[position] = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": ErrorCode.NONE,
                        "error_message": None,
                        "resource_type": b.pattern.resource_type,
                        "resource_name": b.pattern.name,
                        "pattern_type": b.pattern.pattern_type,
                        "principal": b.entry.principal,
                        "host": b.entry.host,
                        "operation": b.entry.operation,
                        "permission_type": b.entry.permission,
                    }
                    for b in bindings
                ],
            }
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "filter_results": results})
