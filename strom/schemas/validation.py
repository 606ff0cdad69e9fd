"""Schema id validation of produced records (Confluent Server's ``confluent.value.schema.validation``).

A topic with ``confluent.value.schema.validation`` (or ``.key.``, or Redpanda's
``redpanda.value.schema.id.validation``) accepts a batch only when every record's value (key)
starts with Confluent's wire format prefix, magic byte 0 then a 4-byte big-endian schema id, the
id is one the Schema Registry knows, and it is registered under the subject the topic's
``confluent.value.subject.name.strategy`` names: ``<topic>-value`` (TopicNameStrategy), the
record name (RecordNameStrategy: an Avro record's full name, a JSON schema's ``title``, the
full name of the Protobuf message the record's message indexes name) or ``<topic>-<record name>``
(TopicRecordNameStrategy). Any schema type: only the prefix is read, as Confluent Server checks
ids, not bodies; with a record-name strategy a Protobuf id's prefix runs on over its message
indexes (strom.schemas.protobuf_indexes), and a record whose indexes are malformed or name no
message fails. Otherwise the batch is refused whole with INVALID_RECORD and each
failing record named by its index (KIP-467); nothing of it is written. A null value or key (a
tombstone) passes: there is nothing to decode.

The registry's view is this broker's (``SchemaIdView``): a dictionary of id -> subjects built from
its replica of ``_schemas``, so a record costs a lookup, never a request. Only topics with
validation on read their records; a compressed batch is decompressed (bounded by the topic's
max.message.bytes, as the log validator bounds it).

Two walks, because the records of a batch nearly always carry one or two prefixes and pass:
``_scan``, the fast one, hops from record to record checking that each value (key) starts with a
prefix already judged good in this batch, decoding only the varints between a record's start and
its value, and stops at the first record it cannot vouch for (a new prefix, a null where it does
not expect one, a varint longer than it unrolls, anything malformed). A new prefix that passes is
added to the good ones and the walk goes on from that record; anything else sends the batch to
``_prefixes``, the full walk, which names every failing record and raises the structure errors.
The fast walk accepts only what the full one accepts, so the verdict and its messages do not
depend on which walk ran. With 65-byte records the fast walk costs about half of the full one
(0.41 against 0.85 µs of CPU a record).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from strom.protocol.compression import CompressionError, DecompressedTooLargeError
from strom.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    NotEnoughReplicasError,
    RecordTooLargeError,
    RecordValidationError,
)
from strom.protocol.records import BatchHeader, batch_records_payload, decode_varint, iter_batch_headers
from strom.schemas import protobuf_indexes
from strom.storage.log_config import LogConfig

MAGIC = 0
PREFIX_SIZE = 5
MAX_NAMED = 100  # record errors named in a response (a 10,000-record batch names its first hundred)


class SchemaIdView(Protocol):
    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None: ...

    def record_name_of_id(self, schema_id: int) -> str | None: ...

    def is_protobuf_id(self, schema_id: int) -> bool: ...

    def message_name_of_id(self, schema_id: int, indexes: tuple[int, ...]) -> str | None: ...

    def reading_behind(self) -> bool: ...


Extender = Callable[[bytes, int, int], int]  # (payload, value start, value end) -> its prefix's length
RECORD_NAME_STRATEGIES = ("RecordNameStrategy", "TopicRecordNameStrategy")


def _extenders(config: LogConfig, view: SchemaIdView) -> tuple[Extender | None, Extender | None]:
    """Per side, what extends a prefix over a Protobuf record's message indexes: only where a
    record-name strategy needs the record's message."""
    out: list[Extender | None] = []
    for enabled, strategy in (
        (config.key_schema_validation, config.key_subject_name_strategy),
        (config.value_schema_validation, config.value_subject_name_strategy),
    ):
        named = enabled and strategy.rsplit(".", 1)[-1] in RECORD_NAME_STRATEGIES
        out.append(protobuf_indexes.extender(view.is_protobuf_id) if named else None)
    return out[0], out[1]


