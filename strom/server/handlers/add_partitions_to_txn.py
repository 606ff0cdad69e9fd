"""AddPartitionsToTxn: a producer names the partitions its transaction writes, before writing them.

Versions 0–3 come from producers, one transaction each. Version 4 comes from brokers (KIP-890
part 1): batches of transactions, and ``verify_only`` asks whether a partition is already in
the transaction, so that a partition leader can refuse a transactional write the coordinator
does not know about. With ``verify_only`` false, a broker adds the partition for a write of a
transactions-v2 client (KIP-890 part 2: Produce v12 and TxnOffsetCommit v5 add their own partition).
"""

from __future__ import annotations

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed, denied_topics, txn_allowed

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
MIN_VERSION = 0
MAX_VERSION = 5  # v5 only allows TRANSACTION_ABORTABLE (KIP-890)
FENCED_SINCE_VERSION = 2
BROKER_BATCH_VERSION = 4


def _known(broker, topics) -> dict[tuple[str, int], int]:
    """UNKNOWN_TOPIC_OR_PARTITION for what does not exist; NONE for the rest (to be decided)."""
    codes: dict[tuple[str, int], int] = {}
    for topic in topics:
        info = broker.metadata.topics.get(topic.name)
        for p in topic.partitions:
            exists = info is not None and 0 <= p < info.partition_count
            codes[(topic.name, p)] = ErrorCode.NONE if exists else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return codes


async def _add(ctx, transactional_id, producer_id, producer_epoch, topics, verify_only) -> dict:
    coordinator = ctx.broker.transaction_coordinator
    codes = _known(ctx.broker, topics)
    if ctx.broker.authorizer is not None and ctx.api_version < BROKER_BATCH_VERSION:
        if not txn_allowed(ctx, Operation.WRITE, transactional_id):
            return dict.fromkeys(codes, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = denied_topics(ctx, Operation.WRITE, (name for name, _ in codes))
        if denied:  # as Kafka: nothing is added when one topic is refused
            return {
                tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in codes
            }
    if any(codes.values()):  # as Kafka: nothing is added when one partition is unknown
        codes = {tp: c or ErrorCode.OPERATION_NOT_ATTEMPTED for tp, c in codes.items()}
    elif verify_only:
        codes = coordinator.check_partitions(transactional_id, producer_id, producer_epoch, codes)
    else:
        tv2 = ctx.api_version >= BROKER_BATCH_VERSION  # a broker adding for a transactions-v2 write
        code = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, codes, tv2=tv2)
        if code == ErrorCode.PRODUCER_FENCED and ctx.api_version < FENCED_SINCE_VERSION:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        codes = dict.fromkeys(codes, code)
    return codes


def _topic_results(codes: dict[tuple[str, int], int]) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def _handle(ctx, request):
    cls = response_class_for(API_KEY, ctx.api_version)
    if ctx.api_version >= BROKER_BATCH_VERSION:
        if not cluster_allowed(ctx, Operation.CLUSTER_ACTION):  # from brokers only
            return build(
                cls,
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "results_by_transaction": [],
                },
            )
        results = []
        for txn in request.transactions:
            codes = await _add(
                ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, txn.verify_only
            )
            results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(codes)})
        return build(cls, {"throttle_time": 0, "error_code": 0, "results_by_transaction": results})
    codes = await _add(
        ctx,
        request.v3_and_below_transactional_id,
        request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch,
        request.v3_and_below_topics,
        False,
    )
    return build(cls, {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(codes)})


def handle(ctx, request):
    return _handle(ctx, request)
