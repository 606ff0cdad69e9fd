"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), or the first offset at or after a time.

v8 adds the earliest local offset (-4) and v9 the latest tiered offset (-5) of tiered storage (KIP-405,
KIP-1005): strom keeps every segment local, so -4 is the log start offset and -5 finds nothing (offset
-1), as Kafka answers for a topic without remote storage. v10's timeout bounds remote lookups only.
v11 (KIP-1023) adds the earliest offset pending upload to remote storage (-6): nothing is ever
pending here, so it finds nothing either (offset -1), Kafka's answer without remote storage.
"""

from __future__ import annotations

import dataclasses

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server import legacy
from strom.server.authorization import denied_topics
from strom.server.dispatcher import error_from_exception
from strom.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 0  # v0 (a list of offsets per partition) is answered by strom.server.legacy
MAX_VERSION = 11
EARLIEST_LOCAL_TIMESTAMP = -4
CONSUMER_REPLICA_ID = -1  # a follower or a debugging tool sends its own id
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


def _not_available(partition) -> KafkaError:
    return KafkaError(
        f"{partition.topic}-{partition.index}: the high watermark ({partition.log.high_watermark}) of leader "
        f"epoch {partition.leader_epoch} is behind the epoch's start offset ({partition.leader_epoch_start_offset}); "
        "the followers have not fetched yet",
        error_code=ErrorCode.OFFSET_NOT_AVAILABLE,
    )


def lookup(partition, timestamp: int, read_committed: bool = False, client: bool = True) -> dict:
    """One partition's answer. ``client``: asked by a consumer (replica id -1), which gets
    OFFSET_NOT_AVAILABLE instead of an offset past a new leader's lagging high watermark (KIP-207)."""
    log_ = partition.log
    lagging = client and partition.high_watermark_lagging
    if timestamp == LATEST_TIMESTAMP:
        if lagging:
            raise _not_available(partition)
        # consumers see only committed data: "latest" is the high watermark, as in Kafka, and the
        # last stable offset for read_committed consumers
        offset = log_.last_stable_offset if read_committed else log_.high_watermark
        return {"timestamp": -1, "offset": offset, "leader_epoch": log_.leader_epoch_cache.latest_epoch}
    if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return {"timestamp": -1, "offset": -1, "leader_epoch": -1}
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        offset = log_.log_start_offset
        return {"timestamp": -1, "offset": offset, "leader_epoch": log_.leader_epoch_cache.epoch_for_offset(offset)}
    found = log_.offset_for_timestamp(timestamp)
    if found is None or found[1] >= (log_.last_stable_offset if read_committed else log_.high_watermark):
        if lagging and timestamp >= 0:  # the record may be below the high watermark once it catches up
            raise _not_available(partition)
        return {"timestamp": -1, "offset": -1, "leader_epoch": -1}
    found_timestamp, offset = found
    return {
        "timestamp": found_timestamp,
        "offset": offset,
        "leader_epoch": log_.leader_epoch_cache.epoch_for_offset(offset),
    }


def _v0_authorized(ctx, request):
    """v0 with an authorizer: the topics without Describe answer TOPIC_AUTHORIZATION_FAILED, after the rest."""
    denied = denied_topics(ctx, Operation.DESCRIBE, (t.name for t in request.topics))
    answered = legacy.list_offsets_v0(
        ctx, dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name not in denied))
    )
    if not denied:
        return answered
    refused = build(
        response_class_for(API_KEY, 0),
        {
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "old_style_offsets": [],
                            "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        }
                        for p in t.partitions
                    ],
                }
                for t in request.topics
                if t.name in denied
            ]
        },
    )
    return dataclasses.replace(answered, topics=answered.topics + refused.topics)


def handle(ctx, request):
    if ctx.api_version == 0:
        if ctx.broker.authorizer is not None:
            return _v0_authorized(ctx, request)
        return legacy.list_offsets_v0(ctx, request)
    replicas = ctx.broker.replica_manager
    read_committed = field_value(request, "isolation_level", 0) == 1
    client = request.replica_id == CONSUMER_REPLICA_ID
    topics = []
    denied = denied_topics(ctx, Operation.DESCRIBE, (t.name for t in request.topics))
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            entry = {"partition_index": wanted.partition_index, "error_code": 0}
            if topic.name in denied:
                entry.update(
                    {
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                )
                partitions.append(entry)
                continue
            try:
                partition = replicas.leader_partition(topic.name, wanted.partition_index)
                partition.check_leader_epoch(field_value(wanted, "current_leader_epoch", -1))
                entry.update(lookup(partition, wanted.timestamp, read_committed, client))
            except (KafkaError, ValueError) as exc:
                entry.update(
                    {"error_code": error_from_exception(exc)[0], "timestamp": -1, "offset": -1, "leader_epoch": -1}
                )
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
