"""Produce: append each partition's batches on its leader; acks=all waits for the high watermark.

The response is encoded by hand (this is the hottest request). acks=0 sends no response at all.
A batch refused for some of its records (a key missing on a compacted topic, a timestamp out of
bounds) names them in v8+'s record_errors (KIP-467), so clients fail exactly those records with
the partition's error and the rest of the batch with their own "invalid different record" error.

Transactional batches are verified first (KIP-890 part 1): a partition that holds no open
transaction of the producer asks the transaction coordinator whether the transaction added
it. Without that check, a batch sent after its transaction ended (a late retry, a zombie)
would silently open a transaction no coordinator knows, which blocks read_committed consumers
(the "hanging transaction").

From v12 a transactional batch adds its own partition (KIP-890 part 2, transactions v2): where
the partition holds no open transaction of the producer *at this epoch* (every EndTxn of v2 bumps
it), the leader asks the coordinator to add the partition instead of whether it was added; a
fenced epoch is refused there, with INVALID_PRODUCER_EPOCH.

v13 (Kafka 4.1, KIP-516) names topics by id, in the request and the response: an id this broker
does not know is answered UNKNOWN_TOPIC_ID for each of its partitions, as Kafka answers.
"""

from __future__ import annotations

import functools
import struct
import time
import uuid

from strom.cluster.features import TRANSACTION_VERSION
from strom.protocol.api import ApiKey
from strom.protocol.codec import read_uvarint
from strom.protocol.entities import millis
from strom.protocol.errors import (
    DecodeError,
    ErrorCode,
    KafkaError,
    RecordValidationError,
)
from strom.protocol.records import BATCH_HEADER_SIZE, BatchHeader
from strom.server import leader_hints, legacy, wire
from strom.server.authorization import produce_denials
from strom.server.dispatcher import RawResponse, Replicating, error_from_exception
from strom.server.refused_batches import RefusedBatches

API_KEY = ApiKey.PRODUCE
MIN_VERSION = 0  # v0-2 carry message sets (magic 0/1), converted by strom.server.legacy
# v10-12 are v9 on the wire. v10 (KIP-951): NOT_LEADER_OR_FOLLOWER carries the current leader and its
# endpoint in tagged fields (strom.server.leader_hints), so the client skips a Metadata. v11 may answer
# TRANSACTION_ABORTABLE; a transactional v12 adds its partitions to the transaction (KIP-890 part 2)
# where transaction.version 2 is finalized (clients send it in a transaction only then); below that
# it is served as v11, verified, as a client that added its partitions first expects.
MAX_VERSION = 13
IMPLICIT_ADD_SINCE_VERSION = 12
TOPIC_IDS_SINCE_VERSION = 13
# An id nobody knows still needs a name on the way through the handler: one no topic can have
# (NUL is not a legal topic character), from which the response gets the id back.
_UNKNOWN_ID_PREFIX = "\x00topic-id:"
_NO_TOPIC_ID = bytes(16)


def adds_partitions(ctx) -> bool:
    """Whether this transactional write adds its own partition (transactions v2)."""
    return ctx.api_version >= IMPLICIT_ADD_SINCE_VERSION and ctx.broker.features.level(TRANSACTION_VERSION) >= 2


_PARTITION_V3 = struct.Struct(">ihqq")
_PARTITION_V5 = struct.Struct(">ihqqq")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")
_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX_SIZE = struct.Struct(">ii")
_THROTTLE = b"\x00\x00\x00\x00"
_THROTTLE_FLEXIBLE = _THROTTLE + wire.NO_TAGS


class PartitionResult:
    __slots__ = (
        "index",
        "error_code",
        "base_offset",
        "log_append_time",
        "log_start_offset",
        "message",
        "wait_for",
        "record_errors",
    )

    def __init__(
        self,
        index: int,
        error_code: int = 0,
        base_offset: int = -1,
        log_append_time: int = -1,
        log_start_offset: int = -1,
        message: str | None = None,
        record_errors: list[tuple[int, str | None]] | tuple = (),
    ):
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self.message = message
        self.wait_for = -1  # acks=all: the offset the high watermark must pass
        self.record_errors = record_errors  # KIP-467: (index in the batch, message) of the records that failed it


def handle(ctx, request):
    if ctx.api_version >= TOPIC_IDS_SINCE_VERSION:
        _name_topics(ctx, request)
    pending = ctx.broker.replica_manager.epochs_pending
    if pending and any((name, index) in pending for name, data in request.topic_data for index, _ in data):
        return _after_epochs_durable(ctx, request)
    return _handle_now(ctx, request)


