"""DescribeTopicPartitions (KIP-966): Metadata's partition view, paged by a cursor.

Kafka 3.7+ admin clients describe topics with it (falling back to Metadata when it is not
advertised), so a topic with many partitions comes back in pages of at most
``response_partition_limit`` (capped by ``max.request.partition.size.limit``) instead of one huge
Metadata response. The paging follows Kafka's KRaftMetadataCache exactly, because clients loop on
``next_cursor``: topics in name order from the cursor's topic, that topic from the cursor's
partition, and when the limit falls on a topic boundary the cursor names the next topic at 0.
strom has no eligible leader replicas (KIP-966's ELR needs KRaft's min-ISR tracking), so both ELR
lists are empty, as Kafka reports them for a partition with none.
"""

from __future__ import annotations

import logging
import uuid

from strom.cluster.controller import validate_topic_name
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import TOPIC, authorized_operations, denied_topics
from strom.server.handlers.metadata import INTERNAL_TOPICS, partition_entries

API_KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 0
ZERO_UUID = uuid.UUID(int=0)
log = logging.getLogger(__name__)


def _invalid(request, message: str) -> dict:
    """Kafka's getErrorResponse: every named topic carries the error (all-topics: no topics)."""
    log.info("invalid DescribeTopicPartitions request: %s", message)
    return {
        "throttle_time": 0,
        "topics": [
            {"error_code": ErrorCode.INVALID_REQUEST, "name": t.name, "topic_id": ZERO_UUID, "partitions": []}
            for t in request.topics
        ],
    }


def _page(ctx, names: list[str], cursor, limit: int, all_topics: bool) -> tuple[list[dict], dict | None]:
    """Kafka's getTopicMetadataForDescribeTopicResponse: partitions of ``names`` up to ``limit``."""
    topics_info = ctx.broker.metadata.topics
    out: list[dict] = []
    remaining = limit
    for name in names:
        if remaining <= 0:
            # the previous topic was served whole: the next page starts at this one (which may not exist)
            return out, {"topic_name": name, "partition_index": 0}
        info = topics_info.get(name)
        if info is None:
            if not all_topics:
                try:
                    validate_topic_name(name)
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except KafkaError as exc:
                    code = ErrorCode(exc.error_code)
                out.append(
                    {
                        "error_code": code,
                        "name": name,
                        "topic_id": ZERO_UUID,
                        "is_internal": name in INTERNAL_TOPICS,
                        "partitions": [],
                        "topic_authorized_operations": authorized_operations(ctx, TOPIC, name),  # as Kafka
                    }
                )
            continue
        start = cursor["partition_index"] if cursor is not None and name == cursor["topic_name"] else 0
        count = len(info.replicas)
        upper = min(count, start + remaining)
        partitions = [
            {**entry, "eligible_leader_replicas": [], "last_known_elr": []}
            for entry in partition_entries(ctx.broker, info)
            if start <= entry["partition_index"] < upper
        ]
        out.append(
            {
                "error_code": ErrorCode.NONE,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": name in INTERNAL_TOPICS,
                "partitions": partitions,
                "topic_authorized_operations": authorized_operations(ctx, TOPIC, name),
            }
        )
        if upper < count:
            return out, {"topic_name": name, "partition_index": upper}
        remaining -= len(partitions)
    return out, None


def handle(ctx, request):
    cls = response_class_for(API_KEY, ctx.api_version)
    cursor = None
    if request.cursor is not None:
        cursor = {"topic_name": request.cursor.topic_name, "partition_index": int(request.cursor.partition_index)}
    first = cursor["topic_name"] if cursor is not None else ""
    all_topics = not request.topics
    if all_topics:
        candidates = {name for name in ctx.broker.metadata.topics if name >= first}
    else:
        candidates = {t.name for t in request.topics if t.name >= first}
        if cursor is not None and cursor["topic_name"] not in candidates:
            message = f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: {first}"
            return build(cls, _invalid(request, message))
    if cursor is not None and cursor["partition_index"] < 0:
        return build(cls, _invalid(request, f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor}"))
    # Unauthorized topics are not looked up at all: named ones get TOPIC_AUTHORIZATION_FAILED without
    # a topic id (their existence is not disclosed), the rest of an all-topics listing simply omits them.
    denied = denied_topics(ctx, Operation.DESCRIBE, candidates)
    names = sorted(candidates - denied)
    limit = min(ctx.broker.config.max_request_partition_size_limit, int(request.response_partition_limit))
    topics, next_cursor = _page(ctx, names, cursor, limit, all_topics)
    if not all_topics:
        topics += [
            {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": ZERO_UUID, "partitions": []}
            for name in sorted(denied)
        ]
    return build(cls, {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})
