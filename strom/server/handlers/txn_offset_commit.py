"""TxnOffsetCommit: a transactional producer commits a group's offsets inside its transaction.

The group coordinator writes them as the producer's transactional batch in __consumer_offsets;
they become the group's committed offsets only when the transaction commits (its marker there).
A client sends AddOffsetsToTxn to the transaction coordinator first, which adds that
__consumer_offsets partition to the transaction. v3 (KIP-447) adds the member id, generation and
group.instance.id, so a consumer fenced by a rebalance cannot commit.
"""

from __future__ import annotations

from strom.protocol.api import ApiKey
from strom.protocol.entities import field_value
from strom.server.authorization import offset_commit_denials
from strom.server.handlers.offset_commit import offsets_response, requested_offsets

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MIN_VERSION = 0
# v4 may answer TRANSACTION_ABORTABLE (strom never does); v5 belongs to transaction version 2
# (KIP-890 part 2: the commit adds the partition itself), which strom does not implement.
MAX_VERSION = 4


async def _commit(ctx, request):
    offsets, results = requested_offsets(ctx.broker, request.topics)
    for tp, code in offset_commit_denials(ctx, request.group_id, request.topics, request.transactional_id).items():
        offsets.pop(tp, None)
        results[tp] = code
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


def handle(ctx, request):
    return _commit(ctx, request)