def _name_topics(ctx, request) -> None:
    """v13: each topic id becomes its name; an unknown one a placeholder refused UNKNOWN_TOPIC_ID."""
    names = ctx.broker.topic_name_by_id
    named = []
    for topic_id, partitions in request.topic_data:
        name = names(topic_id)
        if name is None:
            name = _UNKNOWN_ID_PREFIX + str(topic_id)
            for index, _ in partitions:
                request.refused[(name, index)] = ErrorCode.UNKNOWN_TOPIC_ID
        named.append((name, partitions))
    request.topic_data = named


def _topic_id(ctx, name: str) -> bytes:
    """The 16 bytes naming ``name`` in a v13 response."""
    if name.startswith(_UNKNOWN_ID_PREFIX):
        return uuid.UUID(name[len(_UNKNOWN_ID_PREFIX) :]).bytes
    info = ctx.broker.metadata.topics.get(name) if ctx is not None else None
    return info.topic_id.bytes if info is not None else _NO_TOPIC_ID  # deleted meanwhile


def _handle_now(ctx, request):
    denied = produce_denials(ctx, request) if ctx.broker.authorizer is not None else None
    if ctx.api_version < 3 and request.refused:  # message sets that failed their CRC or framing
        denied = {**request.refused, **(denied or {})}
    elif request.refused:  # v13: topic ids nobody knows, answered so whatever the ACLs (no name to check)
        denied = {**(denied or {}), **request.refused}
    if request.transactional_id is not None:
        unverified = _unverified_partitions(ctx.broker, request, adds_partitions(ctx))
        if denied:
            unverified = {tp: header for tp, header in unverified.items() if tp not in denied}
        if unverified:
            return _verify_then_append(ctx, request, unverified, denied)
    return _append_all(ctx, request, denied)


async def _after_epochs_durable(ctx, request):
    """A partition that just became leader takes appends once its new epoch is on disk (a large
    failover writes those checkpoints on a thread): the request waits, within its own timeout,
    instead of being refused, as Kafka's makeLeader makes it wait."""
    keys = [(name, index) for name, data in request.topic_data for index, _ in data]
    try:
        await ctx.broker.replica_manager.until_epochs_durable(keys, millis(request.timeout) / 1000)
    except KafkaError:
        pass  # the append below answers NOT_LEADER_OR_FOLLOWER for what is still pending
    result = _handle_now(ctx, request)
    if result is not None and not isinstance(result, RawResponse):
        result = await result  # a verification or a wait for the replicas
    return result


# Coordinator errors the producer must retry become NOT_ENOUGH_REPLICAS, as in Kafka 3.6+.
_RETRIABLE_VERIFICATION = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


_VERIFICATION_MESSAGES: dict[int, str] = {
    ErrorCode.INVALID_TXN_STATE: "the transaction has not added this partition (KIP-890 verification)",
    ErrorCode.INVALID_PRODUCER_EPOCH: "a newer instance of this transactional producer has fenced this one",
    ErrorCode.NOT_ENOUGH_REPLICAS: "the transaction coordinator could not be asked yet; retry",
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: "the transaction coordinator does not know this producer id",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "not authorized to write to this topic",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "not authorized to write with this transactional id",
    ErrorCode.UNKNOWN_TOPIC_ID: "this server does not host this topic ID",
}


def _unverified_partitions(broker, request, same_epoch: bool = False) -> dict[tuple[str, int], BatchHeader]:
    """Partitions whose transactional batch would start a transaction this leader has not seen
    (``same_epoch``, transactions v2: one open at an older epoch is an earlier transaction, whose
    markers are still on their way)."""
    found = {}
    partitions = broker.replica_manager.partitions
    for name, partition_data in request.topic_data:
        for index, records in partition_data:
            if records is None or len(records) < BATCH_HEADER_SIZE:
                continue  # the append reports it
            header = BatchHeader.parse(records, 0)
            if not header.is_transactional or header.producer_id < 0:
                continue
            partition = partitions.get((name, index))
            if partition is None or not partition.is_leader:
                continue
            state = partition.log.producer_state
            if header.producer_id not in state.ongoing:
                found[(name, index)] = header
            elif same_epoch:
                entry = state.producers.get(header.producer_id)
                if entry is None or entry.epoch != header.producer_epoch:
                    found[(name, index)] = header
    return found


