"""SyncGroup: the leader's assignments reach every member once the leader has sent them."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import group_allowed

API_KEY = ApiKey.SYNC_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


async def _sync(ctx, request):
    code, assignment, protocol_type, protocol = await ctx.broker.group_coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        field_value(request, "group_instance_id"),
        field_value(request, "protocol_type"),
        field_value(request, "protocol_name"),
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": code,
            "protocol_type": protocol_type,
            "protocol_name": protocol,
            "assignment": assignment,
        },
    )


def handle(ctx, request):
    if not group_allowed(ctx, Operation.READ, request.group_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "protocol_type": None,
                "protocol_name": None,
                "assignment": b"",
            },
        )
    return _sync(ctx, request)
