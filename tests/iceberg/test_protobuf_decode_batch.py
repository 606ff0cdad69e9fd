"""``protobuf_columns.decode`` parses a batch of framed values at once (the values rewritten into
one synthetic ``repeated`` message); whatever the values, its columns, bad rows and reasons are
those of the simple reading: each value parsed on its own (``parse``) and turned into a row
(``as_dict``). Random messages of schemas with every kind of field, framed for messages at
several index paths (prefixes of 6, 7 and 8 bytes), mixed with nulls, bad values, values of
another message, unknown fields and concatenated (merged) messages."""

from __future__ import annotations

import functools
import random

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.iceberg import protobuf_columns as pc
from strom.schemas.protobuf import parse
from strom.spark.protobuf_types import load

EVERYTHING = """
syntax = "proto3";
package kinds;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message All {
  double f_double = 1; float f_float = 2; int32 f_int32 = 3; int64 f_int64 = 4;
  uint32 f_uint32 = 5; uint64 f_uint64 = 6; sint32 f_sint32 = 7; sint64 f_sint64 = 8;
  fixed32 f_fixed32 = 9; fixed64 f_fixed64 = 10; sfixed32 f_sfixed32 = 11; sfixed64 f_sfixed64 = 12;
  bool f_bool = 13; string f_string = 14; bytes f_bytes = 15; Color color = 16;
  optional int64 o_int64 = 17; optional string o_string = 18; optional Color o_color = 19;
  optional uint64 o_uint64 = 20;
  google.protobuf.Timestamp at = 21;
  google.protobuf.Int64Value w_int64 = 22; google.protobuf.StringValue w_string = 23;
  google.protobuf.UInt64Value w_uint64 = 24; google.protobuf.BoolValue w_bool = 25;
  Inner inner = 26;
  repeated int32 r_int32 = 27; repeated string r_string = 28; repeated Color r_color = 29;
  repeated uint64 r_uint64 = 30; repeated Inner r_inner = 31; repeated google.protobuf.Timestamp r_at = 32;
  map<string, int64> m_counts = 33; map<int32, Inner> m_inner = 34; map<bool, Color> m_color = 35;
  oneof choice { string c_text = 36; Inner c_inner = 37; sint64 c_number = 38; }
  message Inner {
    string name = 1; optional int32 level = 2; google.protobuf.Timestamp at = 3; repeated bytes blobs = 4;
    Deep deep = 5;
    message Deep { fixed64 big = 1; Color color = 2; }
  }
}
message Second { string s = 1; All.Inner inner = 2; }
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
"""
# no repeated field and no map: read straight from the bytes (strom.iceberg.protobuf_wire)
FLAT = """
syntax = "proto3";
package flat;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Event {
  int64 id = 1; int32 small = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5; sint64 s64 = 6;
  fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10; bool flag = 11;
  double d = 12; float f = 13; string text = 14; bytes blob = 15; Level level = 16;
  optional string maybe = 17; optional int64 maybe_n = 18; optional Level maybe_level = 19;
  google.protobuf.Timestamp at = 20; google.protobuf.DoubleValue w_double = 21;
  google.protobuf.UInt64Value w_u64 = 22; google.protobuf.StringValue w_text = 23;
  Where where = 24;
  oneof pick { string p_text = 25; int32 p_number = 26; Where p_where = 27; }
  enum Level { LOW = 0; MID = 1; HIGH = 2; ALSO_HIGH = 2; option allow_alias = true; }
}
message Where { string city = 1; optional int32 zone = 2; google.protobuf.Timestamp since = 3; }
"""
CLASSIC = """
syntax = "proto2";
package classic;
message Old {
  required int64 id = 1;
  optional string name = 2 [default = "none"];
  optional Size size = 3;
  repeated int32 packed = 4 [packed = true];
  enum Size { SMALL = 1; LARGE = 2; }
}
"""


@functools.cache
def schema(text: str) -> pc.ProtobufSchema:
    return load(text)