async def _verify_then_append(
    ctx, request, unverified: dict[tuple[str, int], BatchHeader], denied: dict[tuple[str, int], int] | None = None
):
    first = next(iter(unverified.values()))
    codes = await ctx.broker.transaction_coordinator.verify_partitions(
        request.transactional_id,
        first.producer_id,
        first.producer_epoch,
        list(unverified),
        add=adds_partitions(ctx),
    )
    rejected = dict(denied) if denied else {}
    for tp, code in codes.items():
        if code in _RETRIABLE_VERIFICATION:
            rejected[tp] = ErrorCode.NOT_ENOUGH_REPLICAS
        elif code == ErrorCode.PRODUCER_FENCED:  # as Kafka: a partition speaks of epochs, not of fencing
            rejected[tp] = ErrorCode.INVALID_PRODUCER_EPOCH
        elif code:
            rejected[tp] = code
    result = _append_all(ctx, request, rejected)
    if result is not None and not isinstance(result, RawResponse):
        result = await result
    return result


def _append_all(ctx, request, rejected: dict[tuple[str, int], int] | None = None):
    broker = ctx.broker
    acks = request.acks
    append = broker.replica_manager.append
    results: list[tuple[str, list[PartitionResult]]] = []
    for name, partition_data in request.topic_data:
        partitions = []
        for index, records in partition_data:
            result = PartitionResult(index)
            if acks not in (0, 1, -1):
                result.error_code = ErrorCode.INVALID_REQUIRED_ACKS
            elif not records:
                result.error_code, result.message = ErrorCode.INVALID_RECORD, "produce request without records"
            elif rejected and (name, index) in rejected:
                result.error_code = rejected[(name, index)]
                result.message = _VERIFICATION_MESSAGES.get(result.error_code, "the transaction coordinator refused it")
            else:
                try:
                    info = append(name, index, records, acks)
                    result.base_offset = info.first_offset
                    result.log_append_time = info.log_append_time
                    result.log_start_offset = info.log_start_offset
                    if acks == -1:
                        result.wait_for = info.last_offset + 1
                except RecordValidationError as exc:
                    result.error_code, result.message = int(exc.error_code), exc.message
                    result.record_errors = exc.record_errors
                    partition = broker.replica_manager.partitions.get((name, index))
                    if partition is not None:
                        result.log_start_offset = partition.log.log_start_offset
                except (KafkaError, ValueError) as exc:
                    result.error_code, result.message = error_from_exception(exc)
            if result.error_code:
                _note_refusal(broker.refused_batches, name, index, records, result)
            partitions.append(result)
        results.append((name, partitions))
    if acks == 0:
        return None
    if acks == -1:
        for name, partitions in results:
            for result in partitions:
                if not _committed(broker, name, result):
                    return Replicating(
                        _await_replication(broker, results, millis(request.timeout), ctx.api_version, ctx)
                    )
    response = encode_response(results, ctx.api_version, ctx)
    # the appends may still be in the write-behind buffer: revised if their log dir fails first
    response.revise = functools.partial(
        _revise_unwritten, broker.replica_manager.offline, results, ctx.api_version, ctx
    )
    return response


def _note_refusal(refused: RefusedBatches, topic: str, index: int, records, result: PartitionResult) -> None:
    """Remember an idempotent batch refused unwritten; refuse the batch right behind it the same
    way rather than OUT_OF_ORDER_SEQUENCE_NUMBER (why: strom.server.refused_batches)."""
    if result.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
        explained = refused.explain_gap(topic, index, records)
        if explained is not None:
            result.error_code, result.message = explained
    else:
        refused.remember(topic, index, records, result.error_code)


def _revise_unwritten(offline, results, version: int, ctx=None) -> RawResponse | None:
    """KAFKA_STORAGE_ERROR for every success on a partition whose log dir failed before it was sent."""
    revised = False
    for name, partitions in results:
        for r in partitions:
            if r.error_code == 0 and (name, r.index) in offline:
                r.error_code, r.base_offset = ErrorCode.KAFKA_STORAGE_ERROR, -1
                r.message = "the log dir failed before the append reached its file"
                revised = True
    return encode_response(results, version, ctx) if revised else None


def _committed(broker, topic: str, result: PartitionResult) -> bool:
    """Whether an acks=all append is settled: replicated to the ISR, or failed."""
    if result.wait_for < 0:
        return True
    partition = broker.replica_manager.partitions.get((topic, result.index))
    if partition is None or not partition.is_leader or broker.replica_manager.fenced:
        if (topic, result.index) in broker.replica_manager.offline:
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            result.message = "the log dir failed before the append was replicated"
        else:
            result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            result.message = "leadership moved before the append was replicated"
    elif partition.log.high_watermark < result.wait_for:
        return False
    elif len(partition.isr) < partition.log.config.min_insync_replicas:
        # committed, but by fewer replicas than the topic asks for (Kafka's same answer)
        result.error_code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        result.message = f"in-sync replicas {partition.isr} are fewer than min.insync.replicas"
    result.wait_for = -1
    return True


