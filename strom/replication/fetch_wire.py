"""A follower's Fetch (v12), request encoded and response decoded by hand.

A follower sends one Fetch per round trip of replication, and with acks=all each produced batch
waits for two of them per follower; building kio's request objects and walking its schemas
cost more than the rest of the round trip. The request bytes are the same as kio's (the tests
compare them): flexible version, so compact arrays and strings and empty tagged-field sections;
``last_fetched_epoch`` is -1 (not sent, as before) and the tagged ``cluster_id`` is left out.
The response decoder reads what a follower uses and skips the rest (tagged fields included),
bounds-checked: a short or malformed response raises DecodeError, never reads past the frame.
Records stay a memoryview of the frame.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from strom.protocol.errors import DecodeError

VERSION = 12

_HEAD = struct.Struct(">iiiibii")  # replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session
_PARTITION = struct.Struct(">iiqiqi")  # partition, current epoch, fetch offset, last epoch, log start, max bytes
_INT32 = struct.Struct(">i")
_NO_TAGS = b"\x00"
_NO_LAST_FETCHED_EPOCH = -1


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def encode_fetch(
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    session_id: int,
    session_epoch: int,
    topics: list[dict],
    forgotten: list[dict],
    rack_id: str = "",
) -> bytes:
    """The request body; ``topics`` and ``forgotten`` as the session handler builds them
    (``{"topic", "partitions": [entry, ...]}`` and ``{"topic", "partitions": [index, ...]}``)."""
    parts = [_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch)]
    parts.append(_uvarint(len(topics) + 1))
    for topic in topics:
        entries = topic["partitions"]
        parts.append(_string(topic["topic"]))
        parts.append(_uvarint(len(entries) + 1))
        for entry in entries:
            parts.append(
                _PARTITION.pack(
                    entry["partition"],
                    entry["current_leader_epoch"],
                    entry["fetch_offset"],
                    _NO_LAST_FETCHED_EPOCH,
                    entry["log_start_offset"],
                    entry["partition_max_bytes"],
                )
            )
            parts.append(_NO_TAGS)
        parts.append(_NO_TAGS)
    parts.append(_uvarint(len(forgotten) + 1))
    for topic in forgotten:
        parts.append(_string(topic["topic"]))
        parts.append(_uvarint(len(topic["partitions"]) + 1))
        parts.extend(_INT32.pack(index) for index in topic["partitions"])
        parts.append(_NO_TAGS)
    parts.append(_string(rack_id))
    parts.append(_NO_TAGS)
    return b"".join(parts)


# -- the response --------------------------------------------------------------------------------
_RESPONSE_HEAD = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, high watermark, last stable, log start
_ABORTED_SIZE = 16  # producer_id, first_offset (each entry then has its tagged fields)
_PREFERRED_SIZE = 4


class PartitionData(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None


class TopicData(NamedTuple):
    topic: str
    partitions: list[PartitionData]


class FetchResponse(NamedTuple):
    error_code: int
    session_id: int
    responses: list[TopicData]


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int):
        self.buf = buf
        self.pos = pos

    def take(self, size: int) -> int:
        """Advance past ``size`` bytes; returns where they start."""
        start = self.pos
        if size < 0 or start + size > len(self.buf):
            raise DecodeError(f"fetch response: {size} bytes wanted at {start} of {len(self.buf)}")
        self.pos = start + size
        return start

    def uvarint(self) -> int:
        buf, pos, value, shift = self.buf, self.pos, 0, 0
        while True:
            if pos >= len(buf) or shift > 28:
                raise DecodeError(f"fetch response: bad varint at {self.pos}")
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return value
            shift += 7

    def count(self) -> int:
        """A compact array's length (-1 for null), bounded by the bytes left."""
        count = self.uvarint() - 1
        if count > len(self.buf) - self.pos:
            raise DecodeError(f"fetch response: array of {count} in {len(self.buf) - self.pos} bytes")
        return count

    def skip_tags(self) -> None:
        for _ in range(self.count() + 1):
            self.uvarint()  # tag
            self.take(self.uvarint())


def decode_fetch_response(body: memoryview, offset: int = 0) -> FetchResponse:
    reader = _Reader(body, offset)
    try:
        _, error_code, session_id = _RESPONSE_HEAD.unpack_from(body, reader.take(_RESPONSE_HEAD.size))
        topics = []
        for _ in range(max(0, reader.count())):
            length = reader.uvarint() - 1
            start = reader.take(max(0, length))
            name = bytes(body[start : start + length]).decode() if length >= 0 else ""
            partitions = []
            for _ in range(max(0, reader.count())):
                index, code, high_watermark, stable, log_start = _PARTITION_HEAD.unpack_from(
                    body, reader.take(_PARTITION_HEAD.size)
                )
                aborted = reader.count()
                for _ in range(max(0, aborted)):
                    reader.take(_ABORTED_SIZE)
                    reader.skip_tags()
                reader.take(_PREFERRED_SIZE)
                size = reader.uvarint() - 1
                records = None
                if size >= 0:
                    start = reader.take(size)
                    records = body[start : start + size]
                reader.skip_tags()  # diverging epoch, current leader, snapshot id: unused here
                partitions.append(PartitionData(index, code, high_watermark, stable, log_start, records))
            reader.skip_tags()
            topics.append(TopicData(name, partitions))
        reader.skip_tags()
    except (struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"fetch response: {exc}") from None
    return FetchResponse(error_code, session_id, topics)
