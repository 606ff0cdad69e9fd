"""OffsetCommit: offsets become records in __consumer_offsets, acknowledged once committed there."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server import topic_id_requests
from strom.server.authorization import group_allowed, offset_commit_denials

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 0  # v0 and v1 are simple commits outside a generation unless they name one
MAX_VERSION = 10  # v9: consumer protocol members commit with their member epoch (KIP-848); v10: topic ids


def requested_offsets(broker, topics) -> tuple[dict, dict]:
    """(offsets to store, results decided already): as Kafka, only offsets of existing partitions are stored."""
    offsets = {}
    results = {}
    known = broker.metadata.topics
    for topic in topics:
        info = known.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p.partition_index < info.partition_count:
                results[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[(topic.name, p.partition_index)] = (
                p.committed_offset,
                field_value(p, "committed_leader_epoch", -1),
                p.committed_metadata,
            )
    return offsets, results


def offsets_response(ctx, api_key: int, topics, results: dict, unknown_ids: list[dict] | None = None):
    """The response of OffsetCommit and TxnOffsetCommit, which share their shape; ``unknown_ids``
    are the answers for topic ids (v10) no topic has."""
    answered = [
        {
            "name": topic.name,
            "topic_id": getattr(topic, "topic_id", None),  # v10 names topics by id only
            "partitions": [
                {"partition_index": p.partition_index, "error_code": results[(topic.name, p.partition_index)]}
                for p in topic.partitions
            ],
        }
        for topic in topics
    ]
    return build(
        response_class_for(api_key, ctx.api_version), {"throttle_time": 0, "topics": answered + (unknown_ids or [])}
    )


async def _commit(ctx, request):
    topics = request.topics
    unknown_ids: list = []
    if ctx.api_version >= topic_id_requests.TOPIC_ID_VERSION:
        topics, unknown_ids = topic_id_requests.resolve(ctx.broker, request.topics)
    offsets, results = requested_offsets(ctx.broker, topics)
    denied = offset_commit_denials(ctx, request.group_id, topics)
    for tp, code in denied.items():
        offsets.pop(tp, None)
        results[tp] = code
    if offsets or not denied:
        results.update(
            await ctx.broker.group_coordinator.offsets.commit_offsets(
                request.group_id,
                field_value(request, "generation_id_or_member_epoch", -1),
                field_value(request, "member_id", ""),
                field_value(request, "group_instance_id"),
                offsets,
            )
        )
    # Kafka authorizes the group before it looks at any topic: a refused group is the answer for
    # the ids it does not know as well
    unknown_id_error = (
        ErrorCode.GROUP_AUTHORIZATION_FAILED
        if ctx.broker.authorizer is not None and not group_allowed(ctx, Operation.READ, request.group_id)
        else ErrorCode.UNKNOWN_TOPIC_ID
    )
    unknown = [
        {
            "topic_id": t.topic_id,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": unknown_id_error} for p in t.partitions
            ],
        }
        for t in unknown_ids
    ]
    return offsets_response(ctx, API_KEY, topics, results, unknown)


def handle(ctx, request):
    return _commit(ctx, request)
