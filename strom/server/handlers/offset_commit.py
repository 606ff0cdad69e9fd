"""OffsetCommit: offsets become records in __consumer_offsets, acknowledged once committed there."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.server.authorization import offset_commit_denials

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 0  # v0 and v1 are simple commits outside a generation unless they name one
MAX_VERSION = 9  # v9: consumer protocol members commit with their member epoch (KIP-848)


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


def offsets_response(ctx, api_key: int, topics, results: dict):
    """The response of OffsetCommit and TxnOffsetCommit, which share their shape."""
    answered = [
        {
            "name": topic.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": results[(topic.name, p.partition_index)]}
                for p in topic.partitions
            ],
        }
        for topic in topics
    ]
    return build(response_class_for(api_key, ctx.api_version), {"throttle_time": 0, "topics": answered})


async def _commit(ctx, request):
    offsets, results = requested_offsets(ctx.broker, request.topics)
    denied = offset_commit_denials(ctx, request.group_id, request.topics)
    for tp, code in denied.items():
        offsets.pop(tp, None)
        results[tp] = code
    if offsets or not denied:
        results.update(
            await ctx.broker.group_coordinator.commit_offsets(
                request.group_id,
                field_value(request, "generation_id_or_member_epoch", -1),
                field_value(request, "member_id", ""),
                field_value(request, "group_instance_id"),
                offsets,
            )
        )
    return offsets_response(ctx, API_KEY, request.topics, results)


def handle(ctx, request):
    return _commit(ctx, request)
