"""DescribeCluster (KIP-700): brokers, cluster id and controller, from the metadata cache.

endpoint_type (v1+) asks for brokers (1) or KRaft controllers (2). strom's controller is one of
its brokers and has no endpoint of its own, so, like a Kafka broker, it answers a request for
controllers with MISMATCHED_ENDPOINT_TYPE, and an unknown type with UNSUPPORTED_ENDPOINT_TYPE.
No broker is ever fenced (v2's include_fenced_brokers changes nothing).
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import CLUSTER_NAME, Operation
from strom.server.authorization import CLUSTER, authorized_operations, cluster_allowed

API_KEY = ApiKey.DESCRIBE_CLUSTER
MIN_VERSION = 0
MAX_VERSION = 2

BROKERS_ENDPOINT = 1
CONTROLLERS_ENDPOINT = 2
OPERATIONS_NOT_REQUESTED = -(2**31)
# No authorizer: every cluster operation is allowed (Kafka then reports all it supports):
# CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def handle(ctx, request):
    broker = ctx.broker
    endpoint = field_value(request, "endpoint_type", BROKERS_ENDPOINT)
    body = {
        "throttle_time": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": endpoint,
        "cluster_id": broker.metadata.cluster_id,
        "controller_id": broker.metadata.controller_id,
        "brokers": [],
        "cluster_authorized_operations": OPERATIONS_NOT_REQUESTED,
    }
    if not cluster_allowed(ctx, Operation.DESCRIBE):
        body.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed.")
    elif endpoint == CONTROLLERS_ENDPOINT:
        body.update(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="this is a broker endpoint; strom has no separate controller endpoints",
        )
    elif endpoint != BROKERS_ENDPOINT:
        body.update(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, error_message=f"unknown endpoint type {endpoint}")
    else:
        body["brokers"] = [
            {"broker_id": b.broker_id, "host": address[0], "port": address[1], "rack": b.rack, "is_fenced": False}
            for b in sorted(broker.metadata.brokers.values(), key=lambda b: b.broker_id)
            if (address := b.endpoint(ctx.listener)) is not None
        ]
        if request.include_cluster_authorized_operations:
            body["cluster_authorized_operations"] = (
                CLUSTER_OPERATIONS if broker.authorizer is None else authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
            )
    return build(response_class_for(API_KEY, ctx.api_version), body)