def check_records(topic: str, config: LogConfig, records: bytes | memoryview, view: SchemaIdView) -> dict[int, bytes]:
    """Raise RecordValidationError naming every record whose value (key) fails the topic's rule.

    Records are not decoded: each one's key and value are found by their lengths and only their
    first 5 bytes are kept; the verdict on each distinct prefix is computed once per batch (a
    batch mostly repeats one or two ids), and records are named only when some prefix fails.
    Returns the records sections of the compressed batches, decompressed, by each batch's position
    in ``records``: the log's own checks read them next and need not decompress them again."""
    errors: list[tuple[int, str | None]] = []
    failed = first_index = 0
    decompressed: dict[int, bytes] = {}
    extend = _extenders(config, view)
    for header in iter_batch_headers(records):
        if header.is_control:
            continue
        payload = _payload(records, header, config)
        if header.compression:
            decompressed[header.position] = payload
        if _all_pass(topic, config, payload, header.records_count, view, extend):
            first_index += header.records_count
            continue
        problems = _full_walk(topic, config, payload, header.records_count, view, extend)
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
    return decompressed


def _full_walk(
    topic: str, config: LogConfig, payload: bytes, count: int, view: SchemaIdView, extend: tuple = (None, None)
) -> dict[int, str]:
    """Every failing record of a batch: its index -> why (the value's reason before the key's).
    Raises InvalidRecordError for a malformed record."""
    keys, values = _prefixes(payload, count, 0, extend)
    problems: dict[int, str] = {}
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
    return problems


def _payload(buf, header: BatchHeader, config: LogConfig) -> bytes:
    """The records section of a batch, decompressed if need be (bounded as the log validator bounds
    it: 1 KB of zstd can claim gigabytes)."""
    try:
        return batch_records_payload(buf, header, config.max_message_bytes)
    except DecompressedTooLargeError as exc:
        raise RecordTooLargeError(f"a record batch expands past max.message.bytes: {exc}") from None
    except CompressionError as exc:
        raise CorruptRecordError(f"a record batch cannot be decompressed: {exc}") from None


MAX_GOOD = 16  # prefixes judged good in one batch before the fast walk gives way to the full one


def _all_pass(
    topic: str, config: LogConfig, payload: bytes, count: int, view: SchemaIdView, extend: tuple = (None, None)
) -> bool:
    """True when every record of the batch passes, proved by the fast walk; False when the full
    walk must decide (some record fails, or the fast walk could not vouch for one)."""
    check_keys, check_values = config.key_schema_validation, config.value_schema_validation
    good_keys: tuple[bytes, ...] = ()
    good_values: tuple[bytes, ...] = ()
    index = position = 0
    while True:
        index, position = _scan(
            payload,
            count,
            index,
            position,
            good_keys if check_keys else None,
            good_values if check_values else None,
        )
        if index >= count:
            return True
        # the record the walk stopped at: a prefix not judged yet? (its structure is the full walk's to check)
        try:
            (key,), (value,) = _prefixes(payload, 1, position, extend)
        except InvalidRecordError:
            return False
        learned = False
        for side, enabled, prefix, strategy in (
            ("key", check_keys, key, config.key_subject_name_strategy),
            ("value", check_values, value, config.value_subject_name_strategy),
        ):
            good = good_keys if side == "key" else good_values
            if not enabled or prefix is None or prefix in good:
                continue
            # a prefix over Protobuf message indexes is left to the full walk: one startswith here
            # could match a short value's bytes and the next record's (the walk does not bound it)
            too_long = len(prefix) > PREFIX_SIZE
            if too_long or len(good) >= MAX_GOOD or _problem(topic, side, strategy, prefix, view) is not None:
                return False
            if side == "key":
                good_keys += (prefix,)
            else:
                good_values += (prefix,)
            learned = True
        if not learned:  # the walk stopped for another reason (a long varint, a malformed record)
            return False


