"""ListPartitionReassignments (KIP-455): the moves in progress, from the controller's metadata.

Each partition shows its full replica set (target and original) with the replicas being added
and removed. Null topics lists every move; named partitions that are not moving (or do not
exist) are left out, as in Kafka. Another broker than the controller answers NOT_CONTROLLER.
"""

from __future__ import annotations

from strom.cluster.reassignment import ongoing
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed

API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, request):
    broker = ctx.broker
    if not cluster_allowed(ctx, Operation.DESCRIBE):  # as Kafka: Describe on the cluster
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "Cluster authorization failed.",
                "topics": [],
            },
        )
    if not broker.controller.is_active:
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.NOT_CONTROLLER,
                "error_message": f"broker {broker.broker_id} is not the controller",
                "topics": [],
            },
        )
    wanted: dict[str, list[int]] | None = None
    if request.topics is not None:
        named: dict[str, list[int]] = {}
        for topic in request.topics:
            named.setdefault(topic.name, []).extend(int(p) for p in topic.partition_indexes)
        wanted = named
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "topics": ongoing(broker.metadata, wanted),
        },
    )
