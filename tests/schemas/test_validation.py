"""strom.schemas.validation on batches built here: which records it names and why, whatever the
sizes of keys, values and deltas (one- and multi-byte varints), headers, nulls and codecs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.protocol.errors import InvalidRecordError, NotEnoughReplicasError, RecordValidationError
from strom.protocol.records import BatchHeader, NewRecord, build_batch
from strom.schemas import validation
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

    def is_protobuf_id(self, schema_id: int) -> bool:
        return False  # Protobuf ids: tests/schemas/test_protobuf_indexes.py

    def message_name_of_id(self, schema_id: int, indexes: tuple[int, ...]) -> str | None:
        return None

    def reading_behind(self) -> bool:
        return False


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


# The fast walk (validation._scan, through _all_pass) vouches for a batch only when the full walk
# (_full_walk, which names each failing record) would pass it too; checked on random batches,
# whole and with a byte changed, against the full walk and against the records decoded in full.

PREFIXES = [framed(1), framed(2), framed(3), framed(99), b"\x00\x00\x00", b"plain value", None]


def _bodies(sizes):
    return st.builds(
        lambda prefix, size: None if prefix is None else prefix + b"v" * size, st.sampled_from(PREFIXES), sizes
    )


SIZES = st.sampled_from([0, 1, 40, 60, 120, 9_000, 70_000])
RECORDS = st.lists(
    st.builds(
        NewRecord,
        _bodies(SIZES),
        key=_bodies(st.sampled_from([0, 3, 60])),
        timestamp=st.sampled_from([1_700_000_000_000, 1_700_000_000_100, 1_700_000_900_000]),
        headers=st.sampled_from([[], [("trace", b"t" * 70)]]),
    ),
    min_size=1,
    max_size=40,
)
SETTINGS = [
    {},
    {"confluent.key.schema.validation": "true"},
    {"confluent.value.subject.name.strategy": "RecordNameStrategy"},
    {"confluent.key.schema.validation": "true", "confluent.value.schema.validation": "false"},
]


def _failing(records: list[NewRecord], cfg: LogConfig) -> list[int]:
    """The records that fail, from the records decoded in full (strom.protocol.records)."""
    valid = {"key": {2}, "value": {3 if cfg.value_subject_name_strategy.endswith("RecordNameStrategy") else 1}}
    out = []
    for index, record in enumerate(records):
        for side, data, enabled in (
            ("key", record.key, cfg.key_schema_validation),
            ("value", record.value, cfg.value_schema_validation),
        ):
            if enabled and data is not None and (data[:1] != b"\x00" or int.from_bytes(data[1:5]) not in valid[side]):
                out.append(index)
                break
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(RECORDS, st.sampled_from(SETTINGS), st.sampled_from([0, 3]), st.data())
def test_the_fast_walk_vouches_only_for_what_the_full_walk_passes(records, overrides, compression, data):
    cfg = config(**overrides)
    if len(records) > 30:  # offset deltas past 63 and, with the padding below, past 8,191
        records = records + [NewRecord(framed(1)) for _ in range(9_000)]
    batch = build_batch(records, compression=compression)
    assert [index for index, _ in named(batch, cfg)] == _failing(records, cfg)[: validation.MAX_NAMED]
    payload = validation._payload(batch, BatchHeader.parse(batch, 0), cfg)
    count = len(records)
    if not _failing(records, cfg) and all(r.value is None or len(r.value) < 8_000 for r in records):
        assert validation._all_pass(TOPIC, cfg, payload, count, View())  # the fast walk did the work
    # a byte changed anywhere in the records: whatever the fast walk vouches for, the full one passes
    changed = bytearray(payload)
    position = data.draw(st.integers(0, len(changed) - 1))
    changed[position] = data.draw(st.integers(0, 255))
    if validation._all_pass(TOPIC, cfg, bytes(changed), count, View()):
        assert validation._full_walk(TOPIC, cfg, bytes(changed), count, View()) == {}


def test_batches_of_several_ids_and_nulls_take_the_fast_walk():
    both = config(**{"confluent.key.schema.validation": "true"})
    records = [NewRecord(framed(1, b"x" * (i % 90)), key=framed(2) if i % 3 else None) for i in range(2_000)]
    records[5] = NewRecord(None, key=framed(2))  # a tombstone
    batch = build_batch(records)
    payload = validation._payload(batch, BatchHeader.parse(batch, 0), both)
    view = View()
    view.subjects = {**View.subjects, 5: frozenset({"orders-value"}), 6: frozenset({"orders-value"})}
    assert validation._all_pass(TOPIC, both, payload, len(records), view)
    records[1_500] = NewRecord(framed(5))  # a second good id, first seen late in the batch
    records[1_900] = NewRecord(framed(6))
    batch = build_batch(records)
    payload = validation._payload(batch, BatchHeader.parse(batch, 0), both)
    assert validation._all_pass(TOPIC, both, payload, len(records), view)
    records[1_950] = NewRecord(framed(99))  # an unknown id: the full walk names it
    batch = build_batch(records)
    payload = validation._payload(batch, BatchHeader.parse(batch, 0), both)
    assert not validation._all_pass(TOPIC, both, payload, len(records), view)
    with pytest.raises(RecordValidationError) as refused:
        check_records(TOPIC, both, batch, view)
    assert [index for index, _ in refused.value.record_errors] == [1_950]


def test_a_short_value_is_not_read_past_its_end():
    """A 4-byte value followed by its record's header count (0) reads, past its end, as id 256."""
    view = View()
    view.subjects = {**View.subjects, 256: frozenset({"orders-value"})}
    batch = build_batch([NewRecord(framed(256)), NewRecord(b"\x00\x00\x00\x01"), NewRecord(framed(256))])
    with pytest.raises(RecordValidationError) as refused:
        check_records(TOPIC, config(), batch, view)
    assert refused.value.record_errors == [
        (1, "the value has no schema id (Confluent's prefix: magic byte 0 and a 4-byte schema id)")
    ]


def test_a_subject_the_view_may_not_have_read_yet_is_refused_retriably():
    """A replica holding registrations its view has not read (committed before this broker knows
    it): an id not under the topic's subject may be a registration a moment old, so NOT_ENOUGH_REPLICAS."""

    class Behind(View):
        def reading_behind(self) -> bool:
            return True

    with pytest.raises(NotEnoughReplicasError, match="still reading committed registrations"):
        check_records(TOPIC, config(), build_batch([NewRecord(framed(2))]), Behind())
    check_records(TOPIC, config(), build_batch([NewRecord(framed(1))]), Behind())  # under its subject: passes


def test_a_subject_the_view_reads_while_checking_passes():
    class Reading(View):
        def reading_behind(self) -> bool:  # reads the registration of id 2 under orders-value now
            self.subjects = {**View.subjects, 2: frozenset({"orders-key", "orders-value"})}
            return False

    check_records(TOPIC, config(), build_batch([NewRecord(framed(2))]), Reading())
