"""WriteTxnMarkers: the transaction coordinator asks this partition leader to write markers.

Broker to broker only. Each marker is answered once committed (acks=all), so the coordinator
can write CompleteCommit/CompleteAbort knowing no leader change will lose it.
"""

from __future__ import annotations

import asyncio

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation
from strom.server.authorization import cluster_allowed
from strom.txn.markers import write_marker

API_KEY = ApiKey.WRITE_TXN_MARKERS
MIN_VERSION = 0
MAX_VERSION = 1


async def _marker_result(broker, marker) -> dict:
    partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
    codes = await asyncio.gather(
        *(
            write_marker(
                broker.replica_manager,
                broker.group_coordinator.offsets.complete_txn,
                t,
                p,
                marker.producer_id,
                marker.producer_epoch,
                marker.transaction_result,
                marker.coordinator_epoch,
            )
            for t, p in partitions
        )
    )
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), code in zip(partitions, codes):
        by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": code})
    return {"producer_id": marker.producer_id, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


def _refused(marker) -> dict:
    return {
        "producer_id": marker.producer_id,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                    for p in t.partition_indexes
                ],
            }
            for t in marker.topics
        ],
    }


async def _handle(ctx, request):
    if not cluster_allowed(ctx, Operation.CLUSTER_ACTION):
        return build(response_class_for(API_KEY, ctx.api_version), {"markers": [_refused(m) for m in request.markers]})
    results = [await _marker_result(ctx.broker, marker) for marker in request.markers]
    return build(response_class_for(API_KEY, ctx.api_version), {"markers": results})


def handle(ctx, request):
    return _handle(ctx, request)
