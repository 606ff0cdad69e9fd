"""ListGroups: the groups this broker coordinates (v4+: filtered by state, v5+: by type, KIP-848)."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed, group_allowed

API_KEY = ApiKey.LIST_GROUPS
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, request):
    states = set(field_value(request, "states_filter", ()) or ())
    types = {t.lower() for t in field_value(request, "types_filter", ()) or ()}  # case-insensitive, as Kafka
    coordinator = ctx.broker.group_coordinator
    groups = [
        {
            "group_id": g.group_id,
            "protocol_type": g.protocol_type or "",
            "group_state": g.state.value,
            "group_type": "classic",
        }
        for g in coordinator.list_groups(states)
    ]
    wanted_states = {s.lower() for s in states}
    groups += [
        {"group_id": g.group_id, "protocol_type": "consumer", "group_state": g.state, "group_type": "consumer"}
        for g in coordinator.consumer.list_groups()
        if not wanted_states or g.state.lower() in wanted_states
    ]
    if types:
        groups = [g for g in groups if g["group_type"] in types]
    if ctx.broker.authorizer is not None and not cluster_allowed(ctx, Operation.DESCRIBE, log_denied=False):
        groups = [g for g in groups if group_allowed(ctx, Operation.DESCRIBE, g["group_id"])]
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": 0, "groups": groups})
