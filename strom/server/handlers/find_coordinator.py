"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (key type 1).

The group coordinator is the leader of the group's __consumer_offsets partition. The topic is
created on first use, as Kafka does, with offsets.topic.num.partitions partitions.
"""

from __future__ import annotations

from strom.group.offset_store import OFFSETS_TOPIC
from strom.group.records import fits
from strom.protocol.api import ApiKey, response_class
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError

API_KEY = ApiKey.FIND_COORDINATOR
MIN_VERSION = 0
MAX_VERSION = 4
GROUP_KEY_TYPE = 0


def coordinator_for(broker, key: str, key_type: int) -> dict:
    if key_type != GROUP_KEY_TYPE:
        return {"key": key, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "", "port": -1,
                "error_message": "transaction coordinators are not available yet"}
    if not key or not fits(key):
        return {"key": key, "error_code": ErrorCode.INVALID_GROUP_ID, "node_id": -1, "host": "", "port": -1,
                "error_message": "the group id is empty" if not key else "the group id is longer than 32767 bytes"}
    try:
        broker.ensure_offsets_topic()
    except KafkaError as exc:
        return {"key": key, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "",
                "port": -1, "error_message": exc.message}
    partition = broker.group_coordinator.store.partition_for(key)
    leader = broker.metadata.leader_of(OFFSETS_TOPIC, partition)
    node = broker.metadata.brokers.get(leader)
    if node is None:
        return {"key": key, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "node_id": -1, "host": "",
                "port": -1, "error_message": f"{OFFSETS_TOPIC}-{partition} has no leader"}
    return {"key": key, "error_code": ErrorCode.NONE, "node_id": node.broker_id, "host": node.host,
            "port": node.port, "error_message": None}


def handle(ctx, request):
    key_type = field_value(request, "key_type", GROUP_KEY_TYPE)
    cls = response_class(API_KEY, ctx.api_version)
    if ctx.api_version >= 4:
        coordinators = [coordinator_for(ctx.broker, key, key_type) for key in request.coordinator_keys]
        return build(cls, {"throttle_time": 0, "coordinators": coordinators})
    return build(cls, {"throttle_time": 0, **coordinator_for(ctx.broker, request.key, key_type)})
