"""__consumer_offsets keys and values in Kafka's schemas, byte for byte, and Kafka's group → partition
mapping (Utils.abs(groupId.hashCode()) % partitions, with Java's String.hashCode).

The hash vectors were computed with Java 17 (``String.hashCode`` and Kafka's ``Utils.abs``).
"""

from __future__ import annotations

import pytest

from strom.group import records as schema
from strom.group.records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    java_string_hash,
    partition_for_group,
)


def hx(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# -- keys -----------------------------------------------------------------------------------------


def test_offset_commit_key_v1():
    data = encode_key(OffsetKey("g", "t", 0))
    assert data == hx("0001 0001 67 0001 74 00000000")
    assert decode_key(data) == OffsetKey("g", "t", 0)


def test_offset_commit_key_counts_utf8_bytes_and_signed_partitions():
    data = encode_key(OffsetKey("ä", "orders", 258))
    assert data == hx("0001 0002 c3a4 0006 6f7264657273 00000102")
    assert decode_key(data) == OffsetKey("ä", "orders", 258)


def test_offset_commit_key_v0_is_read_like_v1():
    assert decode_key(hx("0000 0001 67 0001 74 00000003")) == OffsetKey("g", "t", 3)


def test_group_metadata_key_v2():
    data = encode_key(GroupKey("my-group"))
    assert data == hx("0002 0008") + b"my-group"
    assert decode_key(data) == GroupKey("my-group")


def test_unknown_key_versions_and_truncated_keys_are_errors():
    with pytest.raises(RecordFormatError):
        decode_key(hx("0009 0001 67"))  # 3-8 are the consumer group protocol's (tests/group/test_consumer_group.py)
    with pytest.raises(RecordFormatError):
        decode_key(hx("0001 0005 67"))  # the string runs past the end
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00")


# -- offset values ------------------------------------------------------------------------------------


def test_offset_commit_value_v3():
    value = OffsetValue(offset=5, leader_epoch=2, metadata="m", commit_timestamp=1000)
    data = encode_offset_value(value)
    assert data == hx("0003 0000000000000005 00000002 0001 6d 00000000000003e8")
    assert decode_offset_value(data) == value


def test_offset_commit_value_v3_without_epoch_or_metadata():
    data = encode_offset_value(OffsetValue(offset=42, leader_epoch=-1, metadata="", commit_timestamp=0))
    assert data == hx("0003 000000000000002a ffffffff 0000 0000000000000000")


def test_older_offset_commit_values_are_read():
    # v0: offset, metadata, commit_timestamp
    assert decode_offset_value(hx("0000 0000000000000007 0002 6869 0000000000000064")) == OffsetValue(7, -1, "hi", 100)
    # v1: offset, metadata, commit_timestamp, expire_timestamp (ignored)
    assert decode_offset_value(hx("0001 0000000000000007 0000 0000000000000064 00000000000000c8")) == OffsetValue(
        7, -1, "", 100
    )
    # v2: offset, metadata, commit_timestamp
    assert decode_offset_value(hx("0002 0000000000000008 ffff 0000000000000065")) == OffsetValue(8, -1, "", 101)


# -- group values ---------------------------------------------------------------------------------------


def test_group_metadata_value_v3():
    value = GroupValue(
        protocol_type="consumer",
        generation=3,
        protocol="range",
        leader="m1",
        current_state_timestamp=1000,
        members=[MemberRecord("m1", None, "c", "/h", 300000, 10000, b"\x01\x02", b"\x03")],
    )
    data = encode_group_value(value)
    assert (
        data
        == hx(
            "0003"
            "0008" + b"consumer".hex() + "00000003"
            "0005" + b"range".hex() + "0002" + b"m1".hex() + "00000000000003e8"
            "00000001"
            "0002" + b"m1".hex() + "ffff"  # group_instance_id: null
            "0001" + b"c".hex() + "0002" + b"/h".hex() + "000493e0"  # rebalance timeout 300000
            "00002710"  # session timeout 10000
            "00000002 0102"
            "00000001 03"
        )
    )
    assert decode_group_value(data) == value


def test_an_empty_group_has_null_protocol_and_leader():
    value = GroupValue("consumer", 7, None, None, 5, [])
    data = encode_group_value(value)
    assert data == hx("0003 0008") + b"consumer" + hx("00000007 ffff ffff 0000000000000005 00000000")
    assert decode_group_value(data) == value


def test_group_metadata_value_with_a_static_member_round_trips():
    value = GroupValue(
        "consumer",
        1,
        "cooperative-sticky",
        "a-1",
        9,
        [
            MemberRecord("a-1", "instance-ä", "app", "/127.0.0.1", 45000, 6000, b"s", b""),
            MemberRecord("b-2", None, "app", "/127.0.0.1", 45000, 6000, b"", b"x" * 300),
        ],
    )
    assert decode_group_value(encode_group_value(value)) == value


def test_older_group_metadata_values_are_read():
    member_v0 = "0002" + b"m1".hex() + "0001" + b"c".hex() + "0002" + b"/h".hex() + "00002710" + "00000000" + "00000000"
    v0 = hx(
        "0000 0008"
        + b"consumer".hex()
        + "00000002 0005"
        + b"range".hex()
        + "0002"
        + b"m1".hex()
        + "00000001"
        + member_v0
    )
    decoded = decode_group_value(v0)
    assert decoded.generation == 2 and decoded.current_state_timestamp == -1
    assert decoded.members == [MemberRecord("m1", None, "c", "/h", 0, 10000, b"", b"")]
    member_v1 = (
        "0002"
        + b"m1".hex()
        + "0001"
        + b"c".hex()
        + "0002"
        + b"/h".hex()
        + "000493e0"
        + "00002710"
        + "00000000"
        + "00000000"
    )
    v2 = hx(
        "0002 0008"
        + b"consumer".hex()
        + "00000002 0005"
        + b"range".hex()
        + "0002"
        + b"m1".hex()
        + "0000000000000064"
        + "00000001"
        + member_v1
    )
    decoded = decode_group_value(v2)
    assert decoded.current_state_timestamp == 100
    assert decoded.members == [MemberRecord("m1", None, "c", "/h", 300000, 10000, b"", b"")]


def test_damaged_group_values_raise_a_format_error_not_anything_else():
    data = encode_group_value(
        GroupValue("consumer", 1, "range", "m", 0, [MemberRecord("m", None, "c", "/h", 1, 1, b"abc", b"def")])
    )
    for cut in range(len(data)):
        with pytest.raises(RecordFormatError):
            decode_group_value(data[:cut])
    with pytest.raises(RecordFormatError):  # a member count no record could hold
        decode_group_value(hx("0003 0000 00000001 ffff ffff 0000000000000000 7fffffff"))


def test_strings_longer_than_an_int16_cannot_be_written():
    assert schema.fits("x" * 32767) and not schema.fits("x" * 32768)
    assert schema.fits("😀" * 8191) and not schema.fits("😀" * 8192)  # 4 bytes each
    encode_key(GroupKey("x" * 32767))
    with pytest.raises(RecordFormatError):
        encode_key(GroupKey("x" * 32768))


# -- the group's partition of __consumer_offsets ------------------------------------------------------


# (group, Java's "group".hashCode(), Utils.abs(hash) % 50), computed with Java 17
JAVA_VECTORS = [
    ("my-group", -1906497762, 12),
    ("g", 103, 3),
    ("", 0, 0),
    ("console-consumer-12345", 158455506, 6),
    ("Gruppe-Ölmühle", 470144074, 24),
    ("consumer-group-ä€😀", -69751696, 46),  # 😀 is two UTF-16 code units, as Java counts
    ("😀", 1772899, 49),
    ("polygenelubricants", -2147483648, 0),  # Integer.MIN_VALUE: Utils.abs gives 0, not a negative number
]


@pytest.mark.parametrize("group,java_hash,partition", JAVA_VECTORS, ids=[v[0] or "empty" for v in JAVA_VECTORS])
def test_group_partition_matches_kafka(group, java_hash, partition):
    assert java_string_hash(group) == java_hash
    assert partition_for_group(group, 50) == partition


def test_group_partition_of_a_very_long_name():
    name = "".join(chr(ord("a") + i % 26) for i in range(10_000))
    assert java_string_hash(name) == 1711678600
    assert partition_for_group(name, 50) == 0


def test_my_group_by_hand():
    """Java: h = 31*h + c over the UTF-16 units, wrapping at 32 bits; Utils.abs; % partitions."""
    h = 0
    for ch in "my-group":
        h = (31 * h + ord(ch)) % 2**32
    signed = h - 2**32 if h >= 2**31 else h
    assert signed == -1906497762 == java_string_hash("my-group")
    assert abs(signed) % 50 == 12
    assert partition_for_group("my-group", 1) == 0
    assert partition_for_group("my-group", 7) == 1906497762 % 7