def _scan(
    p: bytes,
    count: int,
    index: int,
    position: int,
    keys: tuple[bytes, ...] | None,
    values: tuple[bytes, ...] | None,
) -> tuple[int, int]:
    """Walk records ``index`` .. ``count`` - 1 from ``position`` while each one's key (value) is
    null or starts with one of ``keys`` (``values``; None: not checked) and lies in its record;
    returns where the walk stopped (``count`` when it went through).

    The hot loop: per record, the length (one or two bytes), the attributes byte, the timestamp
    and offset deltas (one or two bytes each), the key's length (and the key), the value's length
    and one startswith. Anything longer or stranger stops the walk, for the full one to judge."""
    end = len(p)
    starts = p.startswith
    try:
        for index in range(index, count):  # the walk resumes where it stopped
            byte = p[position]
            if byte < 0x80:
                limit = position + 1 + (byte >> 1)
                cursor = position + 2  # past the length and the attributes byte
            else:
                second = p[position + 1]
                if second >= 0x80:  # records of 8 KB and more: the full walk's per-record cost is small beside them
                    return index, position
                limit = position + 2 + (((byte & 0x7F) | (second << 7)) >> 1)
                cursor = position + 3
            if byte & 1 or limit > end:  # a negative length, or a record past the batch
                return index, position
            # the timestamp delta and the offset delta (three bytes: past 8,191 records), skipped
            if p[cursor] < 0x80:
                cursor += 1
            elif p[cursor + 1] < 0x80:
                cursor += 2
            elif p[cursor + 2] < 0x80:
                cursor += 3
            else:
                return index, position
            if p[cursor] < 0x80:
                cursor += 1
            elif p[cursor + 1] < 0x80:
                cursor += 2
            elif p[cursor + 2] < 0x80:
                cursor += 3
            else:
                return index, position
            # the key
            byte = p[cursor]
            if byte == 1:  # null
                cursor += 1
            else:
                if byte & 1:
                    return index, position
                if byte < 0x80:
                    size = byte >> 1
                    cursor += 1
                else:
                    second = p[cursor + 1]
                    if second >= 0x80:
                        return index, position
                    size = ((byte & 0x7F) | (second << 7)) >> 1
                    cursor += 2
                if keys is not None and (size < 5 or not starts(keys, cursor)):
                    return index, position
                cursor += size
            # the value
            byte = p[cursor]
            if byte == 1:  # null
                cursor += 1
            else:
                if byte & 1:
                    return index, position
                if byte < 0x80:
                    size = byte >> 1
                    cursor += 1
                else:
                    second = p[cursor + 1]
                    if second >= 0x80:
                        return index, position
                    size = ((byte & 0x7F) | (second << 7)) >> 1
                    cursor += 2
                if values is not None and (size < 5 or not starts(values, cursor)):
                    return index, position
                cursor += size
            if cursor > limit:  # a key or value past its record
                return index, position
            position = limit
    except IndexError:
        return index, position
    return count, position


def _prefixes(
    payload: bytes, count: int, position: int = 0, extend: tuple[Extender | None, Extender | None] = (None, None)
) -> tuple[list[bytes | None], list[bytes | None]]:
    """The first 5 bytes (fewer if shorter; None if null; more where ``extend`` says, a Protobuf
    record's message indexes) of the key and value of each of ``count`` records from ``position``.

    The full walk: varints of one byte are read inline, longer ones by decode_varint."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    end = len(payload)
    varint = decode_varint
    extend_key, extend_value = extend
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
                take = size if size < PREFIX_SIZE else PREFIX_SIZE
                if extend_key is not None and take == PREFIX_SIZE:
                    take = extend_key(payload, cursor, min(cursor + size, limit))
                keys.append(payload[cursor : cursor + take])
                cursor += size
            byte = payload[cursor]
            if byte < 0x80:
                size, cursor = (byte >> 1) ^ -(byte & 1), cursor + 1
            else:
                size, cursor = varint(payload, cursor, limit)
            if size < 0:
                values.append(None)
            else:
                take = size if size < PREFIX_SIZE else PREFIX_SIZE
                if extend_value is not None and take == PREFIX_SIZE:
                    take = extend_value(payload, cursor, min(cursor + size, limit))
                values.append(payload[cursor : cursor + take])
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
    """Why a value (key) starting with ``data`` (its first 5 bytes at most, or with a record-name
    strategy a Protobuf id's message indexes too) fails, or None."""
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
        if view.is_protobuf_id(schema_id):
            try:
                name: str | None = protobuf_indexes.record_name(data, schema_id, view.message_name_of_id)
            except protobuf_indexes.MalformedIndexes as exc:
                return f"the {side} with schema id {schema_id}: {exc}"
        else:
            name = view.record_name_of_id(schema_id)
        if name is None:
            return (
                f"the {side}'s schema id {schema_id} has no record name (an Avro record, a JSON schema's "
                f"title, a Protobuf message), which {short} needs"
            )
        subject = name if short == "RecordNameStrategy" else f"{topic}-{name}"
    if subject in subjects:
        return None
    # the subject may be a registration this broker reads only now (reading_behind reads what its
    # replica committed since), or has not read yet
    behind = view.reading_behind()
    if subject in (view.subjects_of_id(schema_id) or ()):
        return None
    if behind:
        raise NotEnoughReplicasError(
            f"the {side}'s schema id {schema_id} is not under subject {subject!r} in this broker's view of "
            "the Schema Registry, which is still reading committed registrations; retry"
        )
    return f"the {side}'s schema id {schema_id} is not registered under subject {subject!r}"
