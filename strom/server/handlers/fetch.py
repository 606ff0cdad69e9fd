"""Fetch: file slices of each partition below its high watermark, long-polling when there is no data.

A fetch with less than ``min_bytes`` available waits in the purgatory for up to ``max_wait_ms``
and is woken by the next append to one of its partitions, never by a sleep loop. The response
is encoded by hand with the record bytes left as file slices, which the connection sends with
sendfile. Fetch sessions (KIP-227, from v7) live in strom.replication.fetch_session: the
context it builds says which partitions a pass reads (an incremental fetch skips partitions with
nothing new without touching their logs) and which of them the response lists. From v13 topics
are named by id, both in requests and in responses.

read_committed consumers (isolation_level 1) read below the last stable offset and get the
aborted transactions overlapping what they read, so they can drop those batches; markers are
sent like any batch, and clients skip them.
"""

from __future__ import annotations

import os
import struct
import time

from strom.protocol.api import ApiKey
from strom.protocol.entities import field_value, millis
from strom.protocol.errors import ErrorCode, KafkaError, NotLeaderError
from strom.replication import fetch_session
from strom.server import leader_hints, legacy, wire
from strom.server.authorization import fetch_denials
from strom.server.dispatcher import RawResponse, error_from_exception
from strom.storage.segment import FileSlice

API_KEY = ApiKey.FETCH
MIN_VERSION = 0  # v0-3 answer message sets (magic 0/1), down-converted by strom.server.legacy
# v13+ names topics by id; v15+ carries the replica id in replica_state. v18's per-partition
# high_watermark (KIP-1166) is a follower's, which only a Kafka broker sends; consumers leave it unset.
MAX_VERSION = 18

_PARTITION_HEAD = struct.Struct(">ihqq")
_ERROR_AND_SESSION = struct.Struct(">hi")
_NO_PREFERRED_REPLICA = b"\xff\xff\xff\xff"
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_ABORTED = struct.Struct(">qq")
# A response whose records are this small is sent as one write, its records read into it: with
# sendfile it takes three system calls (header, records, the rest), each a TCP segment the
# receiver wakes up for, and an acks=all produce waits for two fetch responses per follower.
COPY_RECORDS_BELOW = 32 * 1024
# A follower whose only news is a moved high watermark (or log start) is answered after this
# long, unless records for it arrive first and the answer carries both. Answering at once, as
# Kafka 3.7+ does, costs every follower a second fetch round trip per replicated batch (one for
# the records, one for the HW their acknowledgement moved); under a steady load the next batch
# is usually this close behind. Followers need the HW only to serve it after a failover, and
# Kafka before 3.7 let it lag by up to replica.fetch.wait.max.ms (500 ms).
FOLLOWER_HW_LINGER_S = 0.010


class PartitionData:
    __slots__ = (
        "index",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "slices",
        "aborted",
        "fetch_offset",
    )

    def __init__(self, index: int, fetch_offset: int = 0):
        self.index = index
        self.fetch_offset = fetch_offset  # Fetch v0-3 down-conversion leaves out the records below it, as Kafka
        self.error_code = 0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.slices: list[FileSlice] = []
        self.aborted = None


