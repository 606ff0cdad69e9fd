"""Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import group_allowed

API_KEY = ApiKey.HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    if not group_allowed(ctx, Operation.READ, request.group_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {"throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED},
        )
    code = ctx.broker.group_coordinator.heartbeat(
        request.group_id, request.generation_id, request.member_id, field_value(request, "group_instance_id")
    )
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": code})