async def _await_replication(broker, results, timeout_ms: int, version: int, ctx=None) -> RawResponse:
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
    return encode_response(results, version, ctx)


def encode_response(results: list[tuple[str, list[PartitionResult]]], version: int, ctx=None) -> RawResponse:
    """``ctx``, the request's context, is needed only for KIP-951's leader hints (v10+)."""
    if version < 3:
        return legacy.produce_response(results, version)
    flexible = version >= 9
    if not flexible and len(results) == 1 and len(results[0][1]) == 1 and results[0][1][0].error_code == 0:
        return _encode_one_partition(results[0][0], results[0][1][0], version)
    parts = [wire.array_length(len(results), flexible)]
    hints = None
    ids = version >= TOPIC_IDS_SINCE_VERSION
    for name, partitions in results:
        parts.append(_topic_id(ctx, name) if ids else wire.string(name, flexible))
        parts.append(wire.array_length(len(partitions), flexible))
        for r in partitions:
            if version >= 5:
                parts.append(
                    _PARTITION_V5.pack(r.index, r.error_code, r.base_offset, r.log_append_time, r.log_start_offset)
                )
            else:
                parts.append(_PARTITION_V3.pack(r.index, r.error_code, r.base_offset, r.log_append_time))
            if version >= 8:
                parts.append(wire.array_length(len(r.record_errors), flexible))
                for batch_index, message in r.record_errors:
                    parts.append(_I32.pack(batch_index))
                    parts.append(_text(message, flexible))
                    if flexible:
                        parts.append(wire.NO_TAGS)
                parts.append(_text(r.message if r.error_code else None, flexible))
            if flexible:
                if (
                    r.error_code in leader_hints.PRODUCE_HINTED
                    and ctx is not None
                    and version >= leader_hints.PRODUCE_HINT_VERSION
                ):
                    hints = hints or leader_hints.LeaderHints(ctx)
                    parts.append(hints.partition_tags(name, r.index))
                else:
                    parts.append(wire.NO_TAGS)
        if flexible:
            parts.append(wire.NO_TAGS)
    if hints is not None:
        parts.append(_THROTTLE + hints.response_tags())
    else:
        parts.append(_THROTTLE_FLEXIBLE if flexible else _THROTTLE)
    body = b"".join(parts)
    return RawResponse([body], len(body))


