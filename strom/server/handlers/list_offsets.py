"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), or the first offset at or after a time."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class
from strom.protocol.entities import build, field_value
from strom.protocol.errors import KafkaError
from strom.server.dispatcher import error_from_exception
from strom.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

API_KEY = ApiKey.LIST_OFFSETS
MIN_VERSION = 1
MAX_VERSION = 7


def lookup(partition, timestamp: int, read_committed: bool = False) -> dict:
    log_ = partition.log
    if timestamp == LATEST_TIMESTAMP:
        # consumers see only committed data: "latest" is the high watermark, as in Kafka, and the
        # last stable offset for read_committed consumers
        offset = log_.last_stable_offset if read_committed else log_.high_watermark
        return {"timestamp": -1, "offset": offset, "leader_epoch": log_.leader_epoch_cache.latest_epoch}
    if timestamp == EARLIEST_TIMESTAMP:
        offset = log_.log_start_offset
        return {"timestamp": -1, "offset": offset, "leader_epoch": log_.leader_epoch_cache.epoch_for_offset(offset)}
    found = log_.offset_for_timestamp(timestamp)
    if found is None or found[1] >= (log_.last_stable_offset if read_committed else log_.high_watermark):
        return {"timestamp": -1, "offset": -1, "leader_epoch": -1}
    found_timestamp, offset = found
    return {"timestamp": found_timestamp, "offset": offset,
            "leader_epoch": log_.leader_epoch_cache.epoch_for_offset(offset)}


def handle(ctx, request):
    replicas = ctx.broker.replica_manager
    read_committed = field_value(request, "isolation_level", 0) == 1
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            entry = {"partition_index": wanted.partition_index, "error_code": 0}
            try:
                partition = replicas.leader_partition(topic.name, wanted.partition_index)
                partition.check_leader_epoch(field_value(wanted, "current_leader_epoch", -1))
                entry.update(lookup(partition, wanted.timestamp, read_committed))
            except (KafkaError, ValueError) as exc:
                entry.update({"error_code": error_from_exception(exc)[0], "timestamp": -1, "offset": -1,
                              "leader_epoch": -1})
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
