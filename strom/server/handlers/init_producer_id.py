"""InitProducerId: a producer id and epoch for idempotent and transactional producers.

Without a transactional.id, ids come from blocks reserved in the metadata store
(/latest_producer_id_block, as in Kafka), so no two brokers ever hand out the same id, and a
producer that re-initialises with its id and epoch (KIP-360) gets the next epoch of the same
id. With one, the transaction coordinator answers: the id keeps its producer id, the epoch is
bumped, and an older incarnation of the producer is fenced.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build, field_value, millis
from strom.protocol.errors import ErrorCode, KafkaError
from strom.security.acl import Operation
from strom.server.authorization import idempotent_write_allowed, txn_allowed

API_KEY = ApiKey.INIT_PRODUCER_ID
MIN_VERSION = 0
MAX_VERSION = 5  # v5 only allows TRANSACTION_ABORTABLE (KIP-890); v6 is two-phase commit (KIP-939)
MAX_EPOCH = 32767
# KIP-588 introduced PRODUCER_FENCED; older clients know it as INVALID_PRODUCER_EPOCH
FENCED_SINCE_VERSION = 4


def handle(ctx, request):
    if request.transactional_id is not None:
        if not txn_allowed(ctx, Operation.WRITE, request.transactional_id):
            return _response(
                ctx,
                {
                    "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
        return _init_transactional(ctx, request)
    if not idempotent_write_allowed(ctx):
        return _response(
            ctx, {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
        )
    broker = ctx.broker
    producer_id = field_value(request, "producer_id", -1)
    epoch = field_value(request, "producer_epoch", -1)
    try:
        if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
            result = (producer_id, epoch + 1)
        else:
            result = (broker.producer_ids.next_id(), 0)
        values = {"error_code": 0, "producer_id": result[0], "producer_epoch": result[1]}
    except KafkaError as exc:
        values = {"error_code": exc.error_code, "producer_id": -1, "producer_epoch": -1}
    return _response(ctx, values)


async def _init_transactional(ctx, request):
    result = await ctx.broker.transaction_coordinator.init_producer_id(
        request.transactional_id,
        millis(request.transaction_timeout),
        field_value(request, "producer_id", -1),
        field_value(request, "producer_epoch", -1),
    )
    code = result.error_code
    if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_SINCE_VERSION:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return _response(
        ctx, {"error_code": code, "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}
    )


def _response(ctx, values: dict):
    values["throttle_time"] = 0
    return build(response_class_for(API_KEY, ctx.api_version), values)