def fill(message, rng: random.Random, depth: int = 0) -> None:
    """Random values in a random subset of ``message``'s fields (nested ones too)."""
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 0.35:
            continue
        if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
            continue
        if pc._is_map(field):
            target = getattr(message, field.name)
            key_field, value_field = field.message_type.fields_by_number[1], field.message_type.fields_by_number[2]
            for _ in range(rng.randrange(4)):
                key = scalar(key_field, rng)
                if value_field.message_type is not None:
                    fill(target[key], rng, depth + 1)
                else:
                    target[key] = scalar(value_field, rng)
        elif field.is_repeated:
            target = getattr(message, field.name)
            for _ in range(rng.randrange(4)):
                if field.message_type is not None:
                    fill(target.add(), rng, depth + 1)
                else:
                    target.append(scalar(field, rng))
        elif field.message_type is not None:
            child = getattr(message, field.name)
            child.SetInParent()
            if depth < 3:
                fill(child, rng, depth + 1)
        else:
            setattr(message, field.name, scalar(field, rng))


INTS = {
    "int32": (-(2**31), 2**31 - 1),
    "sint32": (-(2**31), 2**31 - 1),
    "sfixed32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "sint64": (-(2**63), 2**63 - 1),
    "sfixed64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "fixed32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "fixed64": (0, 2**64 - 1),
}
TYPE_NAMES = {getattr(pc.FieldDescriptor, f"TYPE_{name.upper()}"): name for name in INTS}


def scalar(field, rng: random.Random):
    kind = field.type
    if kind in TYPE_NAMES:
        if field.containing_type.full_name == pc.TIMESTAMP:  # seconds an int64 of microseconds holds, any nanos
            return (
                rng.randint(-62_135_596_000, 253_402_300_000)
                if field.name == "seconds"
                else rng.randint(-(10**9), 10**9)
            )
        low, high = INTS[TYPE_NAMES[kind]]
        return rng.choice([low, high, 0, 1, -1 if low < 0 else 2, rng.randint(low, high)])
    if kind == pc.FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if kind == pc.FieldDescriptor.TYPE_DOUBLE:
        return rng.choice([0.0, -1.5, 1e308, float("inf"), rng.uniform(-1e9, 1e9)])
    if kind == pc.FieldDescriptor.TYPE_FLOAT:
        return rng.choice([0.0, 0.5, -3.25, float("-inf"), 1e30])
    if kind == pc.FieldDescriptor.TYPE_STRING:
        return rng.choice(["", "a", "ünïcödé ✓", "x" * rng.randrange(300)])
    if kind == pc.FieldDescriptor.TYPE_BYTES:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
    if kind == pc.FieldDescriptor.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values]
        if field.enum_type.is_closed:
            return rng.choice(numbers)
        return rng.choice([*numbers, 7, -3])  # an open enum keeps numbers it lacks
    raise AssertionError(kind)


# field 127 of each wire type: varint, 8 bytes, length-delimited, 4 bytes
UNKNOWN = [b"\xf8\x07\x05", b"\xf9\x07" + bytes(range(8)), b"\xfa\x07\x03abc", b"\xfd\x07\x01\x02\x03\x04"]


def values_for(
    pschema: pc.ProtobufSchema, path: tuple[int, ...], rng: random.Random, n: int, corrupt: bool = True
) -> list[bytes | None]:
    descriptor = pschema.message(path)
    cls = pc.message_class(descriptor)
    prefix = pc.frame(7, path)
    out: list[bytes | None] = []
    for _ in range(n):
        message = cls()
        if descriptor.full_name == "classic.Old":
            message.id = rng.randint(-(2**63), 2**63 - 1)
        fill(message, rng)
        body = message.SerializePartialToString()
        roll = rng.random()
        if roll < 0.05:
            out.append(None)
        elif roll < 0.08:
            out.append(prefix + body + body)  # the same message twice: merged as protobuf merges
        elif roll < 0.10:
            out.append(prefix + body + rng.choice(UNKNOWN))  # a field the reader lacks (number 127)
        elif roll < 0.11:
            out.append(prefix + body + b"\x0a\x00")  # field 1 with another wire type: unknown to protobuf
        elif roll < 0.12:
            out.append(pc.frame(8, path) + body)  # an id the registry does not know
        elif roll < 0.14 and corrupt:
            if descriptor.full_name == "classic.Old":  # a proto2 string that is not UTF-8 is not refused
                out.append(prefix + body + b"\x0a\x7f")  # field 1, 127 bytes long: past the end
            else:
                out.append(prefix + body[: max(0, len(body) - 1)] + b"\xff")  # most likely corrupt
        elif roll < 0.16:
            out.append(rng.choice([b"", b"\x00", b"\x01\x00\x00\x00\x07\x00", b"\x00\x00\x00\x00\x07"]))
        elif roll < 0.18:
            out.append(pc.frame(7, (*path, 0) if path != (1,) else (0,)) + body)  # another message
        elif roll < 0.20 and path == (0,):
            out.append(pc.frame(7)[:5] + b"\x02\x00" + body)  # [0] written as a count and an index
        else:
            out.append(prefix + body)
    return out


