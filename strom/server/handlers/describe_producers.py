"""DescribeProducers: the producer ids with state on a partition, as its leader sees them.

kafka-transactions.sh (and ``strom transactions describe-producers``) uses it to find hanging
transactions: a producer whose ``current_txn_start_offset`` stays put holds the last stable
offset back, and the abort tool needs its id, epoch and coordinator epoch to write the marker.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import denied_topics
from strom.server.dispatcher import error_from_exception

API_KEY = ApiKey.DESCRIBE_PRODUCERS
MIN_VERSION = 0
MAX_VERSION = 0


def _producers(partition) -> list[dict]:
    return [
        {
            "producer_id": producer_id,
            "producer_epoch": entry.epoch,
            "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": entry.current_txn_first_offset,
        }
        for producer_id, entry in sorted(partition.log.producer_state.producers.items())
    ]


def handle(ctx, request):
    replicas = ctx.broker.replica_manager
    denied = denied_topics(ctx, Operation.READ, (t.name for t in request.topics))
    topics = []
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            entry = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
            if topic.name in denied:
                entry.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
                partitions.append(entry)
                continue
            try:
                entry["active_producers"] = _producers(replicas.leader_partition(topic.name, index))
            except KafkaError as exc:
                entry["error_code"], entry["error_message"] = error_from_exception(exc)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "topics": topics})
