"""OffsetDelete: remove committed offsets of topics the group no longer subscribes to."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import denied_topics, group_allowed

API_KEY = ApiKey.OFFSET_DELETE
MIN_VERSION = 0
MAX_VERSION = 0


async def _delete(ctx, request):
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if not group_allowed(ctx, Operation.DELETE, request.group_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time": 0, "topics": []},
        )
    denied = denied_topics(ctx, Operation.READ, (t for t, _ in wanted))
    error, results = await ctx.broker.group_coordinator.offsets.delete_offsets(
        request.group_id, [tp for tp in wanted if tp[0] not in denied]
    )
    results = {**results, **{tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in wanted if tp[0] in denied}}
    topics = [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": results.get((t.name, p.partition_index), error)}
                for p in t.partitions
            ],
        }
        for t in request.topics
    ]
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"error_code": error, "throttle_time": 0, "topics": [] if error else topics},
    )


def handle(ctx, request):
    return _delete(ctx, request)
