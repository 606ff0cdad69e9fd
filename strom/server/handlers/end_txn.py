"""EndTxn: commit or abort the producer's transaction.

Answered once PrepareCommit/PrepareAbort is committed to __transaction_state: from then on the
outcome is decided and survives a coordinator failure; the markers follow asynchronously.

v5 is transactions v2 (KIP-890 part 2): the coordinator bumps the producer epoch with every
EndTxn and the answer carries the producer id and epoch the client goes on with.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import txn_allowed

API_KEY = ApiKey.END_TXN
MIN_VERSION = 0
MAX_VERSION = 5
FENCED_SINCE_VERSION = 2
TV2_SINCE_VERSION = 5


async def _handle(ctx, request):
    if not txn_allowed(ctx, Operation.WRITE, request.transactional_id):
        return build(
            response_class_for(API_KEY, ctx.api_version),
            {
                "throttle_time": 0,
                "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
    result = await ctx.broker.transaction_coordinator.end_txn(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        tv2=ctx.api_version >= TV2_SINCE_VERSION,
    )
    code = result.error_code
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_SINCE_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return build(
        response_class_for(API_KEY, ctx.api_version),
        {
            "throttle_time": 0,
            "error_code": code,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        },
    )


def handle(ctx, request):
    return _handle(ctx, request)
