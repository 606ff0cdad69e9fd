"""CreateAcls: add ACL bindings to their resource patterns' znodes (Alter on the cluster)."""

from __future__ import annotations

from strom.cluster.store import StoreError
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import AclError, Operation, PatternType, binding_from_wire, validate_binding
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.CREATE_ACLS
MIN_VERSION = 0  # v0 (Kafka 3.9) has no pattern type: its bindings are LITERAL, the field's default
MAX_VERSION = 3

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def handle(ctx, request):
    authorizer = ctx.broker.authorizer
    results: list[tuple[int, str | None]] = []
    if authorizer is None:
        results = [(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)] * len(request.creations)
    elif not cluster_allowed(ctx, Operation.ALTER):
        results = [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")] * len(request.creations)
    else:
        valid = []
        for creation in request.creations:
            binding = binding_from_wire(
                creation.resource_type,
                creation.resource_name,
                field_value(creation, "resource_pattern_type", PatternType.LITERAL),
                creation.principal,
                creation.host,
                creation.operation,
                creation.permission_type,
            )
            try:
                validate_binding(binding)
            except AclError as exc:
                results.append((ErrorCode.INVALID_REQUEST, str(exc)))
                continue
            valid.append(binding)
            results.append((ErrorCode.NONE, None))
        try:
            authorizer.create(valid)
        except StoreError as exc:
            results = [
                (code or ErrorCode.UNKNOWN_SERVER_ERROR, message or f"could not store the ACLs: {exc}")
                for code, message in results
            ]
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "results": [{"error_code": code, "error_message": message} for code, message in results]},
    )
