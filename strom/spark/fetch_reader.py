"""Executors' reads over the Kafka protocol itself: Fetch from the leader, whole batches to Arrow.

A client library hands records over one Message object at a time, which costs a few microseconds
a record in Python; the source spent most of its time there. This reader asks the partition's
leader for record batches (Fetch, the request every consumer sends) and decodes each batch into
columns in bulk (``strom.spark.batch_columns``). It talks to any Kafka-compatible broker over
PLAINTEXT; ``kafka_io.read_range`` keeps confluent-kafka for SSL/SASL only.

``isolation.level=read_committed`` is read here too, as Kafka's own consumer does it: Fetch and
ListOffsets carry isolation_level=1, so the leader answers only below the last stable offset
(LSO) and lists the aborted transactions overlapping what it returned; ``AbortedFilter`` then
drops the batches of those transactions, and control batches (the markers) are never rows.

One blocking connection per read, one request at a time. Every wait is bounded: connects and
reads by ``kafkaConsumer.pollTimeoutMs``, responses by MAX_RESPONSE_BYTES before they are read.
"""

from __future__ import annotations

import heapq
import logging
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from strom.protocol.api import ApiKey, request_class
from strom.protocol.codec import decode_response, encode
from strom.protocol.entities import build
from strom.protocol.errors import DecodeError, ErrorCode, InvalidRecordError
from strom.protocol.frame import request_frame, response_body_offset
from strom.protocol.records import BatchHeader, complete_batches_end, iter_batch_headers, read_control_record
from strom.spark.options import OffsetRange, SourceOptions

log = logging.getLogger("strom.spark")

FETCH_VERSION = 11  # Kafka 2.3+
LIST_OFFSETS_VERSION = 5
METADATA_VERSION = 8
FETCH_MAX_BYTES = 32 * 1024 * 1024
PARTITION_MAX_BYTES = 16 * 1024 * 1024
FETCH_MAX_WAIT_MS = 500
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
RETRY_BACKOFF_S = 0.2
_SIZE = struct.Struct(">i")
# errors after which the leader is looked up again and the fetch retried
_RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
}


class BrokerUnavailable(Exception):
    """A connection failed or a response was malformed; the reader reconnects (within its deadline)."""


