"""Schema id validation of produced records (Confluent Server's ``confluent.value.schema.validation``).

A topic with ``confluent.value.schema.validation`` (or ``.key.``, or Redpanda's
``redpanda.value.schema.id.validation``) accepts a batch only when every record's value (key)
starts with Confluent's wire format prefix, magic byte 0 then a 4-byte big-endian schema id, the
id is one the Schema Registry knows, and it is registered under the subject the topic's
``confluent.value.subject.name.strategy`` names: ``<topic>-value`` (TopicNameStrategy), the
record name (RecordNameStrategy: an Avro record's full name, a JSON schema's ``title``, a
Protobuf schema's first message) or ``<topic>-<record name>`` (TopicRecordNameStrategy). Any
schema type: only the prefix is read (a Protobuf value's message indexes follow it unread), as
Confluent Server checks ids, not bodies. Otherwise the batch is refused whole with INVALID_RECORD and each
failing record named by its index (KIP-467); nothing of it is written. A null value or key (a
tombstone) passes: there is nothing to decode.

The registry's view is this broker's (``SchemaIdView``): a dictionary of id -> subjects built from
its replica of ``_schemas``, so a record costs a lookup, never a request. Only topics with
validation on read their records; a compressed batch is decompressed (bounded by the topic's
max.message.bytes, as the log validator bounds it).
"""

from __future__ import annotations

from typing import Protocol

from strom.protocol.compression import CompressionError, DecompressedTooLargeError
from strom.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    RecordValidationError,
)
from strom.protocol.records import BatchHeader, batch_records_payload, decode_varint, iter_batch_headers
from strom.storage.log_config import LogConfig

MAGIC = 0
PREFIX_SIZE = 5
MAX_NAMED = 100  # record errors named in a response (a 10,000-record batch names its first hundred)


class SchemaIdView(Protocol):
    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None: ...

    def record_name_of_id(self, schema_id: int) -> str | None: ...


def check_records(topic: str, config: LogConfig, records: bytes | memoryview, view: SchemaIdView) -> None:
    """Raise RecordValidationError naming every record whose value (key) fails the topic's rule.

    Records are not decoded: each one's key and value are found by their lengths and only their
    first 5 bytes are kept; the verdict on each distinct prefix is computed once per batch (a
    batch mostly repeats one or two ids), and records are named only when some prefix fails."""
    errors: list[tuple[int, str | None]] = []
    failed = first_index = 0
    for header in iter_batch_headers(records):
        if header.is_control:
            continue
        payload = _payload(records, header, config)
        keys, values = _prefixes(payload, header.records_count)
        problems: dict[int, str] = {}  # index in the batch -> why, the value's reason before the key's
        for side, strategy, prefixes, enabled in (
            ("key", config.key_subject_name_strategy, keys, config.key_schema_validation),
            ("value", config.value_subject_name_strategy, values, config.value_schema_validation),
        ):
            if not enabled:
                continue
            bad = {}
            for prefix in set(prefixes):
                if prefix is not None:
                    problem = _problem(topic, side, strategy, prefix, view)
                    if problem is not None:
                        bad[prefix] = problem
            if bad:
                for index, prefix in enumerate(prefixes):
                    if prefix in bad:
                        problems[index] = bad[prefix]
        for index in sorted(problems):
            failed += 1
            if len(errors) < MAX_NAMED:
                errors.append((first_index + index, problems[index]))
        first_index += header.records_count
    if errors:  # Kafka's RecordValidationException message, as the log validator words it
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i, message in errors[:3])
        raise RecordValidationError(
            f"One or more records have been rejected due to {failed} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]",
            errors,
        )


def _payload(buf, header: BatchHeader, config: LogConfig) -> bytes:
    """The records section of a batch, decompressed if need be (bounded as the log validator bounds
    it: 1 KB of zstd can claim gigabytes)."""
    try:
        return batch_records_payload(buf, header, config.max_message_bytes)
    except DecompressedTooLargeError as exc:
        raise RecordTooLargeError(f"a record batch expands past max.message.bytes: {exc}") from None
    except CompressionError as exc:
        raise CorruptRecordError(f"a record batch cannot be decompressed: {exc}") from None


def _prefixes(payload: bytes, count: int) -> tuple[list[bytes | None], list[bytes | None]]:
    """The first 5 bytes (fewer if shorter; None if null) of each record's key and value.

    The hot loop of validation, unrolled: varints of one byte (most lengths and deltas of small
    records) are read inline, longer ones by decode_varint."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    end = len(payload)
    position = 0
    varint = decode_varint
    try:
        for _ in range(count):
            byte = payload[position]
            if byte < 0x80:
                length, position = (byte >> 1) ^ -(byte & 1), position + 1
            else:
                length, position = varint(payload, position, end)
            limit = position + length
            if length < 0 or limit > end:
                raise InvalidRecordError("Found invalid record structure: a record runs past its batch")
            cursor = position + 1  # the attributes byte; then the timestamp and offset deltas, skipped
            if payload[cursor] < 0x80:
                cursor += 1
            else:
                cursor = varint(payload, cursor, limit)[1]
            if payload[cursor] < 0x80:
                cursor += 1
            else:
                cursor = varint(payload, cursor, limit)[1]
            byte = payload[cursor]
            if byte < 0x80:
                size, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                size, cursor = varint(payload, cursor, limit)
            if size < 0:
                keys.append(None)
            else:
                keys.append(payload[cursor : cursor + (size if size < PREFIX_SIZE else PREFIX_SIZE)])
                cursor += size
            byte = payload[cursor]
            if byte < 0x80:
                size, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                size, cursor = varint(payload, cursor, limit)
            if size < 0:
                values.append(None)
            else:
                values.append(payload[cursor : cursor + (size if size < PREFIX_SIZE else PREFIX_SIZE)])
                cursor += size
            if cursor > limit:
                raise InvalidRecordError("Found invalid record structure: a key or value runs past its record")
            position = limit
    except IndexError:  # a length pointing past the payload's end
        raise InvalidRecordError("Found invalid record structure: a record runs past its batch") from None
    except CorruptRecordError as exc:
        raise InvalidRecordError(f"Found invalid record structure: {exc}") from None
    return keys, values


def _problem(topic: str, side: str, strategy: str, data: bytes, view: SchemaIdView) -> str | None:
    """Why a value (key) starting with ``data`` (its first 5 bytes at most) fails, or None."""
    if len(data) < PREFIX_SIZE or data[0] != MAGIC:
        return f"the {side} has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"
    schema_id = int.from_bytes(data[1:PREFIX_SIZE], "big")
    subjects = view.subjects_of_id(schema_id)
    if subjects is None:
        return f"the {side}'s schema id {schema_id} is not known to the Schema Registry"
    short = strategy.rsplit(".", 1)[-1]
    if short == "TopicNameStrategy":
        subject = f"{topic}-{side}"
    else:
        name = view.record_name_of_id(schema_id)
        if name is None:
            return (
                f"the {side}'s schema id {schema_id} has no record name (an Avro record, a JSON schema's "
                f"title, a Protobuf message), which {short} needs"
            )
        subject = name if short == "RecordNameStrategy" else f"{topic}-{name}"
    if subject not in subjects:
        return f"the {side}'s schema id {schema_id} is not registered under subject {subject!r}"
    return None
