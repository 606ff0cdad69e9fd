"""OffsetForLeaderEpoch (KIP-101, KIP-320): where did a leader epoch end in the leader's log?

Answered from the leader epoch cache: the largest epoch <= the requested one and the start offset
of the next epoch, or the log end offset for the latest epoch. Followers (replica_id >= 0) use it
to truncate; consumers (replica_id -1) to detect truncation after a leader change. Kafka answers
both from the leader only and bounds neither by the high watermark (UnifiedLog.endOffsetForEpoch
passes the log end offset), and strom does the same. The current_leader_epoch check comes before
the leadership check, as in Kafka's Partition.getLocalLog.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError, NotLeaderError
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed, denied_topics
from strom.server.dispatcher import error_from_exception

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
MIN_VERSION = 0
MAX_VERSION = 4


def end_offset(replicas, topic: str, index: int, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
    partition = replicas.get_partition(topic, index)
    partition.check_leader_epoch(current_leader_epoch)
    if not partition.is_leader:
        raise NotLeaderError(f"broker {replicas.broker_id} is not the leader of {topic}-{index}")
    log_ = partition.log
    return log_.leader_epoch_cache.end_offset_for(leader_epoch, log_.log_end_offset)


def handle(ctx, request):
    replicas = ctx.broker.replica_manager
    topics = []
    if field_value(request, "replica_id", -1) >= 0 and not cluster_allowed(ctx, Operation.CLUSTER_ACTION):
        denied = {t.topic for t in request.topics}
    else:
        denied = denied_topics(ctx, Operation.DESCRIBE, (t.topic for t in request.topics))
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            entry = {"partition": wanted.partition, "error_code": 0, "leader_epoch": -1, "end_offset": -1}
            if topic.topic in denied:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partitions.append(entry)
                continue
            try:
                epoch, offset = end_offset(
                    replicas,
                    topic.topic,
                    wanted.partition,
                    field_value(wanted, "current_leader_epoch", -1),
                    wanted.leader_epoch,
                )
                entry.update(leader_epoch=epoch, end_offset=offset)
            except (KafkaError, ValueError) as exc:
                entry["error_code"] = error_from_exception(exc)[0]
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