def _read_all(
    broker, request, replica_id: int, denied: set[str] | None = None, topics: list | None = None
) -> tuple[list[tuple[str, list[PartitionData]]], int, bool]:
    """One pass over ``topics`` (default: the request's); returns (results, bytes, any_error).

    Results name each topic by its ``key`` when it has one (a topic id from v13), else by name.
    """
    replicas = broker.replica_manager
    read_committed = replica_id < 0 and field_value(request, "isolation_level", 0) == 1
    asked = request.max_bytes if field_value(request, "max_bytes") is not None else 2**31 - 1
    # the broker's fetch.max.bytes caps a consumer's response, as in Kafka (a follower's own max_bytes is
    # its replica.fetch.response.max.bytes)
    remaining = asked if replica_id >= 0 else min(asked, broker.config.fetch_max_bytes)
    total = 0
    any_error = False
    results = []
    for topic in request.topics if topics is None else topics:
        name = topic.topic
        partitions = []
        for wanted in topic.partitions:
            data = PartitionData(wanted.partition, wanted.fetch_offset)
            if name is None:  # a topic id this broker does not know
                data.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                any_error = True
                partitions.append(data)
                continue
            if denied and name in denied:
                data.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                any_error = True
                partitions.append(data)
                continue
            try:
                partition = replicas.leader_partition(name, wanted.partition)
                partition.check_leader_epoch(field_value(wanted, "current_leader_epoch", -1))
                if replica_id >= 0:
                    if replica_id not in partition.replicas or replica_id not in broker.metadata.brokers:
                        raise NotLeaderError(
                            f"{replica_id} is not a live replica of {name}-{wanted.partition}; "
                            "only brokers may fetch with a replica id"
                        )
                    # a session's entry links the follower's fetches of it that the leader skips
                    fetched = wanted if type(wanted) is fetch_session.CachedPartition else None
                    replicas.record_follower_fetch(partition, replica_id, wanted.fetch_offset, fetched)
                limit = min(wanted.partition_max_bytes, remaining)
                # replication throttle: an out-of-sync follower of a throttled partition (a move)
                quota = replicas.quotas.leader_quota(partition, replica_id) if replica_id >= 0 else None
                if quota is not None:
                    limit = min(limit, quota.allowance())  # 0 while spent; else at least one batch
                read = partition.read(
                    wanted.fetch_offset,
                    limit,
                    for_replica=replica_id >= 0,
                    min_one_message=(total == 0 or quota is not None) and (quota is None or limit > 0),
                    read_committed=read_committed,
                )
                if quota is not None:
                    quota.record(read.data.size)
                data.high_watermark = read.high_watermark
                data.last_stable_offset = read.last_stable_offset
                data.log_start_offset = read.log_start_offset
                data.slices = read.data.slices
                data.aborted = read.aborted
                size = read.data.size
                total += size
                _count_read(broker.stats, name, replica_id, size)
                remaining = max(0, remaining - size)
            except (KafkaError, ValueError) as exc:
                data.error_code = error_from_exception(exc)[0]
                any_error = True
                log_ = replicas.partitions.get((name, wanted.partition))
                if log_ is not None:
                    broker.stats.topic(name).failed_fetch += 1
                if log_ is not None and data.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    # A replica that does not lead (a follower, or a leader fenced from ZooKeeper)
                    # answers -1, as Kafka does: its watermark lags the leader's, and librdkafka
                    # caches the watermark of every partition answer, errors included, so a
                    # consumer's lag and watermark would step back.
                    data.high_watermark = log_.log.high_watermark
                    data.last_stable_offset = log_.log.last_stable_offset
                    data.log_start_offset = log_.log.log_start_offset
            partitions.append(data)
        results.append((getattr(topic, "key", name), partitions))
    return results, total, any_error


def _copy_into(parts: list, slices: list[FileSlice], size: int) -> bool:
    """Append the slices' bytes to ``parts``; False (nothing appended) if the file came up short
    or could not be read (the slices then go as before, and the connection reports it)."""
    try:
        read = [os.pread(s.fd, s.length, s.position) for s in slices]
    except OSError:
        return False
    if sum(len(b) for b in read) != size:
        return False
    parts.extend(read)
    return True


def _count_read(stats, topic: str, replica_id: int, size: int) -> None:
    """BrokerTopicMetrics: follower reads are replication bytes, consumer reads BytesOut.

    A long poll's pass that found less than min_bytes and waited again counts its bytes again;
    with fetch.min.bytes=1 (every client's default) a pass with data is always the one sent.
    """
    if replica_id >= 0:
        stats.replication_bytes_out += size
    else:
        counters = stats.topic(topic)
        counters.fetch_requests += 1
        counters.bytes_out += size


def handle(ctx, request):
    broker = ctx.broker
    version = ctx.api_version
    replica_id = request.replica_state.replica_id if version >= 15 else field_value(request, "replica_id", -1)
    session = fetch_session.new_context(
        broker.fetch_sessions, request, replica_id, version >= 13, broker.topic_name_by_id
    )
    if session.error_code:
        return encode_response([], version, session.error_code)
    denied = fetch_denials(ctx, _Topics(session.watch_keys()), replica_id) if broker.authorizer is not None else None
    results, total, any_error, news = _read_pass(broker, request, replica_id, denied, session)
    max_wait_ms = millis(request.max_wait)
    if total >= request.min_bytes or max_wait_ms <= 0 or any_error or session.empty:
        return _finish(broker, session, results, version, ctx)
    return _long_poll(broker, request, replica_id, max_wait_ms, version, denied, session, ctx, news)