class BrokerLink:
    """One blocking connection: a request goes out, its response comes back, nothing else.

    Responses are read into one buffer kept for the life of the link (it grows to the largest
    response): a fresh buffer per Fetch response cost a zeroing and a page fault per 4 KiB,
    a quarter of the reader's time. So a response, and every view into it (``Fetched.records``),
    is valid until the next request on this link; the decoders copy keys, values and headers
    out before that.
    """

    def __init__(self, host: str, port: int, timeout_s: float):
        self.address = f"{host}:{port}"
        self.timeout_s = timeout_s
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerUnavailable(f"cannot connect to {self.address}: {exc}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0
        self._buffer = bytearray(64 * 1024)

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        cls = request_class(api_key, version)
        assert cls is not None, f"kio has no request schema for api {api_key} v{version}"  # fixed versions
        body = encode(build(cls, values))
        try:
            self._sock.sendall(request_frame(api_key, version, self._correlation, b"strom-spark", body))
            (size,) = _SIZE.unpack(self._read(4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise BrokerUnavailable(f"response of {size} bytes from {self.address}")
            data = self._read(size)
            offset = response_body_offset(api_key, version, data, self._correlation)
            return decode_response(api_key, version, data, offset)
        except (OSError, DecodeError) as exc:
            self.close()
            raise BrokerUnavailable(f"request to {self.address} failed: {exc}") from None

    def _read(self, size: int) -> memoryview:
        """The next ``size`` bytes of the connection, in the link's buffer (valid until the next read)."""
        if len(self._buffer) < size:
            self._buffer = bytearray(size)
        view = memoryview(self._buffer)[:size]
        got = 0
        while got < size:
            n = self._sock.recv_into(view[got:], size - got)
            if n == 0:
                raise OSError("connection closed by the broker")
            got += n
        return view

    def close(self) -> None:
        self._sock.close()


class Fetched(NamedTuple):
    """One partition of a Fetch response: whole batches and what the leader said about the log."""

    records: memoryview
    high_watermark: int
    last_stable_offset: int  # -1 from brokers that do not know it
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset); read_committed only

    @property
    def stable_end(self) -> int:
        """Where a reader of this isolation level stops: the LSO, or the high watermark."""
        return self.last_stable_offset if self.last_stable_offset >= 0 else self.high_watermark


def read_committed(opts: SourceOptions) -> bool:
    return str(opts.client_config.get("isolation.level", "read_uncommitted")).lower() == "read_committed"


class AbortedFilter:
    """Kafka's read_committed rule for the batches of one Fetch response (its consumer's Fetcher).

    The leader lists the aborted transactions overlapping the fetched range as (producer id, first
    offset). Walking the batches in offset order, a transaction becomes "aborted" for its producer
    once a batch reaches its first offset, and stops being so at that producer's ABORT marker;
    transactional batches of a producer in between are dropped. Ranges of one producer never
    overlap (a producer has one open transaction at a time), so a set of producer ids is enough.
    A fresh filter per response is right: an aborted transaction that began before the fetch
    offset is listed too (its range overlaps), and enters the set at the first batch.
    """

    def __init__(self, aborted: list[tuple[int, int]]):
        self._upcoming = [(first_offset, producer_id) for producer_id, first_offset in aborted]
        heapq.heapify(self._upcoming)
        self._aborting: set[int] = set()

    def keep(self, records, header: BatchHeader) -> bool:
        """Whether ``header``'s batch holds rows for a read_committed reader."""
        if header.producer_id >= 0:
            while self._upcoming and self._upcoming[0][0] <= header.last_offset:
                self._aborting.add(heapq.heappop(self._upcoming)[1])
            if header.is_control:
                if header.producer_id in self._aborting and _is_abort_marker(records, header):
                    self._aborting.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in self._aborting:
                return False
        return not header.is_control


def _is_abort_marker(records, header: BatchHeader) -> bool:
    try:
        commit, _ = read_control_record(records, header)
    except InvalidRecordError:  # a control record of another type (Kafka reserves them): no marker
        return False
    return not commit


class PartitionReader:
    """Reads [start, end) of one topic-partition; yields (header, batch bytes) of data batches."""

    def __init__(self, opts: SourceOptions, topic: str, partition: int):
        self.opts = opts
        self.topic = topic
        self.partition = partition
        self.timeout_s = opts.poll_timeout_s
        self.isolation_level = 1 if read_committed(opts) else 0
        self._link: BrokerLink | None = None

    # -- connections -------------------------------------------------------------------------
    def _bootstrap_link(self) -> BrokerLink:
        errors = []
        for server in self.opts.bootstrap_servers.split(","):
            host, _, port = server.strip().rpartition(":")
            try:
                return BrokerLink(host.strip("[]"), int(port), self.timeout_s)
            except (BrokerUnavailable, ValueError) as exc:
                errors.append(str(exc))
        raise BrokerUnavailable("no bootstrap server reachable: " + "; ".join(errors))

    def _leader_link(self) -> BrokerLink:
        if self._link is not None:
            return self._link
        bootstrap = self._bootstrap_link()
        try:
            metadata = bootstrap.request(
                ApiKey.METADATA,
                METADATA_VERSION,
                {
                    "topics": [{"name": self.topic}],
                    "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False,
                },
            )
        finally:
            bootstrap.close()
        brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
        for topic in metadata.topics:
            if topic.name != self.topic:
                continue
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise PartitionGone(f"{self.topic} does not exist")
            for p in topic.partitions:
                if p.partition_index == self.partition and p.leader_id in brokers:
                    self._link = BrokerLink(*brokers[p.leader_id], self.timeout_s)
                    return self._link
        raise BrokerUnavailable(f"no leader known for {self.topic}-{self.partition}")

    def _forget_leader(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def close(self) -> None:
        self._forget_leader()

    def _call(self, what, deadline: float):
        """Run ``what(link)`` against the leader, retrying lost leaders and connections until ``deadline``."""
        while True:
            try:
                return what(self._leader_link())
            except (BrokerUnavailable, _Retry) as exc:
                self._forget_leader()
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"reading {self.topic}-{self.partition}: {exc} (for "
                        f"{self.timeout_s:.0f}s, kafkaConsumer.pollTimeoutMs)"
                    ) from None
                log.info("reading %s-%d: %s; retrying", self.topic, self.partition, exc)
                time.sleep(RETRY_BACKOFF_S)

    # -- offsets -----------------------------------------------------------------------------
    def watermarks(self) -> tuple[int, int]:
        """(earliest, latest) offsets, asked of the leader; latest is the LSO under read_committed."""
        deadline = time.monotonic() + self.timeout_s
        return (
            self._call(lambda link: self._list_offset(link, -2), deadline),
            self._call(lambda link: self._list_offset(link, -1), deadline),
        )

    def _list_offset(self, link: BrokerLink, timestamp: int) -> int:
        response = link.request(
            ApiKey.LIST_OFFSETS,
            LIST_OFFSETS_VERSION,
            {
                "replica_id": -1,
                "isolation_level": self.isolation_level,
                "topics": [
                    {
                        "name": self.topic,
                        "partitions": [
                            {"partition_index": self.partition, "current_leader_epoch": -1, "timestamp": timestamp}
                        ],
                    }
                ],
            },
        )
        for topic in response.topics:
            for p in topic.partitions:
                if p.partition_index == self.partition:
                    _check(p.error_code, self.topic, self.partition)
                    return p.offset
        raise _Retry("ListOffsets answered without the partition")

    # -- records -----------------------------------------------------------------------------
    def fetch(self, offset: int) -> Fetched:
        """One Fetch at ``offset``: whole batches, watermarks and (read_committed) aborted transactions.

        Empty records mean nothing new within FETCH_MAX_WAIT_MS. Raises OffsetOutOfRange when
        ``offset`` is no longer (or not yet) in the log.
        """
        deadline = time.monotonic() + self.timeout_s
        return self._call(lambda link: self._fetch(link, offset), deadline)

    def _fetch(self, link: BrokerLink, offset: int) -> Fetched:
        response = link.request(
            ApiKey.FETCH,
            FETCH_VERSION,
            {
                "replica_id": -1,
                "max_wait": FETCH_MAX_WAIT_MS,
                "min_bytes": 1,
                "max_bytes": FETCH_MAX_BYTES,
                "isolation_level": self.isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": self.topic,
                        "partitions": [
                            {
                                "partition": self.partition,
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "log_start_offset": -1,
                                "partition_max_bytes": PARTITION_MAX_BYTES,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        if response.error_code != ErrorCode.NONE:
            raise _Retry(f"Fetch failed: {response.error_code.name}")
        for topic in response.responses:
            for p in topic.partitions:
                if p.partition_index != self.partition:
                    continue
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise OffsetOutOfRange(p.log_start_offset, p.high_watermark)
                _check(p.error_code, self.topic, self.partition)
                records = memoryview(p.records if p.records is not None else b"")
                whole, _ = complete_batches_end(records)
                aborted = [(a.producer_id, a.first_offset) for a in (p.aborted_transactions or ())]
                return Fetched(records[:whole], p.high_watermark, p.last_stable_offset, p.log_start_offset, aborted)
        raise _Retry("Fetch answered without the partition")


class OffsetOutOfRange(Exception):
    def __init__(self, log_start_offset: int, high_watermark: int):
        super().__init__(f"offset out of range (log start {log_start_offset}, high watermark {high_watermark})")
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


class PartitionGone(Exception):
    """The topic or partition no longer exists."""


class _Retry(Exception):
    pass


def _check(code: ErrorCode, topic: str, partition: int) -> None:
    if code == ErrorCode.NONE:
        return
    if code in _RETRIABLE:
        raise _Retry(f"{topic}-{partition}: {code.name}")
    raise RuntimeError(f"reading {topic}-{partition}: broker answered {code.name}")


def read_batches(
    opts: SourceOptions, r: OffsetRange, on_data_loss
) -> Iterator[tuple[memoryview, list[tuple[BatchHeader, int, int]]]]:
    """Every data batch overlapping [r.start, r.end) of one topic-partition, in offset order.

    Yields one (record set, batches) per Fetch response, each batch as (header, first wanted
    offset, end offset). The record set is the reader's receive buffer: it is overwritten by the
    next fetch, so the caller copies what it keeps out of it before asking for the next response.
    ``on_data_loss(message)`` raises or warns (failOnDataLoss) when offsets of the range are gone,
    and then the wanted range shrinks to what is left. The caller cuts batches to the wanted
    range: a fetch returns whole batches, which may begin before it (or, after deleted records,
    hold them). Control batches never come out; under read_committed neither do batches of
    aborted transactions, and the range was planned below the LSO (the driver's ListOffsets asks
    for it).
    """
    reader = PartitionReader(opts, r.topic, r.partition)
    try:
        try:
            low, high = reader.watermarks()
        except PartitionGone as exc:  # the topic was deleted
            on_data_loss(str(exc))
            return
        start, end = r.start, r.end
        if start < low:
            on_data_loss(
                f"Offsets {start}..{min(low, end) - 1} of {r.topic}-{r.partition} were deleted "
                f"(earliest available offset is {low})"
            )
            start = low
        if high < end:
            on_data_loss(f"{r.topic}-{r.partition} ends at offset {high}, before the planned end {end}")
            end = high
        position = start
        deadline = time.monotonic() + opts.poll_timeout_s
        while position < end:
            try:
                fetched = reader.fetch(position)
            except OffsetOutOfRange:
                low, _ = reader.watermarks()
                on_data_loss(
                    f"Offset {position} of {r.topic}-{r.partition} was deleted while reading "
                    f"(earliest available offset is now {low})"
                )
                if low >= end:
                    return
                position = max(low, position)
                continue
            records = fetched.records
            committed = AbortedFilter(fetched.aborted) if reader.isolation_level else None
            moved = False
            wanted: list[tuple[BatchHeader, int, int]] = []
            for header in iter_batch_headers(records):
                next_offset = header.base_offset + header.last_offset_delta + 1
                keep = committed.keep(records, header) if committed is not None else not header.is_control
                if next_offset <= position:
                    continue  # a batch before the position (fetches start at the batch holding it)
                if keep:
                    wanted.append((header, position, end))
                position = next_offset
                moved = True
                if position >= end:
                    break
            if wanted:
                yield records, wanted
            if moved:
                deadline = time.monotonic() + opts.poll_timeout_s
            elif fetched.stable_end <= position:
                # the rest of the range is gone (records at the end aborted or compacted away)
                break
            elif time.monotonic() > deadline:
                raise TimeoutError(
                    f"no records from {r.topic}-{r.partition} at offset {position} for "
                    f"{opts.poll_timeout_s:.0f}s (kafkaConsumer.pollTimeoutMs); range {start}..{end}"
                )
    finally:
        reader.close()
