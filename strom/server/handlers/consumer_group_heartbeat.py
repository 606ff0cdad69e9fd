"""ConsumerGroupHeartbeat (KIP-848): joining, heartbeating and leaving a consumer protocol group.

Every field but the ids is sent only when it changed, so None means "as before". The client host is
written as Java's InetAddress.toString() ("/127.0.0.1"), as for classic members.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value, millis
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import TOPIC, allowed, denied_topics, group_allowed

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
MIN_VERSION = 0
MAX_VERSION = 1


async def _heartbeat(ctx, request):
    owned = request.topic_partitions
    describable = None
    if ctx.broker.authorizer is not None:  # a regex matches only topics the member may Describe

        def describable(topic: str) -> bool:
            return allowed(ctx, Operation.DESCRIBE, TOPIC, topic, log_denied=False)

    result = await ctx.broker.group_coordinator.consumer.heartbeats.heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        request.instance_id,
        request.rack_id,
        millis(request.rebalance_timeout),
        None if request.subscribed_topic_names is None else list(request.subscribed_topic_names),
        field_value(request, "subscribed_topic_regex"),
        request.server_assignor,
        None if owned is None else {tp.topic_id: frozenset(int(p) for p in tp.partitions) for tp in owned},
        ctx.header.client_id or "",
        "/" + ctx.peer.rsplit(":", 1)[0],
        ctx.api_version,
        describable,
    )
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(parts)}
                for topic_id, parts in sorted(result.assignment.items(), key=str)
            ]
        }
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": result.error_code,
            "error_message": result.error_message,
            "member_id": result.member_id,
            "member_epoch": result.member_epoch,
            "heartbeat_interval": result.heartbeat_interval_ms,
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
                "member_epoch": -1,
                "heartbeat_interval": 0,
                "member_id": request.member_id,
            },
        )
    if request.subscribed_topic_names and denied_topics(ctx, Operation.DESCRIBE, request.subscribed_topic_names):
        # Kafka 4.0 (KAFKA-18813): a member may not subscribe to a topic it may not Describe
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "error_message": "Topic authorization failed.",
                "member_epoch": -1,
                "heartbeat_interval": 0,
                "member_id": request.member_id,
            },
        )
    return _heartbeat(ctx, request)
