"""OffsetFetch: a group's committed offsets (-1 where nothing is committed); v8+ asks for many groups.

Offsets of open transactions are never shown. With require_stable (v7+, what read_committed
consumers send, KIP-447) a partition whose offset a transaction is about to replace answers
UNSTABLE_OFFSET_COMMIT instead, and the client asks again: otherwise a consumer taking over a
partition could start from the offset before a transaction that then commits, and process its
input twice.
"""

from __future__ import annotations

from collections import defaultdict

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server import topic_id_requests
from strom.server.authorization import denied_topics, group_allowed

API_KEY = ApiKey.OFFSET_FETCH
MIN_VERSION = 0
MAX_VERSION = 10  # v9: member id and epoch of consumer protocol members (KIP-848); v10: topic ids


def _group_result(coordinator, group_id: str, topics, require_stable: bool, ctx=None) -> tuple[int, list[dict]]:
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if ctx is not None and ctx.broker.authorizer is not None:
        return _authorized_result(ctx, coordinator, group_id, topics, wanted, require_stable)
    error, offsets = coordinator.offsets.fetch_offsets(group_id, wanted)
    unstable = coordinator.offsets.unstable_offsets(group_id, wanted) if require_stable and not error else set()
    by_topic: dict[str, list[dict]] = defaultdict(list)
    for (topic, partition), committed in sorted(offsets.items()):
        if (topic, partition) in unstable:
            committed = None
        by_topic[topic].append(
            {
                "partition_index": partition,
                "committed_offset": committed.offset if committed else -1,
                "committed_leader_epoch": committed.leader_epoch if committed else -1,
                "metadata": committed.metadata if committed else "",
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, partition) in unstable else 0,
            }
        )
    return error, [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]


def _authorized_result(ctx, coordinator, group_id: str, topics, wanted, require_stable: bool):
    """Describe on the group (else GROUP_AUTHORIZATION_FAILED); a listed topic without Describe gets
    TOPIC_AUTHORIZATION_FAILED per partition, an unlisted one is left out (as Kafka)."""
    if not group_allowed(ctx, Operation.DESCRIBE, group_id):
        if ctx.api_version >= 2 or not wanted:
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
        by_topic: dict[str, list[dict]] = defaultdict(list)  # v0-1 have no top-level error: per partition
        for name, index in wanted:
            by_topic[name].append(
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                }
            )
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, [{"name": n, "partitions": ps} for n, ps in by_topic.items()]
    names = [t.name for t in topics] if topics is not None else []
    denied = denied_topics(ctx, Operation.DESCRIBE, names)
    if topics is not None:
        topics = [t for t in topics if t.name not in denied]
    error, answered = _group_result(coordinator, group_id, topics, require_stable)
    if topics is None:
        hidden = denied_topics(ctx, Operation.DESCRIBE, [t["name"] for t in answered])
        answered = [t for t in answered if t["name"] not in hidden]
    for name in sorted(denied):
        indexes = [p for (t, p) in wanted if t == name]
        answered.append(
            {
                "name": name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    }
                    for p in indexes
                ],
            }
        )
    return error, answered


def _by_topic_id(ctx, coordinator, group, require_stable: bool) -> tuple[int, list[dict]]:
    """v10: the topics asked for by id, answered by id; a topic whose id no longer resolves (all
    topics asked for, of which one was deleted) is left out, an unknown id asked for gets
    UNKNOWN_TOPIC_ID per partition."""
    broker = ctx.broker
    topics, unknown = (None, []) if group.topics is None else topic_id_requests.resolve(broker, group.topics)
    error, answered = _group_result(coordinator, group.group_id, topics, require_stable, ctx)
    by_id = []
    for entry in answered:
        topic_id = topic_id_requests.topic_id_of(broker, entry["name"])
        if topic_id is not None:
            by_id.append({"topic_id": topic_id, "partitions": entry["partitions"]})
    if not error:
        for topic in unknown:
            partitions = [
                {
                    "partition_index": index,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                }
                for index in topic.partition_indexes
            ]
            by_id.append({"topic_id": topic.topic_id, "partitions": partitions})
    return error, by_id


def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    cls = response_class_for(API_KEY, ctx.api_version)
    require_stable = bool(field_value(request, "require_stable", False))
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error = coordinator.consumer.validate_fetch(
                group.group_id, field_value(group, "member_id"), field_value(group, "member_epoch", -1)
            )
            if error:
                groups.append({"group_id": group.group_id, "topics": [], "error_code": error})
                continue
            if ctx.api_version >= topic_id_requests.TOPIC_ID_VERSION:
                error, topics = _by_topic_id(ctx, coordinator, group, require_stable)
            else:
                error, topics = _group_result(coordinator, group.group_id, group.topics, require_stable, ctx)
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return build(cls, {"throttle_time": 0, "groups": groups})
    error, topics = _group_result(coordinator, request.group_id, request.topics, require_stable, ctx)
    if ctx.api_version < 2 and error:  # v0-1 have no top-level error: report it per partition
        for topic in topics:
            for partition in topic["partitions"]:
                partition["error_code"] = error
    return build(cls, {"throttle_time": 0, "topics": topics, "error_code": error})
