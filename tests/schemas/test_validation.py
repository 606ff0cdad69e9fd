"""strom.schemas.validation on batches built here: which records it names and why, whatever the
sizes of keys, values and deltas (one- and multi-byte varints), headers, nulls and codecs."""

from __future__ import annotations

import struct

import pytest

from strom.protocol.errors import InvalidRecordError, RecordValidationError
from strom.protocol.records import NewRecord, build_batch
from strom.schemas.validation import check_records
from strom.storage.log_config import LogConfig

TOPIC = "orders"


class View:
    """Ids 1 (under orders-value), 2 (orders-key), 3 (bench.Event, a record), 4 (orders-bench.Event)."""

    subjects = {
        1: frozenset({"orders-value"}),
        2: frozenset({"orders-key"}),
        3: frozenset({"bench.Event"}),
        4: frozenset({"orders-bench.Event"}),
    }

    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None:
        return self.subjects.get(schema_id)

    def record_name_of_id(self, schema_id: int) -> str | None:
        return "bench.Event" if schema_id in (3, 4) else None


def framed(schema_id: int, body: bytes = b"\x02hi") -> bytes:
    return struct.pack(">bI", 0, schema_id) + body


def config(**overrides: str) -> LogConfig:
    return LogConfig().with_overrides({"confluent.value.schema.validation": "true", **overrides})


def named(batch: bytes, cfg: LogConfig) -> list[tuple[int, str | None]]:
    try:
        check_records(TOPIC, cfg, batch, View())
    except RecordValidationError as exc:
        return exc.record_errors
    return []


@pytest.mark.parametrize("compression", [0, 1, 3, 4])  # none, gzip, lz4, zstd
@pytest.mark.parametrize("size", [3, 200, 70_000])  # one-, two- and three-byte varints of lengths
def test_each_failing_record_is_named_whatever_the_sizes(compression, size):
    records = [
        NewRecord(framed(1, b"x" * size), key=b"k" * size, headers=[("h", b"v" * size)]),
        NewRecord(b"no prefix" + b"x" * size, timestamp=1_700_000_000_000 + 10**9),  # a multi-byte delta
        NewRecord(None, key=b"tombstone"),  # a null value passes
        NewRecord(framed(99, b"x" * size)),
        NewRecord(framed(2, b"x" * size)),  # an id of another subject
        NewRecord(b"\x00\x00"),  # shorter than a prefix
    ] + [NewRecord(framed(1)) for _ in range(100)]  # offset deltas past 63
    records.append(NewRecord(b"late"))
    batch = build_batch(records, compression=compression)
    assert named(batch, config()) == [
        (1, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
        (3, "the value's schema id 99 is not known to the Schema Registry"),
        (4, "the value's schema id 2 is not registered under subject 'orders-value'"),
        (5, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
        (106, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
    ]


def test_keys_and_values_and_the_strategies():
    both = config(**{"confluent.key.schema.validation": "true"})
    batch = build_batch(
        [
            NewRecord(framed(1), key=framed(2)),
            NewRecord(framed(1), key=b"plain"),
            NewRecord(b"plain", key=b"plain"),  # named once, for its value
            NewRecord(framed(1), key=None),
        ]
    )
    assert named(batch, both) == [
        (1, "the key has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
        (2, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)"),
    ]
    record_name = config(**{"confluent.value.subject.name.strategy": "RecordNameStrategy"})
    topic_record = config(
        **{"confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"}
    )
    batch = build_batch([NewRecord(framed(3)), NewRecord(framed(4)), NewRecord(framed(1))])
    assert named(batch, record_name) == [
        (1, "the value's schema id 4 is not registered under subject 'bench.Event'"),
        (
            2,
            "the value's schema id 1 has no record name (an Avro record, a JSON schema's title, a Protobuf "
            "message), which RecordNameStrategy needs",
        ),
    ]
    assert [index for index, _ in named(batch, topic_record)] == [0, 2]


def test_the_error_message_is_kafkas_and_a_batch_of_valid_records_passes():
    batch = build_batch([NewRecord(b"a"), NewRecord(framed(1)), NewRecord(b"b")])
    with pytest.raises(RecordValidationError) as refused:
        check_records(TOPIC, config(), batch, View())
    assert str(refused.value.message).startswith(
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        "three errors at most: [RecordError(batchIndex=0, message='the value has no schema id"
    )
    check_records(TOPIC, config(), build_batch([NewRecord(framed(1)) for _ in range(1000)]), View())


def test_a_record_running_past_its_batch_is_invalid():
    batch = bytearray(build_batch([NewRecord(framed(1), key=b"key")]))
    batch[61 + 4] = 0x7E  # the key's length (zig-zag 63) now runs past the record
    with pytest.raises(InvalidRecordError):
        check_records(TOPIC, config(), bytes(batch), View())
