"""DescribeAcls: the bindings one filter matches, grouped by resource pattern (Describe on the cluster)."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import AclError, Operation, PatternType, filter_from_wire
from strom.server.authorization import cluster_allowed
from strom.server.handlers.create_acls import NO_AUTHORIZER

API_KEY = ApiKey.DESCRIBE_ACLS
MIN_VERSION = 0  # v0 (Kafka 3.9) has no pattern type filter: it matches LITERAL bindings only
MAX_VERSION = 3


def _answer(ctx, code: int, message: str | None, resources: list[dict]):
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "error_code": code, "error_message": message, "resources": resources},
    )


def handle(ctx, request):
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return _answer(ctx, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER, [])
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        return _answer(ctx, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", [])
    acl_filter = filter_from_wire(
        request.resource_type_filter,
        request.resource_name_filter,
        field_value(request, "pattern_type_filter", PatternType.LITERAL),
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    try:
        acl_filter.validate()
    except AclError as exc:
        return _answer(ctx, ErrorCode.INVALID_REQUEST, str(exc), [])
    grouped: dict = {}
    for binding in authorizer.describe(acl_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    resources = [
        {
            "resource_type": pattern.resource_type,
            "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type,
            "acls": [
                {"principal": e.principal, "host": e.host, "operation": e.operation, "permission_type": e.permission}
                for e in entries
            ],
        }
        for pattern, entries in grouped.items()
    ]
    return _answer(ctx, ErrorCode.NONE, None, resources)
