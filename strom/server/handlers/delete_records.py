"""DeleteRecords (KIP-107): move a partition's log start offset forward; -1 means the high watermark.

Checks in Kafka's order: internal topics are refused (INVALID_TOPIC_EXCEPTION), the partition must
be led here (NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION), the topic's cleanup.policy must
include delete (POLICY_VIOLATION), and the offset must lie in [0, high watermark]
(OFFSET_OUT_OF_RANGE). The answer's low watermark is the leader's new log start offset, returned
at once: unlike Kafka's DelayedDeleteRecords, strom does not wait until every follower has moved
its own log start.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import (
    ErrorCode,
    InvalidTopicError,
    KafkaError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)
from strom.security.acl import Operation
from strom.server.authorization import denied_topics
from strom.server.dispatcher import error_from_exception
from strom.server.handlers.metadata import INTERNAL_TOPICS

API_KEY = ApiKey.DELETE_RECORDS
MIN_VERSION = 0
MAX_VERSION = 2
HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1


def delete(replicas, topic: str, index: int, offset: int) -> int:
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"cannot delete records of internal topic {topic}")
    partition = replicas.leader_partition(topic, index)
    log_ = partition.log
    if not log_.config.delete:
        raise PolicyViolationError(
            f"records of {topic}-{index} cannot be deleted: cleanup.policy is {','.join(log_.config.cleanup_policy)}"
        )
    if offset == HIGH_WATERMARK:
        offset = log_.high_watermark
    if offset < 0:
        raise OffsetOutOfRangeError(f"offset {offset} of {topic}-{index} is not valid")
    return log_.delete_records(offset)


def handle(ctx, request):
    replicas = ctx.broker.replica_manager
    topics = []
    denied = denied_topics(ctx, Operation.DELETE, (t.name for t in request.topics))
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            entry = {"partition_index": wanted.partition_index, "error_code": 0}
            if topic.name in denied:
                entry.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, low_watermark=INVALID_LOW_WATERMARK)
                partitions.append(entry)
                continue
            try:
                entry["low_watermark"] = delete(replicas, topic.name, wanted.partition_index, wanted.offset)
            except (KafkaError, ValueError) as exc:
                entry.update(error_code=error_from_exception(exc)[0], low_watermark=INVALID_LOW_WATERMARK)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
