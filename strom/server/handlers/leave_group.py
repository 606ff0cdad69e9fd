"""LeaveGroup: members leave at once instead of waiting for their session to expire."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import group_allowed

API_KEY = ApiKey.LEAVE_GROUP
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    if not group_allowed(ctx, Operation.READ, request.group_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {"throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []},
        )
    return _leave(ctx, request)


async def _leave(ctx, request):
    if ctx.api_version >= 3:
        leaving = [(m.member_id, field_value(m, "group_instance_id")) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    # a classic member of a consumer group leaves by writing records: awaited
    error, results = await ctx.broker.group_coordinator.leave(request.group_id, leaving)
    if ctx.api_version < 3 and not error and results:
        error = results[0]
    members = [{"member_id": m, "group_instance_id": i, "error_code": code} for (m, i), code in zip(leaving, results)]
    return build(
        response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": error, "members": members}
    )
