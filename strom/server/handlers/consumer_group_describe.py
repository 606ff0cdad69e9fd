"""ConsumerGroupDescribe (KIP-848): epochs, assignor and each member's current and target assignment.

A classic group answers GROUP_ID_NOT_FOUND ("not a consumer group"), as in Kafka, so that admin
clients fall back to DescribeGroups for it.
"""

from __future__ import annotations

from typing import Any

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import GROUP, authorized_operations, denied_topics, group_allowed

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
MIN_VERSION = 0
MAX_VERSION = 1
OPERATIONS_NOT_REQUESTED = -(2**31)


def _partitions(names: dict, assignment: dict) -> dict:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": names[topic_id], "partitions": sorted(parts)}
            for topic_id, parts in sorted(assignment.items(), key=lambda item: names.get(item[0], ""))
            if topic_id in names
        ]
    }


def _describe(ctx, group_id: str, include_operations: bool) -> dict:
    entry: dict[str, Any] = {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group_id,
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": OPERATIONS_NOT_REQUESTED,
    }
    if not group_allowed(ctx, Operation.DESCRIBE, group_id):
        entry["error_code"] = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return entry
    consumer = ctx.broker.group_coordinator.consumer
    error, group = consumer.describe(group_id)
    if error or group is None:
        entry["error_code"] = error
        if error == ErrorCode.GROUP_ID_NOT_FOUND:
            entry["error_message"] = f"Group {group_id} is not a consumer group."
        return entry
    names = consumer.assignment.topic_names()
    seen = {t for m in group.members.values() for t in m.subscribed_topic_names}
    seen |= {names[t] for m in group.members.values() for t in m.assigned if t in names}
    seen |= {names[t] for target in group.target.values() for t in target if t in names}
    if denied_topics(ctx, Operation.DESCRIBE, seen):  # Kafka 4.0 (KAFKA-18813): all or nothing
        entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        entry["error_message"] = "The described group uses topics that the client is not authorized to describe."
        return entry
    votes = [m.server_assignor for m in group.members.values() if m.server_assignor]
    entry.update(
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=max(sorted(set(votes)), key=votes.count) if votes else consumer.assignment.assignors[0],
    )
    entry["members"] = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "member_epoch": m.member_epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": m.subscribed_topic_names,
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignment": _partitions(names, m.assigned),
            "target_assignment": _partitions(names, group.target.get(m.member_id, {})),
            "member_type": 1 if m.classic is None else 0,  # KIP-1099: 0 classic, 1 consumer
        }
        for m in group.members.values()
    ]
    if include_operations:
        entry["authorized_operations"] = authorized_operations(ctx, GROUP, group_id)
    return entry


def handle(ctx, request):
    include = bool(field_value(request, "include_authorized_operations", False))
    groups = [_describe(ctx, group_id, include) for group_id in request.group_ids]
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "groups": groups})
