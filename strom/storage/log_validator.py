"""Record-level checks of a producer's batches, as Kafka's LogValidator makes them.

The leader's append checks every batch header already (length, magic, CRC-32C, size, record
count against lastOffsetDelta, see ``validate_batches``). This module reads inside batches, and
only where Kafka's rules need it, so a plain topic receiving uncompressed batches never pays for
a record walk:

- a compressed batch is decompressed, never past max.message.bytes (a batch that would expand
  further is refused with MESSAGE_TOO_LARGE before that much is allocated: 1 KB of zstd can
  claim gigabytes), and its records hopped over by their lengths: the count
  and the framing must match the header (INVALID_RECORD otherwise, as Kafka's record iterator
  refuses them), and inner offsets that are not 0, 1, 2 ... are rewritten, as Kafka does for old
  clients that number them wrongly;
- on a compacted topic, or on a CreateTime topic with timestamp bounds (KIP-937), every record
  is read: a record without a key, or with a timestamp out of bounds, fails the whole batch with
  INVALID_RECORD or INVALID_TIMESTAMP, and the culprits are named by their index in the batch
  (ProduceResponse record_errors, KIP-467);
- a producer batch that claims LogAppendTime is refused on a LogAppendTime topic, as in Kafka.

Nothing is written when a check fails: the caller validates before it assigns offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.protocol.compression import CompressionError, DecompressedTooLargeError
from strom.protocol.errors import CorruptRecordError, ErrorCode, RecordTooLargeError, RecordValidationError
from strom.protocol.records import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    batch_records_payload,
    decode_batch_records,
    first_offset_gap,
    rebuild_batch,
    scan_records,
    validate_batches,
)
from strom.storage.log_config import LogConfig

if TYPE_CHECKING:
    from strom.protocol.records import ByteSource, Record

_INT64_MASK = (1 << 64) - 1


def needs_record_walk(config: LogConfig, headers: list[BatchHeader]) -> bool:
    """The per-append test that keeps the hot path per batch: any per-record rule to apply?"""
    if config.record_checks:
        return True
    for header in headers:
        if header.attributes & 0x0F:  # a codec (bits 0-2) or the LogAppendTime flag (bit 3)
            return True
    return False


def validate_records(
    buf: ByteSource,
    headers: list[BatchHeader],
    config: LogConfig,
    topic_partition: str,
    now_ms: int,
    decompressed: dict[int, bytes] | None = None,
) -> tuple[bytearray | None, list[BatchHeader]]:
    """Check the records of a producer's batches; returns (rebuilt record set or None, its headers).

    ``decompressed``: records sections of compressed batches that the caller has decompressed
    already (with the same max.message.bytes bound), by the batch's position in ``buf``.

    Raises RecordValidationError naming the failed records of the first batch that has any,
    InvalidRecordError when records disagree with their header, CorruptRecordError when a batch
    cannot be decompressed.
    """
    rebuilt: list[bytes | None] = [None] * len(headers)
    for index, header in enumerate(headers):
        known = decompressed.get(header.position) if decompressed else None
        if _validate_batch(buf, header, config, topic_partition, now_ms, known):
            records = decode_batch_records(buf, header)
            rebuilt[index] = rebuild_batch(header, [_renumbered(header, record, i) for i, record in enumerate(records)])
    if not any(rebuilt):
        return None, headers
    out = bytearray()
    for header, batch in zip(headers, rebuilt):
        out += batch if batch is not None else buf[header.position : header.position + header.size]
    return out, validate_batches(out, None)


def _renumbered(header: BatchHeader, record: Record, index: int) -> Record:
    record.offset = header.base_offset + index
    return record


def _validate_batch(
    buf: ByteSource,
    header: BatchHeader,
    config: LogConfig,
    topic_partition: str,
    now_ms: int,
    decompressed: bytes | None = None,
) -> bool:
    """Check one batch; True when its inner offsets must be renumbered."""
    payload: ByteSource
    log_append_time = bool(header.attributes & TIMESTAMP_TYPE_MASK)
    read_all = config.record_checks or log_append_time
    if header.compression:
        payload = decompressed if decompressed is not None else _decompress(buf, header, config, topic_partition)
        start, end = 0, len(payload)
        if not read_all:
            return first_offset_gap(payload, start, end, header.records_count) >= 0
    elif read_all:
        payload, start, end = buf, header.position + BATCH_HEADER_SIZE, header.position + header.size
    else:
        return False
    summaries = scan_records(payload, start, end, header.records_count)
    errors: list[tuple[int, str | None]] = []
    timestamp_errors = False
    compact = config.compact
    create_time = config.message_timestamp_type == "CreateTime"
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    for index, record in enumerate(summaries):
        if compact and record.key_length < 0:
            errors.append(
                (index, f"Compacted topic cannot accept message without key in topic partition {topic_partition}")
            )
            continue
        timestamp = header.max_timestamp if log_append_time else header.base_timestamp + record.timestamp_delta
        if create_time and timestamp != -1:
            if now_ms - timestamp > before or timestamp - now_ms > after:
                timestamp_errors = True
                errors.append(
                    (
                        index,
                        f"Timestamp {timestamp} of message with offset "
                        f"{header.base_offset + record.offset_delta} is out of range. The timestamp "
                        f"should be within [{_java_long(now_ms - before)}, "
                        f"{_java_long(now_ms + after)}]",
                    )
                )
        elif log_append_time:
            timestamp_errors = True
            errors.append(
                (
                    index,
                    f"Invalid timestamp type in message {_describe(buf, header, index)}. "
                    "Producer should not set timestamp type to LogAppendTime.",
                )
            )
    if errors:
        raise _rejection(errors, timestamp_errors)
    if header.compression:
        return any(record.offset_delta != index for index, record in enumerate(summaries))
    return False


def _decompress(buf: ByteSource, header: BatchHeader, config: LogConfig, topic_partition: str) -> bytes:
    """A compressed batch's records section. A batch's records may not expand past
    max.message.bytes: a 1 KB zstd batch can claim gigabytes, and the bound stops the
    decompressor before it allocates them."""
    try:
        return batch_records_payload(buf, header, config.max_message_bytes)
    except DecompressedTooLargeError as exc:
        raise RecordTooLargeError(
            f"record batch at offset {header.base_offset} of {topic_partition} expands "
            f"past max.message.bytes ({config.max_message_bytes}): {exc}"
        ) from None
    except CompressionError as exc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} of {topic_partition} cannot be decompressed: {exc}"
        ) from None


def _rejection(errors: list[tuple[int, str | None]], timestamp_errors: bool) -> RecordValidationError:
    """Kafka's RecordValidationException: its message becomes the partition's error_message."""
    if timestamp_errors:
        return RecordValidationError(
            "One or more records have been rejected due to invalid timestamp",
            errors,
            error_code=ErrorCode.INVALID_TIMESTAMP,
        )
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in errors[:3])
    return RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]",
        errors,
    )


def _describe(buf: ByteSource, header: BatchHeader, index: int) -> str:
    """Kafka's DefaultRecord.toString, for the rare message that quotes a record."""
    record = decode_batch_records(buf, header)[index]
    return (
        f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
        f"key={len(record.key or b'')} bytes, value={len(record.value or b'')} bytes)"
    )


def _java_long(value: int) -> int:
    """Kafka computes the bounds in a Java long, which wraps: now + Long.MAX is negative there."""
    value &= _INT64_MASK
    return value - (1 << 64) if value >= 1 << 63 else value
