"""OffsetFetch: a group's committed offsets (-1 where nothing is committed); v8+ asks for many groups."""

from __future__ import annotations

from collections import defaultdict

from strom.protocol.api import ApiKey, response_class
from strom.protocol.entities import build

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 1
MAX_VERSION = 8


def _group_result(coordinator, group_id: str, topics) -> tuple[int, list[dict]]:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error, offsets = coordinator.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[dict]] = defaultdict(list)
    for (topic, partition), committed in sorted(offsets.items()):
        by_topic[topic].append({
            "partition_index": partition,
            "committed_offset": committed.offset if committed else -1,
            "committed_leader_epoch": committed.leader_epoch if committed else -1,
            "metadata": committed.metadata if committed else "",
            "error_code": 0,
        })
    return error, [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]


def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    cls = response_class(API_KEY, ctx.api_version)
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, topics = _group_result(coordinator, group.group_id, group.topics)
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return build(cls, {"throttle_time": 0, "groups": groups})
    error, topics = _group_result(coordinator, request.group_id, request.topics)
    if ctx.api_version < 2 and error:  # v0-1 have no top-level error: report it per partition
        for topic in topics:
            for partition in topic["partitions"]:
                partition["error_code"] = error
    return build(cls, {"throttle_time": 0, "topics": topics, "error_code": error})
