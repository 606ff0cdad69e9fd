"""Produce: append each partition's batches on its leader; acks=all waits for the high watermark.

The response is encoded by hand (this is the hottest request). acks=0 sends no response at all.
"""

from __future__ import annotations

import asyncio
import struct
import time

from strom.protocol.api import ApiKey
from strom.protocol.entities import millis
from strom.protocol.errors import ErrorCode, KafkaError
from strom.server.dispatcher import RawResponse, error_from_exception
from strom.server.wire import WireWriter

API_KEY = ApiKey.PRODUCE
MIN_VERSION = 3  # v3 is the first with record batches (magic 2); older versions carry message sets
MAX_VERSION = 9

_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")


class PartitionResult:
    __slots__ = ("index", "error_code", "base_offset", "log_append_time", "log_start_offset", "message", "wait_for")

    def __init__(self, index: int, error_code: int = 0, base_offset: int = -1, log_append_time: int = -1,
                 log_start_offset: int = -1, message: str | None = None):
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.message = message
        self.wait_for = -1  # acks=all: the offset the high watermark must pass


def handle(ctx, request):
    broker = ctx.broker
    acks = request.acks
    replicas = broker.replica_manager
    results: list[tuple[str, list[PartitionResult]]] = []
    for topic in request.topic_data:
        name = topic.name
        partitions = []
        for data in topic.partition_data:
            result = PartitionResult(data.index)
            if acks not in (0, 1, -1):
                result.error_code = ErrorCode.INVALID_REQUIRED_ACKS
            elif data.records is None or len(data.records) == 0:
                result.error_code, result.message = ErrorCode.INVALID_RECORD, "produce request without records"
            else:
                try:
                    info = replicas.append(name, data.index, data.records, acks)
                    result.base_offset = info.first_offset
                    result.log_append_time = info.log_append_time
                    result.log_start_offset = info.log_start_offset
                    if acks == -1:
                        result.wait_for = info.last_offset + 1
                except (KafkaError, ValueError) as exc:
                    result.error_code, result.message = error_from_exception(exc)
            partitions.append(result)
        results.append((name, partitions))
    if acks == 0:
        return None
    if acks == -1 and any(not _committed(broker, name, r) for name, rs in results for r in rs):
        return _await_replication(broker, results, millis(request.timeout), ctx.api_version)
    return encode_response(results, ctx.api_version)


def _committed(broker, topic: str, result: PartitionResult) -> bool:
    if result.wait_for < 0:
        return True
    partition = broker.replica_manager.partitions.get((topic, result.index))
    return partition is None or partition.log.high_watermark >= result.wait_for


async def _await_replication(broker, results, timeout_ms: int, version: int) -> RawResponse:
    """acks=all: wait (woken by HW moves, not polling) until every partition is committed or time runs out."""
    deadline = time.monotonic() + timeout_ms / 1000
    purgatory = broker.replica_manager.purgatory
    while True:
        pending = [(name, r) for name, rs in results for r in rs if not _committed(broker, name, r)]
        if not pending:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            for _, result in pending:
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
                result.message = f"acks=all: not replicated to the in-sync replicas within {timeout_ms} ms"
            break
        await purgatory.wait([(name, r.index) for name, r in pending], left)
    return encode_response(results, version)


def encode_response(results: list[tuple[str, list[PartitionResult]]], version: int) -> RawResponse:
    flexible = version >= 9
    out = WireWriter(flexible)
    out.array_length(len(results))
    for name, partitions in results:
        out.string(name)
        out.array_length(len(partitions))
        for r in partitions:
            if version >= 5:
                out.raw(_PARTITION_V5.pack(r.index, r.error_code, r.base_offset, r.log_append_time,
                                           r.log_start_offset))
            else:
                out.raw(_PARTITION_V3.pack(r.index, r.error_code, r.base_offset, r.log_append_time))
            if version >= 8:
                out.array_length(0)  # record_errors
                out.nullable_string(r.message if r.error_code else None)
            out.tagged_fields()
        out.tagged_fields()
    out.int32(0)  # throttle_time_ms
    out.tagged_fields()
    return RawResponse([out.getvalue()])
