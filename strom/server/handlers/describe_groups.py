"""DescribeGroups: state, protocol and members (with their metadata and assignment) of each group.

Below v6 a group that does not exist (or is a KIP-848 consumer group) is described as Dead with no error;
v6 (KIP-1043) answers GROUP_ID_NOT_FOUND with Kafka's message instead.
"""

from __future__ import annotations

from strom.group.group import GroupState
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import GROUP, authorized_operations, group_allowed

API_KEY = ApiKey.DESCRIBE_GROUPS
MIN_VERSION = 0
MAX_VERSION = 6
NOT_FOUND_SINCE_VERSION = 6
OPERATIONS_NOT_REQUESTED = -(2**31)


def describe(coordinator, group_id: str, version: int = 0) -> dict:
    error, group = coordinator.describe_group(group_id)
    entry = {
        "error_code": error,
        "group_id": group_id,
        "group_state": "Dead",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": OPERATIONS_NOT_REQUESTED,
    }
    if error:
        return entry
    if group is None or group.state == GroupState.DEAD:
        if version >= NOT_FOUND_SINCE_VERSION:
            kind = "is not a classic group" if group_id in coordinator.consumer.groups else "not found"
            entry.update(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} {kind}.")
        return entry
    entry.update(
        group_state=group.state.value, protocol_type=group.protocol_type or "", protocol_data=group.protocol or ""
    )
    entry["members"] = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_metadata": m.metadata_for(group.protocol or ""),
            "member_assignment": m.assignment,
        }
        for m in group.members.values()
    ]
    return entry


def _authorized(ctx, group_id: str, include_operations: bool) -> dict:
    if not group_allowed(ctx, Operation.DESCRIBE, group_id):
        return {
            "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "group_id": group_id,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": OPERATIONS_NOT_REQUESTED,
        }
    entry = describe(ctx.broker.group_coordinator, group_id, ctx.api_version)
    if include_operations:
        entry["authorized_operations"] = authorized_operations(ctx, GROUP, group_id)
    return entry


def handle(ctx, request):
    include = bool(field_value(request, "include_authorized_operations", False))
    groups = [_authorized(ctx, group_id, include) for group_id in request.groups]
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "groups": groups})
