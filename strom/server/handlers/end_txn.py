"""EndTxn: commit or abort the producer's transaction.

Answered once PrepareCommit/PrepareAbort is committed to __transaction_state: from then on the
outcome is decided and survives a coordinator failure; the markers follow asynchronously.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import txn_allowed

API_KEY = ApiKey.END_TXN
MIN_VERSION = 0
MAX_VERSION = 4
FENCED_SINCE_VERSION = 2


async def _handle(ctx, request):
    if not txn_allowed(ctx, Operation.WRITE, request.transactional_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {"throttle_time": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED},
        )
    code = await ctx.broker.transaction_coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_SINCE_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return build(response_class_for(API_KEY, ctx.api_version), {"throttle_time": 0, "error_code": code})


def handle(ctx, request):
    return _handle(ctx, request)
