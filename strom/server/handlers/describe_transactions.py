"""DescribeTransactions: state, producer and partitions of transactional ids this broker coordinates."""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import txn_allowed

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
MIN_VERSION = 0
MAX_VERSION = 0


def _describe(coordinator, transactional_id: str) -> dict:
    error, meta = coordinator.describe(transactional_id)
    if meta is None:
        return {
            "error_code": error,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
    by_topic: dict[str, list[int]] = {}
    for topic, p in meta.sorted_partitions:
        by_topic.setdefault(topic, []).append(p)
    return {
        "error_code": 0,
        "transactional_id": transactional_id,
        "transaction_state": meta.state.display_name,
        "transaction_timeout": meta.timeout_ms,
        "transaction_start_time": meta.start_ms,
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
    }


def handle(ctx, request):
    coordinator = ctx.broker.transaction_coordinator
    states = [
        _describe(coordinator, txn_id)
        if txn_allowed(ctx, Operation.DESCRIBE, txn_id)
        else {
            "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "transactional_id": txn_id,
            "transaction_state": "",
            "transaction_timeout": 0,
            "transaction_start_time": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
        for txn_id in request.transactional_ids
    ]
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "transaction_states": states})
