"""OffsetCommit: offsets become records in __consumer_offsets, acknowledged once committed there."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode

API_KEY = ApiKey.OFFSET_COMMIT
MIN_VERSION = 2
MAX_VERSION = 8


async def _commit(ctx, request):
    offsets = {}
    results = {}
    known = ctx.broker.metadata.topics
    for topic in request.topics:
        info = known.get(topic.name)
        for p in topic.partitions:
            if info is None or not 0 <= p.partition_index < info.partition_count:
                # as Kafka: only offsets of existing partitions are stored
                results[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[(topic.name, p.partition_index)] = (p.committed_offset,
                                                        field_value(p, "committed_leader_epoch", -1),
                                                        p.committed_metadata)
    results.update(await ctx.broker.group_coordinator.commit_offsets(
        request.group_id, request.generation_id_or_member_epoch, request.member_id,
        field_value(request, "group_instance_id"), offsets))
    topics = [{"name": topic.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": results[(topic.name, p.partition_index)]}
        for p in topic.partitions]} for topic in request.topics]
    return build(response_class(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})


def handle(ctx, request):
    return _commit(ctx, request)
