"""The request versions Kafka 3.9 serves and Kafka 4 removed (KIP-896), where they differ in meaning.

Most old versions are only other field sets, which the generated schemas
(strom.protocol.legacy.schema) and ``entities.build`` handle in the usual handlers. What is left
is here, reached by one version branch in each handler, so the v3+/v4+ paths stay as they are:

- Produce v0-2 carry message sets (magic 0/1): up-converted to one v2 batch per partition before
  the usual append; a set that fails its CRC or framing is refused with CORRUPT_MESSAGE.
- Fetch v0-3 answer with message sets: v0-1 in magic 0, v2-3 in magic 1, as Kafka down-converts.
  The records are read through Python (no sendfile), as Kafka gives up zero-copy there too.
- ListOffsets v0 answers a list of offsets (segment base offsets, newest first) per partition.
"""

from __future__ import annotations

import os
from typing import Any

from strom.clock import wall_ms
from strom.protocol.api import ApiKey, response_class
from strom.protocol.codec import decode_request, encode
from strom.protocol.entities import build
from strom.protocol.errors import CorruptRecordError, ErrorCode, KafkaError
from strom.protocol.legacy.records import to_message_set, to_record_batch
from strom.server.dispatcher import RawResponse, error_from_exception
from strom.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP


class LegacyProduceRequest:
    """Produce v0-2 in the shape of produce.Request, with v2 batches in place of the message sets."""

    __slots__ = ("acks", "refused", "timeout", "topic_data", "transactional_id")

    def __init__(self, acks: int, timeout: Any, topic_data: list, refused: dict[tuple[str, int], int]) -> None:
        self.transactional_id = None
        self.acks, self.timeout, self.topic_data, self.refused = acks, timeout, topic_data, refused


def decode_produce(body: Any, offset: int, version: int) -> LegacyProduceRequest:
    request = decode_request(ApiKey.PRODUCE, version, body, offset)
    refused: dict[tuple[str, int], int] = {}
    topics = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            records = data.records
            if records:
                try:
                    records = bytearray(to_record_batch(records))
                except CorruptRecordError:
                    refused[(topic.name, data.index)] = ErrorCode.CORRUPT_MESSAGE
            partitions.append((data.index, records))
        topics.append((topic.name, partitions))
    return LegacyProduceRequest(request.acks, request.timeout, topics, refused)


def produce_response(results: list, version: int) -> RawResponse:
    topics = [
        {
            "name": name,
            "partition_responses": [
                {
                    "index": r.index,
                    "error_code": r.error_code,
                    "base_offset": r.base_offset,
                    "log_append_time": None if r.log_append_time < 0 else r.log_append_time,
                }
                for r in partitions
            ],
        }
        for name, partitions in results
    ]
    body = encode(_response(ApiKey.PRODUCE, version, {"responses": topics, "throttle_time": 0}))
    return RawResponse([body], len(body))


def fetch_response(results: list, version: int) -> RawResponse:
    """Fetch v0-3: each partition's batches down-converted to the message format of the version."""
    magic = 0 if version < 2 else 1
    topics = []
    for name, partitions in results:
        answered = []
        for data in partitions:
            records = b""
            if data.slices:
                batches = b"".join(s.read() for s in data.slices)
                try:
                    records = to_message_set(batches, magic, data.fetch_offset)
                except KafkaError as exc:
                    data.error_code = error_from_exception(exc)[0]
            answered.append(
                {
                    "partition_index": data.index,
                    "error_code": data.error_code,
                    "high_watermark": data.high_watermark,
                    "records": records,
                }
            )
        topics.append({"topic": name, "partitions": answered})
    body = encode(_response(ApiKey.FETCH, version, {"responses": topics, "throttle_time": 0}))
    return RawResponse([body], len(body))


def list_offsets_v0(ctx: Any, request: Any) -> Any:
    """ListOffsets v0, as Kafka 3.9's legacyFetchOffsetsBefore: up to max_num_offsets offsets, newest first.

    The candidates are each segment's base offset (dated by its file's modification time) and the
    log end offset; -1 (latest) starts from the newest, -2 (earliest) is the log start offset,
    a time starts from the newest segment last modified at or before it. A consumer never gets an
    offset above the high watermark: offsets above it are replaced by it.
    """
    replicas = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            entry: dict[str, Any] = {"partition_index": wanted.partition_index, "error_code": 0}
            try:
                partition = replicas.leader_partition(topic.name, wanted.partition_index)
                offsets = _offsets_before(partition.log, wanted.timestamp, wanted.max_num_offsets)
                if request.replica_id < 0:
                    hw = partition.log.high_watermark
                    if any(o > hw for o in offsets):
                        offsets = [hw, *(o for o in offsets if o <= hw)]
                entry["old_style_offsets"] = offsets
            except (KafkaError, ValueError) as exc:
                entry["error_code"] = error_from_exception(exc)[0]
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return _response(ApiKey.LIST_OFFSETS, 0, {"topics": topics})


def _response(api_key: int, version: int, values: dict[str, Any]) -> Any:
    cls = response_class(api_key, version)
    assert cls is not None, f"no schema for {api_key} v{version}"  # legacy.schema has every one answered here
    return build(cls, values)


def _offsets_before(log: Any, timestamp: int, max_num_offsets: int) -> list[int]:
    candidates = []
    for segment in log.segments:
        try:
            modified = int(os.stat(segment.log_path).st_mtime * 1000)
        except OSError:
            modified = 0
        candidates.append((max(segment.base_offset, log.log_start_offset), modified))
    if log.segments and log.segments[-1].size > 0:
        candidates.append((log.log_end_offset, wall_ms()))
    if timestamp == LATEST_TIMESTAMP:
        start = len(candidates) - 1
    elif timestamp == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    return [candidates[start - j][0] for j in range(count)]
