"""Produce is decoded and encoded by hand; check both against kio's schemas."""

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.protocol.api import request_class
from strom.protocol.codec import decode_response, encode
from strom.protocol.entities import build
from strom.protocol.errors import DecodeError
from strom.protocol.records import NewRecord, build_batch
from strom.server.handlers.produce import PartitionResult, decode, encode_response

BATCH = build_batch([NewRecord(b"value", key=b"key")])


@pytest.mark.parametrize("version", range(3, 10))
def test_decode_matches_kio(version):
    request = build(
        request_class(0, version),
        {
            "transactional_id": "tx" if version % 2 else None,
            "acks": -1,
            "timeout": datetime.timedelta(milliseconds=1500),
            "topic_data": [
                {"name": "orders", "partition_data": [{"index": 0, "records": BATCH}, {"index": 7, "records": None}]},
                {"name": "b", "partition_data": []},
            ],
        },
    )
    body = encode(request)
    decoded = decode(b"junk" + body, 4, version)
    assert decoded.transactional_id == request.transactional_id
    assert (decoded.acks, decoded.timeout) == (-1, 1500)
    assert [name for name, _ in decoded.topic_data] == ["orders", "b"]
    partitions = decoded.topic_data[0][1]
    assert [(index, None if records is None else bytes(records)) for index, records in partitions] == [
        (0, BATCH),
        (7, None),
    ]


@pytest.mark.parametrize("version", range(3, 10))
def test_single_partition_response_is_what_kio_reads(version):
    """One topic, one partition, no error: the shortcut encoding of linger.ms=0 traffic."""
    body = encode_response([("orders", [PartitionResult(5, 0, 1234567, 99, 17)])], version).chunks[0]
    response = decode_response(0, version, body)
    (partition,) = response.responses[0].partition_responses
    assert response.responses[0].name == "orders"
    assert (partition.index, int(partition.error_code), partition.base_offset) == (5, 0, 1234567)
    assert partition.log_append_time == datetime.datetime.fromtimestamp(0.099, datetime.UTC)
    if version >= 5:
        assert partition.log_start_offset == 17
    if version >= 8:
        assert partition.error_message is None and len(partition.record_errors) == 0


@pytest.mark.parametrize("version", range(3, 10))
def test_encoded_response_is_what_kio_reads(version):
    ok = PartitionResult(3, 0, 42, -1, 0)
    bad = PartitionResult(4, 87, -1, -1, -1, "bad batch")
    body = encode_response([("orders", [ok, bad])], version).chunks[0]
    response = decode_response(0, version, body)
    partitions = response.responses[0].partition_responses
    assert response.responses[0].name == "orders"
    assert [(p.index, int(p.error_code), p.base_offset) for p in partitions] == [(3, 0, 42), (4, 87, -1)]
    if version >= 8:
        assert partitions[1].error_message == "bad batch" and partitions[0].error_message is None


@pytest.mark.parametrize("version", range(3, 10))
def test_record_errors_are_what_kio_reads(version):
    """KIP-467: v8+ carries each failed record's index and message; older versions only the code."""
    bad = PartitionResult(
        0, 87, -1, -1, 5, "One or more records have been rejected", [(1, "no key é"), (7, None), (300, "x" * 200)]
    )
    body = encode_response([("orders", [bad, PartitionResult(1, 0, 9, -1, 0)])], version).chunks[0]
    (partition, ok) = decode_response(0, version, body).responses[0].partition_responses
    assert (int(partition.error_code), int(ok.error_code), ok.base_offset) == (87, 0, 9)
    if version >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
            (1, "no key é"),
            (7, None),
            (300, "x" * 200),
        ]
        assert partition.error_message == "One or more records have been rejected"
        assert len(ok.record_errors) == 0 and ok.error_message is None


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), version=st.integers(3, 9))
def test_garbage_only_raises_decode_error(data, version):
    try:
        decode(data, 0, version)
    except DecodeError:
        pass


def test_huge_counts_are_refused_without_allocating():
    body = b"\xff\xff" + b"\x00\x01" + b"\x00\x00\x03\xe8" + b"\x7f\xff\xff\xff"
    with pytest.raises(DecodeError):
        decode(body, 0, 3)
