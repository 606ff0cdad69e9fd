"""FindCoordinator: which broker coordinates a group (key type 0) or a transactional id (key type 1).

The group coordinator is the leader of the group's __consumer_offsets partition, the
transaction coordinator the leader of the id's __transaction_state partition. Both topics are
created on first use, as Kafka does.
"""

from __future__ import annotations

from strom.group.offset_store import OFFSETS_TOPIC
from strom.group.records import fits
from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import group_allowed, txn_allowed
from strom.txn.coordinator import TRANSACTION_STATE_TOPIC

API_KEY = ApiKey.FIND_COORDINATOR
MIN_VERSION = 0
MAX_VERSION = 6  # v5 may answer TRANSACTION_ABORTABLE; v6 knows share groups (key type 2: INVALID_REQUEST)
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _error(key: str, code: int, message: str) -> dict:
    return {"key": key, "error_code": code, "node_id": -1, "host": "", "port": -1, "error_message": message}


def coordinator_for(broker, key: str, key_type: int, listener: str = "PLAINTEXT") -> dict:
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return _error(key, ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    what = "group id" if key_type == GROUP_KEY_TYPE else "transactional id"
    if not key or not fits(key):
        return _error(
            key,
            ErrorCode.INVALID_GROUP_ID if key_type == GROUP_KEY_TYPE else ErrorCode.INVALID_REQUEST,
            f"the {what} is empty" if not key else f"the {what} is longer than 32767 bytes",
        )
    try:
        if key_type == GROUP_KEY_TYPE:
            broker.internal_topics.ensure_offsets_topic()
            topic, partition = OFFSETS_TOPIC, broker.group_coordinator.store.partition_for(key)
        else:
            broker.internal_topics.ensure_transaction_state_topic()
            topic, partition = TRANSACTION_STATE_TOPIC, broker.transaction_coordinator.partition_for(key)
    except KafkaError as exc:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, exc.message)
    leader = broker.metadata.leader_of(topic, partition)
    node = broker.metadata.brokers.get(leader)
    if node is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
    address = node.endpoint(listener)  # the listener the request came in on, as Kafka
    if address is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {leader} has no listener {listener}")
    return {
        "key": key,
        "error_code": ErrorCode.NONE,
        "node_id": node.broker_id,
        "host": address[0],
        "port": address[1],
        "error_message": None,
    }


def _authorized_coordinator(ctx, key: str, key_type: int) -> dict:
    """Describe on the group or the transactional id, as Kafka asks before naming a coordinator."""
    if key_type == GROUP_KEY_TYPE and not group_allowed(ctx, Operation.DESCRIBE, key):
        return _error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    if key_type == TRANSACTION_KEY_TYPE and not txn_allowed(ctx, Operation.DESCRIBE, key):
        return _error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
    return coordinator_for(ctx.broker, key, key_type, ctx.listener)


def handle(ctx, request):
    key_type = field_value(request, "key_type", GROUP_KEY_TYPE)
    cls = response_class_for(API_KEY, ctx.api_version)
    if ctx.api_version >= 4:
        coordinators = [_authorized_coordinator(ctx, key, key_type) for key in request.coordinator_keys]
        return build(cls, {"throttle_time": 0, "coordinators": coordinators})
    return build(cls, {"throttle_time": 0, **_authorized_coordinator(ctx, request.key, key_type)})
