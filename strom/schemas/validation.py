"""Schema id validation of produced records (Confluent Server's ``confluent.value.schema.validation``).

A topic with ``confluent.value.schema.validation`` (or ``.key.``, or Redpanda's
``redpanda.value.schema.id.validation``) accepts a batch only when every record's value (key)
starts with Confluent's wire format prefix, magic byte 0 then a 4-byte big-endian schema id, the
id is one the Schema Registry knows, and it is registered under the subject the topic's
``confluent.value.subject.name.strategy`` names: ``<topic>-value`` (TopicNameStrategy), the
Avro record's full name (RecordNameStrategy) or ``<topic>-<record name>``
(TopicRecordNameStrategy). Otherwise the batch is refused whole with INVALID_RECORD and each
failing record named by its index (KIP-467); nothing of it is written. A null value or key (a
tombstone) passes: there is nothing to decode.

The registry's view is this broker's (``SchemaIdView``): a dictionary of id -> subjects built from
its replica of ``_schemas``, so a record costs a lookup, never a request. Only topics with
validation on read their records; a compressed batch is decompressed (bounded by the topic's
max.message.bytes, as the log validator bounds it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from strom.protocol.compression import CompressionError, DecompressedTooLargeError
from strom.protocol.errors import CorruptRecordError, RecordTooLargeError, RecordValidationError
from strom.protocol.records import BatchHeader, Record, iter_batch_headers, iter_batch_records
from strom.storage.log_config import LogConfig

MAGIC = 0
PREFIX_SIZE = 5
MAX_NAMED = 100  # record errors named in a response (a 10,000-record batch names its first hundred)


class SchemaIdView(Protocol):
    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None: ...

    def record_name_of_id(self, schema_id: int) -> str | None: ...


def check_records(topic: str, config: LogConfig, records: bytes | memoryview, view: SchemaIdView) -> None:
    """Raise RecordValidationError naming every record whose value (key) fails the topic's rule."""
    errors: list[tuple[int, str | None]] = []
    failed = index = 0
    sides = []
    if config.value_schema_validation:
        sides.append(("value", config.value_subject_name_strategy))
    if config.key_schema_validation:
        sides.append(("key", config.key_subject_name_strategy))
    for header in iter_batch_headers(records):
        if header.is_control:
            continue
        for record in _records(records, header, config):
            for side, strategy in sides:
                problem = _problem(topic, side, strategy, record.value if side == "value" else record.key, view)
                if problem is not None:
                    failed += 1
                    if len(errors) < MAX_NAMED:
                        errors.append((index, problem))
                    break
            index += 1
    if errors:  # Kafka's RecordValidationException message, as the log validator words it
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{message}')" for i, message in errors[:3])
        raise RecordValidationError(
            f"One or more records have been rejected due to {failed} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]",
            errors,
        )


def _records(buf, header: BatchHeader, config: LogConfig) -> Iterator[Record]:
    # bounded as the log validator bounds it: 1 KB of zstd can claim gigabytes
    records = iter_batch_records(buf, header, config.max_message_bytes)
    try:
        first = next(records, None)  # the payload is decompressed here, once
    except DecompressedTooLargeError as exc:
        raise RecordTooLargeError(f"a record batch expands past max.message.bytes: {exc}") from None
    except CompressionError as exc:
        raise CorruptRecordError(f"a record batch cannot be decompressed: {exc}") from None
    if first is not None:
        yield first
        yield from records


def _problem(topic: str, side: str, strategy: str, data: bytes | None, view: SchemaIdView) -> str | None:
    if data is None:
        return None
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
            return f"the {side}'s schema id {schema_id} is not an Avro record, which {short} needs"
        subject = name if short == "RecordNameStrategy" else f"{topic}-{name}"
    if subject not in subjects:
        return f"the {side}'s schema id {schema_id} is not registered under subject {subject!r}"
    return None
