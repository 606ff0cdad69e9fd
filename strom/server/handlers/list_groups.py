"""ListGroups: the groups this broker coordinates (v4+: filtered by state)."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class
from strom.protocol.entities import build, field_value
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed, group_allowed

API_KEY = ApiKey.LIST_GROUPS
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, request):
    states = set(field_value(request, "states_filter", ()) or ())
    groups = [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state.value}
              for g in ctx.broker.group_coordinator.list_groups(states)]
    if ctx.broker.authorizer is not None and not cluster_allowed(ctx, Operation.DESCRIBE, log_denied=False):
        groups = [g for g in groups if group_allowed(ctx, Operation.DESCRIBE, g["group_id"])]
    return build(response_class(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": 0, "groups": groups})
