"""TxnOffsetCommit: a transactional producer commits a group's offsets inside its transaction.

The group coordinator writes them as the producer's transactional batch in __consumer_offsets;
they become the group's committed offsets only when the transaction commits (its marker there).
A client sends AddOffsetsToTxn to the transaction coordinator first, which adds that
__consumer_offsets partition to the transaction. v3 (KIP-447) adds the member id, generation and
group.instance.id, so a consumer fenced by a rebalance cannot commit. v5 is transactions v2
(KIP-890 part 2): the client sends no AddOffsetsToTxn, so where transaction.version 2 is
finalized the commit first asks the transaction coordinator to add the group's partition.
"""

from __future__ import annotations

from strom.cluster.features import TRANSACTION_VERSION
from strom.protocol.api import ApiKey
from strom.protocol.entities import field_value
from strom.protocol.errors import ErrorCode
from strom.server.authorization import offset_commit_denials
from strom.server.handlers.offset_commit import offsets_response, requested_offsets

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MIN_VERSION = 0
# v4 may answer TRANSACTION_ABORTABLE (strom never does); v5 adds the partition itself (KIP-890 part 2)
MAX_VERSION = 5
IMPLICIT_ADD_SINCE_VERSION = 5


async def _commit(ctx, request):
    offsets, results = requested_offsets(ctx.broker, request.topics)
    for tp, code in offset_commit_denials(ctx, request.group_id, request.topics, request.transactional_id).items():
        offsets.pop(tp, None)
        results[tp] = code
    if (
        offsets
        and ctx.api_version >= IMPLICIT_ADD_SINCE_VERSION
        and ctx.broker.features.level(TRANSACTION_VERSION) >= 2
    ):
        code = await _add_offsets_partition(ctx, request)
        if code:
            results.update(dict.fromkeys(offsets, code))
            offsets = {}
    if offsets:
        results.update(
            await ctx.broker.group_coordinator.offsets.commit_txn_offsets(
                request.group_id,
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                field_value(request, "member_id", ""),
                field_value(request, "generation_id", -1),
                field_value(request, "group_instance_id"),
                offsets,
            )
        )
    return offsets_response(ctx, API_KEY, request.topics, results)


async def _add_offsets_partition(ctx, request) -> int:
    """Transactions v2: add the group's __consumer_offsets partition to the transaction, as
    AddOffsetsToTxn would have (an error code for every offset when refused)."""
    coordinator = ctx.broker.transaction_coordinator
    partition = coordinator.offsets_partition(request.group_id)
    codes = await coordinator.verify_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition], add=True
    )
    code = codes.get(partition, ErrorCode.NONE)
    if code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retriable for TxnOffsetCommit, as Kafka maps it
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def handle(ctx, request):
    return _commit(ctx, request)
