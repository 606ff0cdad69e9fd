"""AddOffsetsToTxn: the consumer group's __consumer_offsets partition joins the transaction.

Its TxnOffsetCommit then goes to the group coordinator, and the transaction's marker on that
partition makes the offsets visible (commit) or drops them (abort).
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import group_allowed, txn_allowed

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 4  # v4 only allows TRANSACTION_ABORTABLE (KIP-890)
FENCED_SINCE_VERSION = 2


async def _handle(ctx, request):
    coordinator = ctx.broker.transaction_coordinator
    if not txn_allowed(ctx, Operation.WRITE, request.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not group_allowed(ctx, Operation.READ, request.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif not request.group_id:
        code = ErrorCode.INVALID_GROUP_ID
    else:
        try:
            partition = coordinator.offsets_partition(request.group_id)
        except KafkaError:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = await coordinator.add_partitions(
                request.transactional_id, request.producer_id, request.producer_epoch, [partition]
            )
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_SINCE_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": code})


def handle(ctx, request):
    return _handle(ctx, request)
