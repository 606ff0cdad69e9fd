"""strom.schemas.protobuf_indexes: Confluent's Protobuf message indexes read and resolved to
message names, and produce-side validation with a record-name strategy on batches of Protobuf
records built here (which records it names and why; the fast walk vouches only for what the full
one passes)."""

from __future__ import annotations

import io
import struct

import pytest
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.protocol.errors import RecordValidationError
from strom.protocol.records import BatchHeader, NewRecord, build_batch
from strom.schemas import protobuf_indexes, validation
from strom.schemas.protobuf_indexes import MalformedIndexes, message_names, read
from strom.schemas.validation import check_records
from strom.storage.log_config import LogConfig

SHOP = """
syntax = "proto3";
package shop;
message Order {
  message Line { string sku = 1; }
  map<string, int32> counts = 1;
  message Note { string text = 1; }
  repeated Line lines = 2;
}
message Refund { string order = 1; }
enum Kind { A = 0; }
message Empty {}
"""


def indexes(path: list[int]) -> bytes:
    """The index bytes confluent-kafka's ProtobufSerializer writes for ``path``."""
    buf = io.BytesIO()
    ProtobufSerializer._encode_varints(buf, path)
    return buf.getvalue()


def test_paths_name_messages_as_protoc_numbers_them():
    assert message_names(SHOP) == {
        (0,): "shop.Order",
        (0, 0): "shop.Order.Line",
        (0, 1): "shop.Order.CountsEntry",  # a map field's entry, where the field is declared
        (0, 2): "shop.Order.Note",
        (1,): "shop.Refund",
        (2,): "shop.Empty",
    }
    assert message_names("message A {}") == {(0,): "A"}
    assert message_names("not a proto {") is None


@pytest.mark.parametrize("path", [[0], [1], [0, 2], [2], [300, 70000]])
def test_reads_what_the_serializer_writes(path):
    data = indexes(path) + b"body"
    assert read(data, 0, len(data)) == (tuple(path), len(data) - 4)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"", "run past its end"),
        (b"\x04\x02", "run past its end"),  # a count of 2, one index
        (b"\x01", "do not decode: -1 message indexes"),
        (b"\x02\x03", "a negative index -2"),
        (b"\x82\x01" + b"\x00" * 65, "do not decode: 65 message indexes"),
        (b"\x02" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
    ],
)
def test_malformed_indexes_are_refused(data, why):
    with pytest.raises(MalformedIndexes, match=why):
        read(data, 0, len(data))


class View:
    """Id 1: the Protobuf schema SHOP, registered under shop.Order, shop.Refund and orders-shop.Refund;
    id 2: an Avro record bench.Event under bench.Event."""

    subjects = {1: frozenset({"shop.Order", "shop.Refund", "orders-shop.Refund"}), 2: frozenset({"bench.Event"})}
    names = message_names(SHOP)

    def __init__(self) -> None:
        self.asked: list[int] = []

    def subjects_of_id(self, schema_id: int) -> frozenset[str] | None:
        return self.subjects.get(schema_id)

    def record_name_of_id(self, schema_id: int) -> str | None:
        return {1: "shop.Order", 2: "bench.Event"}.get(schema_id)

    def is_protobuf_id(self, schema_id: int) -> bool:
        self.asked.append(schema_id)
        return schema_id == 1

    def message_name_of_id(self, schema_id: int, path: tuple[int, ...]) -> str | None:
        return self.names.get(path) if schema_id == 1 else None

    def reading_behind(self) -> bool:
        return False


def framed(schema_id: int, path: list[int] | None, body: bytes = b"\x0a\x02hi") -> bytes:
    return struct.pack(">bI", 0, schema_id) + (indexes(path) if path is not None else b"") + body


RECORD_NAME = LogConfig().with_overrides(
    {"confluent.value.schema.validation": "true", "confluent.value.subject.name.strategy": "RecordNameStrategy"}
)


def named(records: list[NewRecord], cfg: LogConfig = RECORD_NAME) -> list[tuple[int, str | None]]:
    try:
        check_records("orders", cfg, build_batch(records), View())
    except RecordValidationError as exc:
        return exc.record_errors
    return []