def simple(values: list[bytes | None], descriptor, path: tuple[int, ...]):
    """The reference: each value parsed on its own, its row made by ``as_dict``."""
    parsed = pc.parse(values, pc.message_class(descriptor), path, lambda i: i == 7)
    rows: list[dict | None] = [None] * len(values)
    for row, message in zip(parsed.rows, parsed.messages, strict=True):
        rows[row] = pc.as_dict(message)
    return rows, list(parsed.bad), dict(sorted(parsed.reasons.items()))


CASES = [
    (FLAT, "Event"),
    (FLAT, "Where"),
    (EVERYTHING, "All"),
    (EVERYTHING, "Second"),
    (EVERYTHING, "All.Inner"),
    (EVERYTHING, "All.Inner.Deep"),
    (CLASSIC, "Old"),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), case=st.sampled_from(CASES), n=st.integers(0, 60), corrupt=st.booleans())
def test_decoding_a_batch_gives_what_the_values_give_one_by_one(seed, case, n, corrupt):
    text, name = case
    pschema = schema(text)
    descriptor = pschema.named(name)
    path = pschema.path_of(descriptor)
    values = values_for(pschema, path, random.Random(seed), n, corrupt)
    column, bad, reasons = pc.decode(pa.array(values, pa.binary()), descriptor, path, lambda i: i == 7)
    if not corrupt:  # the values with the usual prefix were parsed as one batch
        assert pc._bulk(pa.array(values, pa.binary()), descriptor, path, lambda i: i == 7) is not None
    rows, simple_bad, simple_reasons = simple(values, descriptor, path)
    assert column.type == pc.arrow_type(descriptor)
    assert column.to_pylist() == rows
    assert list(bad) == simple_bad
    assert reasons == simple_reasons


def test_a_batch_of_good_values_is_parsed_at_once_and_one_corrupt_value_is_found_one_by_one():
    pschema = schema(EVERYTHING)
    descriptor = pschema.message()
    values = values_for(pschema, (0,), random.Random(5), 0)
    cls = pc.message_class(descriptor)
    good = [pc.frame(7) + cls(f_int64=i, f_string=f"s{i}").SerializeToString() for i in range(100)]
    bulk = pc._bulk(pa.array(good), descriptor, (0,), lambda i: i == 7)
    assert bulk is not None and list(bulk[0]) == list(range(100))
    values = [*good[:50], pc.frame(7) + b"\x0a\x05ab", *good[50:]]  # a string running past its value
    assert pc._bulk(pa.array(values), descriptor, (0,), lambda i: i == 7) is None
    column, bad, reasons = pc.decode(pa.array(values), descriptor, (0,), lambda i: i == 7)
    assert [row and row["f_int64"] for row in column.to_pylist()] == [*range(50), None, *range(50, 100)]
    assert list(bad) == [False] * 50 + [True] + [False] * 50
    assert list(reasons) == [50] and reasons[50].startswith("not a kinds.All:")


