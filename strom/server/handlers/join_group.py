"""JoinGroup: parked until the group's rebalance completes; the leader gets every member's metadata.

The member's client_host is written as Java's InetAddress.toString() ("/127.0.0.1"), which is what
DescribeGroups returns and kafka-consumer-groups.sh prints under HOST.
"""

from __future__ import annotations

from strom.group.join import JoinRequest
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value, millis
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import group_allowed

API_KEY = ApiKey.JOIN_GROUP
MIN_VERSION = 0
MAX_VERSION = 9


async def _join(ctx, request):
    session_timeout = millis(request.session_timeout)
    rebalance_timeout = millis(field_value(request, "rebalance_timeout", request.session_timeout))
    result = await ctx.broker.group_coordinator.join_group(
        JoinRequest(
            request.group_id,
            request.member_id,
            field_value(request, "group_instance_id"),
            ctx.header.client_id or "",
            "/" + ctx.peer.rsplit(":", 1)[0],
            request.protocol_type,
            [(p.name, bytes(p.metadata)) for p in request.protocols],
            session_timeout,
            rebalance_timeout,
            require_known_member_id=ctx.api_version >= 4,
        )
    )
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": result.error_code,
            "generation_id": result.generation,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol if ctx.api_version >= 7 else (result.protocol or ""),
            "leader": result.leader,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": result.members or [],
        },
    )


def handle(ctx, request):
    if not group_allowed(ctx, Operation.READ, request.group_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "generation_id": -1,
                "protocol_type": None,
                "protocol_name": None if ctx.api_version >= 7 else "",
                "leader": "",
                "skip_assignment": False,
                "member_id": request.member_id,
                "members": [],
            },
        )
    return _join(ctx, request)