def test_the_record_name_is_the_message_the_indexes_name():
    records = [
        NewRecord(framed(1, [0])),  # shop.Order: registered
        NewRecord(framed(1, [1])),  # shop.Refund: registered
        NewRecord(framed(1, [0, 2])),  # shop.Order.Note: not a subject
        NewRecord(framed(1, [5])),  # no message
        NewRecord(framed(1, None, b"")),  # no indexes at all
        NewRecord(framed(1, [1, 0], b"")),  # indexes running past the value (no body)
        NewRecord(framed(2, None)),  # Avro: the record name as before
        NewRecord(framed(1, [0], b"")),  # a single 0 and nothing else: the first message, empty
    ]
    assert named(records) == [
        (2, "the value's schema id 1 is not registered under subject 'shop.Order.Note'"),
        (3, "the value with schema id 1: its Protobuf message indexes [5] name no message of schema id 1"),
        (4, "the value with schema id 1: its Protobuf message indexes run past its end"),
        (5, "the value with schema id 1: its Protobuf message indexes [1, 0] name no message of schema id 1"),
    ]
    topic_record = LogConfig().with_overrides(
        {
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": "TopicRecordNameStrategy",
        }
    )
    assert [i for i, _ in named(records[:2] + records[6:7], topic_record)] == [
        0,
        2,
    ]  # orders-shop.Order, orders-bench.Event


def test_indexes_are_read_only_where_a_record_name_is_needed():
    class TopicNamesOnly(View):
        subjects = {1: frozenset({"orders-value"})}

        def is_protobuf_id(self, schema_id: int) -> bool:
            raise AssertionError("TopicNameStrategy needs no message name")

    topic_name = LogConfig().with_overrides({"confluent.value.schema.validation": "true"})
    check_records(
        "orders", topic_name, build_batch([NewRecord(framed(1, [7], b"")) for _ in range(3)]), TopicNamesOnly()
    )
    view = View()
    batch = build_batch([NewRecord(framed(1, [1])) for _ in range(50)] + [NewRecord(framed(1, [0]))])
    check_records("orders", RECORD_NAME, batch, view)
    assert view.asked.count(1) <= 3  # asked per distinct prefix, not per record


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 3]),
            st.one_of(st.none(), st.lists(st.integers(0, 3), min_size=1, max_size=3)),
            st.binary(max_size=6),
        ),
        min_size=1,
        max_size=30,
    ),
    st.data(),
)
def test_the_fast_walk_vouches_only_for_what_the_full_walk_passes(drawn, data):
    records = [NewRecord(framed(schema_id, path, body)) for schema_id, path, body in drawn]
    batch = build_batch(records)
    payload = validation._payload(batch, BatchHeader.parse(batch, 0), RECORD_NAME)
    extend = validation._extenders(RECORD_NAME, View())
    full = validation._full_walk("orders", RECORD_NAME, payload, len(records), View(), extend)
    if validation._all_pass("orders", RECORD_NAME, payload, len(records), View(), extend):
        assert full == {}
    changed = bytearray(payload)
    position = data.draw(st.integers(0, len(changed) - 1))
    changed[position] = data.draw(st.integers(0, 255))
    try:
        if validation._all_pass("orders", RECORD_NAME, bytes(changed), len(records), View(), extend):
            assert validation._full_walk("orders", RECORD_NAME, bytes(changed), len(records), View(), extend) == {}
    except Exception as exc:  # a damaged record: the full walk's structure errors, never a crash of another kind
        assert type(exc).__name__ == "InvalidRecordError", exc


def test_extender_is_five_bytes_for_other_ids():
    length = protobuf_indexes.extender(lambda schema_id: schema_id == 1)
    avro = framed(2, None, b"\x02\x02\x02")
    assert length(avro, 0, len(avro)) == 5
    proto = framed(1, [1, 2])
    assert length(proto, 0, len(proto)) == 5 + len(indexes([1, 2]))
    assert length(b"\x01abcdef", 0, 7) == 5


def test_a_prefix_over_message_indexes_is_left_to_the_full_walk():
    """The fast walk matches prefixes with an unbounded startswith: a value shorter than a good
    extended prefix could match its bytes and the next record's, so it never vouches for one."""
    records = [NewRecord(framed(1, [0, 0], b"")) for _ in range(3)] + [NewRecord(framed(1, [0]))]
    records[1] = NewRecord(framed(1, None, b"\x04"))  # [0, ...] cut short; the next bytes might complete it
    batch = build_batch(records)
    payload = validation._payload(batch, BatchHeader.parse(batch, 0), RECORD_NAME)
    extend = validation._extenders(RECORD_NAME, View())
    assert not validation._all_pass("orders", RECORD_NAME, payload, len(records), View(), extend)
    assert named(records) == [
        (0, "the value's schema id 1 is not registered under subject 'shop.Order.Line'"),
        (1, "the value with schema id 1: its Protobuf message indexes run past its end"),
        (2, "the value's schema id 1 is not registered under subject 'shop.Order.Line'"),
    ]
