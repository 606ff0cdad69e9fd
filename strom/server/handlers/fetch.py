"""Fetch: file slices of each partition below its high watermark, long-polling when there is no data.

A fetch with less than ``min_bytes`` available waits in the purgatory for up to ``max_wait_ms``
and is woken by the next append to one of its partitions, never by a sleep loop. The response
is encoded by hand with the record bytes left as file slices, which the connection sends with
sendfile. Fetch sessions (KIP-227) are declined by answering session id 0, which every client
handles by sending full fetches.

read_committed consumers (isolation_level 1) read below the last stable offset and get the
aborted transactions overlapping what they read, so they can drop those batches; markers are
sent like any batch, and clients skip them.
"""

from __future__ import annotations

import struct
import time

from strom.protocol.api import ApiKey
from strom.protocol.entities import field_value, millis
from strom.protocol.errors import ErrorCode, KafkaError, NotLeaderError
from strom.server.dispatcher import RawResponse, error_from_exception
from strom.server import wire
from strom.storage.segment import FileSlice

API_KEY = ApiKey.FETCH
MIN_VERSION = 4  # librdkafka sends v2 record batches only to brokers with Fetch >= 4
MAX_VERSION = 12  # v13+ names topics by id

_PARTITION_HEAD = struct.Struct(">ihqq")
_ERROR_AND_SESSION = struct.Struct(">hi")
_NO_PREFERRED_REPLICA = b"\xff\xff\xff\xff"
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_ABORTED = struct.Struct(">qq")


class PartitionData:
    __slots__ = ("index", "error_code", "high_watermark", "last_stable_offset", "log_start_offset", "slices",
                 "aborted")

    def __init__(self, index: int):
        self.index = index
        self.error_code = 0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.slices: list[FileSlice] = []
        self.aborted = None


def _read_all(broker, request, replica_id: int) -> tuple[list[tuple[str, list[PartitionData]]], int, bool]:
    """One pass over the requested partitions; returns (results, bytes, any_error)."""
    replicas = broker.replica_manager
    read_committed = replica_id < 0 and field_value(request, "isolation_level", 0) == 1
    remaining = request.max_bytes if field_value(request, "max_bytes") is not None else 2**31 - 1
    total = 0
    any_error = False
    results = []
    for topic in request.topics:
        name = topic.topic
        partitions = []
        for wanted in topic.partitions:
            data = PartitionData(wanted.partition)
            try:
                partition = replicas.leader_partition(name, wanted.partition)
                partition.check_leader_epoch(field_value(wanted, "current_leader_epoch", -1))
                if replica_id >= 0:
                    if replica_id not in partition.replicas or replica_id not in broker.metadata.brokers:
                        raise NotLeaderError(f"{replica_id} is not a live replica of {name}-{wanted.partition}; "
                                             "only brokers may fetch with a replica id")
                    replicas.record_follower_fetch(partition, replica_id, wanted.fetch_offset)
                limit = min(wanted.partition_max_bytes, remaining)
                read = partition.read(wanted.fetch_offset, limit, for_replica=replica_id >= 0,
                                      min_one_message=total == 0, read_committed=read_committed)
                data.high_watermark = read.high_watermark
                data.last_stable_offset = read.last_stable_offset
                data.log_start_offset = read.log_start_offset
                data.slices = read.data.slices
                data.aborted = read.aborted
                size = read.data.size
                total += size
                remaining = max(0, remaining - size)
            except (KafkaError, ValueError) as exc:
                data.error_code = error_from_exception(exc)[0]
                any_error = True
                log_ = replicas.partitions.get((name, wanted.partition))
                if log_ is not None:
                    data.high_watermark = log_.log.high_watermark
                    data.last_stable_offset = log_.log.last_stable_offset
                    data.log_start_offset = log_.log.log_start_offset
            partitions.append(data)
        results.append((name, partitions))
    return results, total, any_error


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    replica_id = field_value(request, "replica_id", -1)
    session_id = field_value(request, "session_id", 0)
    session_epoch = field_value(request, "session_epoch", -1)
    if session_id != 0 and session_epoch > 0:
        return encode_response([], version, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    results, total, any_error = _read_all(broker, request, replica_id)
    max_wait_ms = millis(request.max_wait)
    if total >= request.min_bytes or max_wait_ms <= 0 or any_error or not request.topics:
        return encode_response(results, version)
    return _long_poll(broker, request, replica_id, max_wait_ms, version)


async def _long_poll(broker, request, replica_id: int, max_wait_ms: int, version: int) -> RawResponse:
    """Wait for data, woken by appends. Each pass re-reads before waiting, so an append that
    lands between the handler's first read and this coroutine starting is not missed."""
    deadline = time.monotonic() + max_wait_ms / 1000
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    purgatory = broker.replica_manager.purgatory
    while True:
        results, total, any_error = _read_all(broker, request, replica_id)
        left = deadline - time.monotonic()
        if total >= request.min_bytes or any_error or left <= 0:
            return encode_response(results, version)
        if not await purgatory.wait(keys, left):
            return encode_response(_read_all(broker, request, replica_id)[0], version)


def encode_response(results, version: int, error_code: int = 0) -> RawResponse:
    flexible = version >= 12
    parts = [_INT32.pack(0)]  # throttle_time_ms
    if version >= 7:
        parts.append(_ERROR_AND_SESSION.pack(error_code, 0))  # session id 0: sessions declined
    parts.append(wire.array_length(len(results), flexible))
    chunks: list = []
    for name, partitions in results:
        parts.append(wire.string(name, flexible))
        parts.append(wire.array_length(len(partitions), flexible))
        for data in partitions:
            parts.append(_PARTITION_HEAD.pack(data.index, data.error_code, data.high_watermark,
                                              data.last_stable_offset))
            if version >= 5:
                parts.append(_INT64.pack(data.log_start_offset))
            aborted = data.aborted
            if aborted:
                parts.append(wire.array_length(len(aborted), flexible))
                for entry in aborted:
                    parts.append(_ABORTED.pack(entry.producer_id, entry.first_offset))
                    if flexible:
                        parts.append(wire.NO_TAGS)
            else:
                parts.append(wire.array_length(0, flexible))
            if version >= 11:
                parts.append(_NO_PREFERRED_REPLICA)
            size = 0
            for file_slice in data.slices:
                size += file_slice.length
            parts.append(wire.bytes_length(size, flexible))
            if data.slices:
                chunks.append(b"".join(parts))
                chunks.extend(data.slices)
                parts = []
            if flexible:
                parts.append(wire.NO_TAGS)
        if flexible:
            parts.append(wire.NO_TAGS)
    if flexible:
        parts.append(wire.NO_TAGS)
    chunks.append(b"".join(parts))
    return RawResponse(chunks)