def _text(text: str | None, flexible: bool) -> bytes:
    """A nullable string, not through wire.string's cache: error messages are one-offs."""
    if text is None:
        return wire.nullable_string(None, flexible)
    data = text.encode()[:32767]  # a classic string's int16 length (messages are far shorter)
    return (wire.uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


# One topic, one partition, no error: the shape of every request from a client that sends each
# message as it comes (linger.ms=0). One pack after the cached topic prefix.
_ONE_PARTITION_V3 = struct.Struct(">iihqqi")  # partition count, partition fields, throttle
_ONE_PARTITION_V5 = struct.Struct(">iihqqqi")
_ONE_PARTITION_V8 = struct.Struct(">iihqqqihi")  # + empty record_errors, null error_message


def _encode_one_partition(name: str, r: PartitionResult, version: int) -> RawResponse:
    prefix = _ONE_TOPIC + wire.string(name, False)
    if version >= 8:
        body = prefix + _ONE_PARTITION_V8.pack(
            1, r.index, 0, r.base_offset, r.log_append_time, r.log_start_offset, 0, -1, 0
        )
    elif version >= 5:
        body = prefix + _ONE_PARTITION_V5.pack(1, r.index, 0, r.base_offset, r.log_append_time, r.log_start_offset, 0)
    else:
        body = prefix + _ONE_PARTITION_V3.pack(1, r.index, 0, r.base_offset, r.log_append_time, 0)
    return RawResponse([body], len(body))


_ONE_TOPIC = b"\x00\x00\x00\x01"


class Request:
    """A decoded Produce request; ``topic_data`` is ``[(topic, [(partition, records view), ...]), ...]``
    (v13: the topic is a UUID until the handler names it). ``refused``: partitions answered
    without an append, and why."""

    __slots__ = ("transactional_id", "acks", "timeout", "topic_data", "refused")

    def __init__(self, transactional_id, acks, timeout, topic_data):
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout = timeout
        self.topic_data = topic_data
        self.refused: dict[tuple[str, int], int] = {}


def decode(body, offset: int, version: int) -> Request | legacy.LegacyProduceRequest:
    """Produce is decoded by hand: it is the hottest request, and records must stay views.

    v3-8 use classic strings/arrays/bytes, v9 compact forms and tagged fields. As bounded as the
    generic decoder: every length and count is checked against the bytes left before use.
    """
    try:
        if version >= 9:
            return _decode_flexible(body, offset, version >= TOPIC_IDS_SINCE_VERSION)
        if version < 3:
            return legacy.decode_produce(body, offset, version)
        return _decode_classic(body, offset)
    except (struct.error, IndexError) as exc:
        raise DecodeError(f"malformed produce request: {exc}") from None


def _check(pos: int, end: int) -> None:
    if pos > end:
        raise DecodeError(f"produce request field runs past the end ({pos} > {end})")


def _decode_classic(body, pos: int) -> Request:
    end = len(body)
    (length,) = _I16.unpack_from(body, pos)
    pos += 2
    transactional_id = None
    if length >= 0:
        _check(pos + length, end)
        transactional_id = str(body[pos : pos + length], "utf-8", "replace")
        pos += length
    acks, timeout, topic_count = _ACKS_TIMEOUT_COUNT.unpack_from(body, pos)
    pos += 10
    if topic_count > (end - pos) // 6:
        raise DecodeError(f"{topic_count} topics cannot fit in {end - pos} bytes")
    topics = []
    for _ in range(topic_count):
        (length,) = _I16.unpack_from(body, pos)
        pos += 2
        if length < 0:
            length = 0
        _check(pos + length, end)
        name = str(body[pos : pos + length], "utf-8", "replace")
        pos += length
        (partition_count,) = _I32.unpack_from(body, pos)
        pos += 4
        if partition_count > (end - pos) // 8:
            raise DecodeError(f"{partition_count} partitions cannot fit in {end - pos} bytes")
        partitions = []
        for _ in range(partition_count):
            index, size = _INDEX_SIZE.unpack_from(body, pos)
            pos += 8
            records = None
            if size >= 0:
                _check(pos + size, end)
                records = body[pos : pos + size]
                pos += size
            partitions.append((index, records))
        topics.append((name, partitions))
    return Request(transactional_id, acks, timeout, topics)


def _skip_tags(body, pos: int, end: int) -> int:
    count, pos = read_uvarint(body, pos)
    for _ in range(count):
        _, pos = read_uvarint(body, pos)
        size, pos = read_uvarint(body, pos)
        pos += size
        _check(pos, end)
    return pos


def _decode_flexible(body, pos: int, topic_ids: bool = False) -> Request:
    end = len(body)
    length, pos = read_uvarint(body, pos)
    transactional_id = None
    if length > 0:
        _check(pos + length - 1, end)
        transactional_id = str(body[pos : pos + length - 1], "utf-8", "replace")
        pos += length - 1
    acks, timeout = _ACKS_TIMEOUT.unpack_from(body, pos)
    pos += 6
    topic_count, pos = read_uvarint(body, pos)
    if topic_count - 1 > end - pos:
        raise DecodeError(f"{topic_count - 1} topics cannot fit in {end - pos} bytes")
    topics = []
    for _ in range(max(0, topic_count - 1)):
        name: str | uuid.UUID
        if topic_ids:
            _check(pos + 16, end)
            name = uuid.UUID(bytes=bytes(body[pos : pos + 16]))
            pos += 16
        else:
            length, pos = read_uvarint(body, pos)
            size = max(0, length - 1)
            _check(pos + size, end)
            name = str(body[pos : pos + size], "utf-8", "replace")
            pos += size
        partition_count, pos = read_uvarint(body, pos)
        if partition_count - 1 > (end - pos) // 5:
            raise DecodeError(f"{partition_count - 1} partitions cannot fit in {end - pos} bytes")
        partitions = []
        for _ in range(max(0, partition_count - 1)):
            (index,) = _I32.unpack_from(body, pos)
            length, pos = read_uvarint(body, pos + 4)
            records = None
            if length > 0:
                _check(pos + length - 1, end)
                records = body[pos : pos + length - 1]
                pos += length - 1
            pos = _skip_tags(body, pos, end)
            partitions.append((index, records))
        pos = _skip_tags(body, pos, end)
        topics.append((name, partitions))
    return Request(transactional_id, acks, timeout, topics)