def test_a_sliced_and_chunked_column_decodes_like_its_values():
    pschema = schema(EVERYTHING)
    descriptor = pschema.message()
    values = values_for(pschema, (0,), random.Random(11), 80)
    sliced = pa.array(values, pa.binary()).slice(13, 50)
    chunked = pa.chunked_array([pa.array(values[:30], pa.binary()), pa.array(values[30:], pa.binary())])
    for column_in, expected in ((sliced, values[13:63]), (chunked, values)):
        column, bad, reasons = pc.decode(column_in, descriptor, (0,), lambda i: i == 7)
        assert (column.to_pylist(), list(bad), reasons) == simple(expected, descriptor, (0,))


def test_the_schema_parses_as_the_registry_parses_it():
    parse(EVERYTHING)
    parse(CLASSIC)


def test_flat_messages_are_read_from_their_bytes_and_what_upb_would_merge_is_left_to_upb():
    """A flat proto3 message's columns come from ``protobuf_wire`` (no messages made); a value
    with a message field twice (protobuf merges the two) sends the batch back to upb, with the
    same result."""
    pschema = schema(FLAT)
    descriptor = pschema.named("Event")
    cls = pc.message_class(descriptor)
    messages = [cls(id=i, text=f"t{i}", level=i % 3, where={"city": f"c{i}"}) for i in range(40)]
    for i, message in enumerate(messages):
        if i % 2:
            message.at.seconds = 1_700_000_000 + i
    values = [pc.frame(7) + m.SerializeToString() for m in messages]
    values[5:9] = [value + unknown for value, unknown in zip(values[5:9], UNKNOWN, strict=True)]  # skipped
    values[9] = values[9] + pc.message_class(descriptor)(id=99, text="again").SerializeToString()  # the last wins
    bulk = pc._bulk(pa.array(values), descriptor, (0,), lambda i: i == 7)
    assert bulk is not None and isinstance(bulk[1], pa.StructArray)
    assert bulk[1].to_pylist()[9]["id"] == 99 and bulk[1].to_pylist()[9]["text"] == "again"
    merged = values[:]
    merged[3] = values[3] + cls(where={"city": "later"}).SerializeToString()  # where: city from the second
    bulk = pc._bulk(pa.array(merged), descriptor, (0,), lambda i: i == 7)
    assert bulk is not None and isinstance(bulk[1], list)  # upb's messages
    for batch in (values, merged):
        column, bad, reasons = pc.decode(pa.array(batch), descriptor, (0,), lambda i: i == 7)
        assert (column.to_pylist(), list(bad), reasons) == simple(batch, descriptor, (0,))
    assert column.to_pylist()[3]["where"] == {"city": "later", "zone": None, "since": None}


def test_a_value_with_no_value_of_its_column_type_is_a_bad_row_not_a_failed_batch():
    """A proto2 string that is not UTF-8 parses (proto2 does not check) but is no Arrow string,
    and a timestamp past what int64 microseconds hold is no Arrow timestamp: those rows are bad,
    with the reason, and the batch's other rows decode."""
    old = schema(CLASSIC).named("Old")
    cls = pc.message_class(old)
    values = [pc.frame(7) + cls(id=i, name=f"n{i}").SerializeToString() for i in range(4)]
    values[2] = pc.frame(7) + cls(id=2).SerializeToString() + b"\x12\x01\xff"  # name: the byte ff
    column, bad, reasons = pc.decode(pa.array(values), old, (0,), lambda i: i == 7)
    assert [row and row["name"] for row in column.to_pylist()] == ["n0", "n1", None, "n3"]
    assert list(bad) == [False, False, True, False]
    assert list(reasons) == [2] and "classic.Old of the reader's column types" in reasons[2]
    flat = schema(FLAT).named("Event")
    event = pc.message_class(flat)
    values = [pc.frame(7) + event(id=i).SerializeToString() for i in range(3)]
    far = event(id=1)
    far.at.seconds = 2**62
    values[1] = pc.frame(7) + far.SerializeToString()
    column, bad, reasons = pc.decode(pa.array(values), flat, (0,), lambda i: i == 7)
    assert [row and row["id"] for row in column.to_pylist()] == [0, None, 2]
    assert list(bad) == [False, True, False] and list(reasons) == [1]
