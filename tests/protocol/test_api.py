"""ApiKey / ErrorCode numbering and header-version lookup, checked against kio."""

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.index import api_key_map

from strom.protocol import api
from strom.protocol.api import (
    ApiKey,
    is_flexible,
    known_versions,
    request_class,
    request_header_version,
    response_class,
    response_class_for,
    response_header_version,
)
from strom.protocol.errors import (
    CorruptRecordError,
    DecodeError,
    ErrorCode,
    InvalidRecordError,
    InvalidRequestError,
    KafkaError,
    NotLeaderError,
    RecordTooLargeError,
    UnsupportedVersionError,
)


def test_api_keys_match_kio():
    for key, name in api_key_map.items():
        assert ApiKey(key).name == name.upper()
    assert ApiKey.CONTROLLED_SHUTDOWN == 7 and ApiKey.LEADER_AND_ISR == 4
    assert ApiKey.PRODUCE == 0 and ApiKey.API_VERSIONS == 18 and ApiKey.INIT_PRODUCER_ID == 22


def test_error_codes_match_kio():
    assert {m.name.upper(): m.value for m in KioErrorCode} == {m.name: m.value for m in ErrorCode}
    for name, value in [
        ("NONE", 0),
        ("UNKNOWN_SERVER_ERROR", -1),
        ("CORRUPT_MESSAGE", 2),
        ("NOT_LEADER_OR_FOLLOWER", 6),
        ("MESSAGE_TOO_LARGE", 10),
        ("INVALID_TOPIC_EXCEPTION", 17),
        ("UNSUPPORTED_VERSION", 35),
        ("INVALID_REQUEST", 42),
        ("DUPLICATE_SEQUENCE_NUMBER", 46),
        ("FENCED_LEADER_EPOCH", 74),
        ("UNKNOWN_LEADER_EPOCH", 75),
        ("INVALID_RECORD", 87),
    ]:
        assert ErrorCode[name] == value
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.INVALID_RECORD.retriable
    assert ErrorCode.from_wire(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode.from_wire(31000) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.NONE == KioErrorCode.none


def test_exceptions_carry_codes():
    assert CorruptRecordError("crc").error_code == ErrorCode.CORRUPT_MESSAGE
    assert InvalidRecordError().error_code == ErrorCode.INVALID_RECORD
    assert RecordTooLargeError("x").error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert NotLeaderError("x").error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert UnsupportedVersionError().message == "UNSUPPORTED_VERSION"
    err = KafkaError("custom", error_code=ErrorCode.POLICY_VIOLATION)
    assert err.error_code == ErrorCode.POLICY_VIOLATION and str(err) == "custom"
    assert KafkaError().error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    # A DecodeError is both an INVALID_REQUEST and a plain ValueError.
    assert issubclass(DecodeError, InvalidRequestError) and issubclass(DecodeError, ValueError)


def test_classes_come_from_kio():
    from kio.schema.metadata.v12.request import MetadataRequest
    from kio.schema.produce.v9.response import ProduceResponse

    assert request_class(3, 12) is MetadataRequest
    assert response_class(ApiKey.PRODUCE, 9) is ProduceResponse
    # Kafka 4 dropped Produce v0-2, and so did kio: they come from kio's generator run over Kafka 3.9
    assert request_class(0, 2).__module__ == "strom.protocol.legacy.schema.produce.v2.request"
    assert known_versions(ApiKey.PRODUCE)[0] == 0 and known_versions(ApiKey.FETCH)[0] == 0
    assert request_class(999, 0) is None and response_class(3, 999) is None
    assert known_versions(ApiKey.API_VERSIONS) == range(0, 5)
    assert known_versions(ApiKey.CONTROLLED_SHUTDOWN) == range(0)


def test_response_class_for_a_served_version_is_never_none():
    from kio.schema.produce.v9.response import ProduceResponse

    assert response_class_for(ApiKey.PRODUCE, 9) is ProduceResponse
    with pytest.raises(UnsupportedVersionError) as raised:
        response_class_for(ApiKey.METADATA, 999)
    assert raised.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert "api_key 3 version 999" in raised.value.message


def test_unknown_lookups_are_not_cached():
    before = len(api._REQUESTS)
    for version in range(1000, 1100):
        assert request_class(ApiKey.METADATA, version) is None
    assert len(api._REQUESTS) == before


@pytest.mark.parametrize(
    "api_key, version, request_header, response_header",
    [
        (ApiKey.API_VERSIONS, 0, 1, 0),
        (ApiKey.API_VERSIONS, 2, 1, 0),
        (ApiKey.API_VERSIONS, 3, 2, 0),  # flexible, but the response header stays v0
        (ApiKey.API_VERSIONS, 4, 2, 0),
        (ApiKey.API_VERSIONS, 77, 2, 0),  # newer than anything we know: still answerable
        (ApiKey.METADATA, 1, 1, 0),
        (ApiKey.METADATA, 8, 1, 0),
        (ApiKey.METADATA, 9, 2, 1),
        (ApiKey.METADATA, 12, 2, 1),
        (ApiKey.PRODUCE, 3, 1, 0),
        (ApiKey.PRODUCE, 8, 1, 0),
        (ApiKey.PRODUCE, 9, 2, 1),
        (ApiKey.FETCH, 11, 1, 0),
        (ApiKey.FETCH, 12, 2, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0, 0),
        (ApiKey.CONTROLLED_SHUTDOWN, 1, 1, 0),
        (999, 0, 1, 0),
    ],
)
def test_header_versions(api_key, version, request_header, response_header):
    assert request_header_version(api_key, version) == request_header
    assert response_header_version(api_key, version) == response_header


def test_header_versions_follow_flexibility():
    for key in api_key_map:
        for version in known_versions(key):
            flexible = is_flexible(key, version)
            assert request_header_version(key, version) == (2 if flexible else 1)
            expected = 0 if key == ApiKey.API_VERSIONS else (1 if flexible else 0)
            assert response_header_version(key, version) == expected