class _Topics:
    """The topics a pass reads, as the authorizer reads a request's (``.topics[i].topic``)."""

    __slots__ = ("topics",)

    def __init__(self, keys: list[tuple[str, int]]):
        self.topics = [_Named(name) for name in dict.fromkeys(name for name, _ in keys)]


class _Named:
    __slots__ = ("topic",)

    def __init__(self, topic: str):
        self.topic = topic


def _read_pass(broker, request, replica_id: int, denied, session):
    """Read what the session context says; (results, bytes, any_error, news for a follower)."""
    topics = session.plan(
        broker.replica_manager, replica_id >= 0, replica_id < 0 and field_value(request, "isolation_level", 0) == 1
    )
    # Partitions a session holds idle are neither read nor recorded: their follower fetched them
    # at the leader's log end, which the follower's state learns through its session entry.
    results, total, any_error = _read_all(broker, request, replica_id, denied, topics)
    return results, total, any_error, session.incremental and session.news(results)


def _finish(broker, session, results, version: int, ctx=None) -> RawResponse:
    results, session_id = session.finish(session.topics, results, broker.replica_manager)
    return encode_response(results, version, session_id=session_id, ctx=ctx)


async def _long_poll(
    broker, request, replica_id: int, max_wait_ms: int, version: int, denied, session, ctx=None, news=False
) -> RawResponse:
    """Wait for data, woken by appends. Each pass re-reads before waiting, so an append that
    lands between the handler's first read and this coroutine starting is not missed.

    ``news`` (the handler's pass found a follower's HW moved) starts FOLLOWER_HW_LINGER_S."""
    now = time.monotonic()
    deadline = now + max_wait_ms / 1000
    answer_news_by = now + FOLLOWER_HW_LINGER_S if news else None
    keys = session.watch_keys()
    purgatory = broker.replica_manager.purgatory
    while True:
        results, total, any_error, news = _read_pass(broker, request, replica_id, denied, session)
        now = time.monotonic()
        wait_s = deadline - now
        if news:
            if answer_news_by is None:
                answer_news_by = now + FOLLOWER_HW_LINGER_S
            wait_s = min(wait_s, answer_news_by - now)
        if total >= request.min_bytes or any_error or wait_s <= 0:
            return _finish(broker, session, results, version, ctx)
        if not await purgatory.wait(keys, wait_s):
            results = _read_pass(broker, request, replica_id, denied, session)[0]
            return _finish(broker, session, results, version, ctx)


def encode_response(results, version: int, error_code: int = 0, session_id: int = 0, ctx=None) -> RawResponse:
    """``ctx``, the request's context, is needed only for KIP-951's leader hints (v16+)."""
    if version < 4:
        return legacy.fetch_response(results, version)
    flexible = version >= 12
    parts = [_INT32.pack(0)]  # throttle_time_ms
    if version >= 7:
        parts.append(_ERROR_AND_SESSION.pack(error_code, session_id))
    parts.append(wire.array_length(len(results), flexible))
    chunks: list = []
    copied = 0
    by_id = version >= 13
    hints = None
    for name, partitions in results:
        parts.append(name.bytes if by_id else wire.string(name, flexible))
        parts.append(wire.array_length(len(partitions), flexible))
        for data in partitions:
            parts.append(
                _PARTITION_HEAD.pack(data.index, data.error_code, data.high_watermark, data.last_stable_offset)
            )
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
                if copied + size <= COPY_RECORDS_BELOW and _copy_into(parts, data.slices, size):
                    copied += size
                else:
                    chunks.append(b"".join(parts))
                    chunks.extend(data.slices)
                    parts = []
            if flexible:
                if (
                    data.error_code in leader_hints.FETCH_HINTED
                    and ctx is not None
                    and version >= leader_hints.FETCH_HINT_VERSION
                ):
                    hints = hints or leader_hints.LeaderHints(ctx)
                    parts.append(hints.fetch_partition_tags(name, data.index))
                else:
                    parts.append(wire.NO_TAGS)
        if flexible:
            parts.append(wire.NO_TAGS)
    if flexible:
        parts.append(hints.response_tags() if hints is not None else wire.NO_TAGS)
    chunks.append(b"".join(parts))
    return RawResponse(chunks)
