"""DeleteGroups: only empty groups; their offsets and metadata become tombstones."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import group_allowed

API_KEY = ApiKey.DELETE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 2


async def _delete(ctx, request):
    names = list(request.groups_names)
    refused = {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in names if not group_allowed(ctx, Operation.DELETE, g)}
    results = await ctx.broker.group_coordinator.delete_groups([g for g in names if g not in refused])
    results = {**results, **refused}
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {"throttle_time": 0, "results": [{"group_id": g, "error_code": code} for g, code in results.items()]},
    )


def handle(ctx, request):
    return _delete(ctx, request)
