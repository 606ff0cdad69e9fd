"""The bounded decoder: exact vectors, round trips through kio's writer, and fuzzing."""

import dataclasses
import time
import uuid
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import api_key_map
from kio.static.primitive import Records

from strom.protocol.api import ApiKey, known_versions, request_class, response_class
from strom.protocol.codec import decode, decode_request, decode_response, encode, encode_request
from strom.protocol.errors import DecodeError, ErrorCode, UnsupportedVersionError

# kio registers strategies for its own types except the raw record bytes.
st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

REQUESTS = [(k, v) for k in sorted(api_key_map) for v in known_versions(k)]
CORE = {
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.JOIN_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
}
RECORDS = b"R" * 61 + b"batch"  # opaque to the codec: it must neither parse nor copy it


def hexb(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def nested(api_key, version, name):
    """A nested entity class of a request (e.g. MetadataRequestTopic) by name."""
    module = __import__(request_class(api_key, version).__module__, fromlist=[name])
    return getattr(module, name)


def check(api_key, version, data, expected):
    """Decodes to `expected`, and kio's writer produces exactly `data` back."""
    assert decode_request(api_key, version, data) == expected
    assert encode_request(expected) == data


# --- exact vectors -------------------------------------------------------------


def test_api_versions_v0():
    check(18, 0, b"", request_class(18, 0)())


def test_api_versions_v3():
    data = hexb("0b") + b"librdkafka" + hexb("06") + b"2.0.2" + hexb("00")
    cls = request_class(18, 3)
    check(18, 3, data, cls(client_software_name="librdkafka", client_software_version="2.0.2"))


def test_metadata_v1():
    cls, topic = request_class(3, 1), nested(3, 1, "MetadataRequestTopic")
    check(3, 1, hexb("00000002 0001 61 0002 6263"), cls(topics=(topic(name="a"), topic(name="bc"))))
    check(3, 1, hexb("ffffffff"), cls(topics=None))  # null: all topics
    check(3, 1, hexb("00000000"), cls(topics=()))


def test_metadata_v12_with_trailing_bytes():
    cls, topic = request_class(3, 12), nested(3, 12, "MetadataRequestTopic")
    topic_id = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
    data = (
        hexb("03")  # two topics
        + bytes(16)
        + hexb("02 61 00")  # no id (zero uuid), name "a"
        + topic_id.bytes
        + hexb("00 00")  # by id, null name
        + hexb("01 00 00")  # allow_auto_topic_creation, include_topic_authorized_operations, no tags
    )
    expected = cls(
        topics=(topic(topic_id=None, name="a"), topic(topic_id=topic_id, name=None)),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    check(3, 12, data, expected)
    # librdkafka's all-topics Metadata v9+ carries trailing bytes after the body.
    assert decode_request(3, 12, hexb("00 01 00 00") + b"\x00\x00junk") == cls(
        topics=None, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )


def test_unknown_tagged_fields_are_skipped():
    cls = request_class(3, 12)
    data = hexb("01 00 01") + hexb("02 63 03 ffffff 07 00")  # tags 99 (3 bytes) and 7 (empty)
    assert decode_request(3, 12, data) == cls(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=True
    )


def test_known_tagged_field():
    # Fetch v12 has cluster_id as tag 0; add an unknown tag 7 after it.
    cls = request_class(ApiKey.FETCH, 12)
    obj = cls(
        replica_id=-1,
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
        cluster_id="c",
    )
    data = encode(obj)
    assert data.endswith(hexb("01 00 02 02 63"))
    assert decode_request(ApiKey.FETCH, 12, data) == obj
    assert decode_request(ApiKey.FETCH, 12, data[:-5] + hexb("02 00 02 02 63 07 01 ff")) == obj
    absent = decode_request(ApiKey.FETCH, 12, data[:-5] + hexb("00"))
    assert absent == dataclasses.replace(obj, cluster_id=None)
    with pytest.raises(DecodeError):  # the tag's size cuts its string short
        decode_request(ApiKey.FETCH, 12, data[:-5] + hexb("01 00 01 02 63"))


def test_produce_v3():
    data = (
        hexb("ffff ffff 00007530")  # no transactional id, acks=-1, timeout 30 s
        + hexb("00000001 0001 74 00000001 00000000")  # topic "t", one partition, index 0
        + len(RECORDS).to_bytes(4, "big")
        + RECORDS
    )
    req = decode_request(0, 3, data)
    assert (req.transactional_id, req.acks, req.timeout) == (None, -1, timedelta(seconds=30))
    (topic,) = req.topic_data
    (part,) = topic.partition_data
    assert (topic.name, part.index, bytes(part.records)) == ("t", 0, RECORDS)
    assert encode(req) == data


def test_produce_v9_records_are_views_of_the_frame():
    data = (
        hexb("03 7478 0001 00001388")  # transactional id "tx", acks=1, timeout 5 s
        + hexb("02 02 74 03")  # one topic "t", two partitions
        + hexb("00000000")
        + bytes([len(RECORDS) + 1])
        + RECORDS
        + hexb("00")
        + hexb("00000001 00 00")  # partition 1 has null records
        + hexb("00 00")  # topic tags, request tags
    )
    req = decode_request(0, 9, data)
    assert (req.transactional_id, req.acks, req.timeout) == ("tx", 1, timedelta(seconds=5))
    p0, p1 = req.topic_data[0].partition_data
    assert isinstance(p0.records, memoryview) and p0.records.obj is data
    assert bytes(p0.records) == RECORDS and p1.records is None
    assert encode(req) == data


def test_nullable_struct():
    cls = request_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    topic, cursor = nested(75, 0, "TopicRequest"), nested(75, 0, "Cursor")
    check(75, 0, hexb("02 02 74 00 000007d0 ff 00"), cls(topics=(topic(name="t"),), cursor=None))
    check(
        75,
        0,
        hexb("01 000007d0 01 02 74 00000003 00 00"),
        cls(topics=(), cursor=cursor(topic_name="t", partition_index=3)),
    )


def test_response_decoding():
    cls = response_class(ApiKey.INIT_PRODUCER_ID, 4)
    obj = cls(throttle_time=timedelta(0), error_code=ErrorCode.NONE, producer_id=7, producer_epoch=0)
    assert decode_response(22, 4, encode(obj)) == obj
    # Unknown error codes become UNKNOWN_SERVER_ERROR rather than failing, as in Kafka's client.
    odd = decode_response(22, 4, hexb("00000000 7fff 0000000000000007 0000 00"))
    assert odd.error_code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_unknown_version_is_unsupported():
    with pytest.raises(UnsupportedVersionError):
        decode_request(ApiKey.PRODUCE, 99, b"")
    with pytest.raises(UnsupportedVersionError):
        decode_request(4000, 0, b"")


# --- hostile input -----------------------------------------------------------------


@pytest.mark.parametrize(
    "api_key, version, data",
    [
        (3, 1, hexb("7fffffff") + bytes(16)),  # int32 count
        (3, 12, hexb("ffffffff07") + bytes(15)),  # varint count 2**32 - 1
        (0, 3, hexb("ffff 0001 00000000 00000001 0001 74 7fffffff") + bytes(4)),  # nested count
        (0, 3, hexb("ffff 0001 00000000 00000001 0001 74 00000001 00000000 7fffffff") + bytes(4)),  # records
        (18, 3, hexb("ffffffff0f") + bytes(15)),  # string length
    ],
)
def test_huge_counts_and_lengths_fail_fast(api_key, version, data):
    start = time.perf_counter()
    with pytest.raises(DecodeError):
        decode_request(api_key, version, data)
    assert time.perf_counter() - start < 0.5  # generous: CI machines are shared


@pytest.mark.parametrize(
    "api_key, version, data",
    [
        (3, 1, hexb("fffffffe")),  # array length -2
        (3, 1, hexb("00000001 ffff")),  # null in a non-nullable string
        (18, 3, hexb("8080808080 01")),  # varint longer than 5 bytes
        (18, 3, hexb("03 ff fe 01 00")),  # invalid UTF-8
        (3, 12, hexb("01 00")),  # truncated before the booleans
    ],
)
def test_malformed_input(api_key, version, data):
    with pytest.raises(DecodeError):
        decode_request(api_key, version, data)


def test_decode_error_is_a_value_error():
    with pytest.raises(ValueError):
        decode_request(3, 1, b"\x00")


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(REQUESTS), st.binary(max_size=300))
def test_arbitrary_bytes_only_raise_decode_error(request_key, data):
    try:
        decode_request(*request_key, data)
    except DecodeError:
        pass


# --- round trips through kio's writer ----------------------------------------------


def _round_trip(cls, obj, data):
    decoded, end = decode(cls, data + b"\x00trailing")
    assert end == len(data)
    assert decoded == obj
    # Every byte is needed, so every strict prefix must be refused, cleanly.
    for cut in range(0, len(data), max(1, len(data) // 12)):
        with pytest.raises(DecodeError):
            decode(cls, data[:cut])


def _mutate(data: bytes, rnd) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 3) if out else 0):
        out[rnd.randrange(len(out))] = rnd.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
    return bytes(out)


def _check_class(cls):
    @settings(max_examples=5, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(cls), st.randoms(use_true_random=False))
    def run(obj, rnd):
        encoded = encode(obj)
        _round_trip(cls, obj, encoded)
        try:
            decode(cls, _mutate(encoded, rnd))
        except DecodeError:
            pass

    run()


@pytest.mark.parametrize("api_key, version", REQUESTS)
def test_request_round_trip(api_key, version):
    _check_class(request_class(api_key, version))


# Responses are mostly encoded, not decoded; followers decode Fetch responses, so all of those.
RESPONSES = [
    (k, v)
    for k, v in REQUESTS
    if k == ApiKey.FETCH or (k in CORE and v in (known_versions(k)[0], known_versions(k)[-1]))
]


@pytest.mark.parametrize("api_key, version", RESPONSES)
def test_response_round_trip(api_key, version):
    _check_class(response_class(api_key, version))
