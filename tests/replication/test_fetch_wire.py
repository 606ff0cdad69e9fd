"""The follower's hand-made Fetch v12: the request is byte for byte what kio encodes from the
same values, and the response decoder reads what kio writes, tagged fields included, and refuses
a truncated response with DecodeError."""

import pytest

from strom.protocol import api
from strom.protocol.api import ApiKey
from strom.protocol.codec import decode_request, encode
from strom.protocol.entities import build
from strom.protocol.errors import DecodeError
from strom.replication.fetch_wire import VERSION, decode_fetch_response, encode_fetch


def _entry(index: int, offset: int) -> dict:
    return {
        "partition": index,
        "current_leader_epoch": 3,
        "fetch_offset": offset,
        "log_start_offset": 7,
        "partition_max_bytes": 1048576,
    }


def _kio(session_id: int, epoch: int, topics: list, forgotten: list) -> bytes:
    cls = api.request_class(ApiKey.FETCH, VERSION)
    values = {
        "replica_id": 2,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 10485760,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": topics,
        "forgotten_topics_data": forgotten,
        "rack_id": "",
    }
    return encode(build(cls, values))


def test_a_full_fetch_an_incremental_one_and_an_empty_one_encode_as_kio_does():
    topics = [
        {"topic": "orders", "partitions": [_entry(0, 100), _entry(5, 2**40)]},
        {"topic": "é" * 100, "partitions": [_entry(1, 0)]},  # a name whose length takes two varint bytes
    ]
    forgotten = [{"topic": "gone", "partitions": [1, 2, 300]}]
    for session_id, epoch, ts, fs in ((0, 0, topics, []), (77, 9, topics[:1], forgotten), (77, 10, [], [])):
        body = encode_fetch(2, 500, 1, 10485760, session_id, epoch, ts, fs)
        assert body == _kio(session_id, epoch, ts, fs)


def test_what_a_broker_decodes_is_what_the_follower_asked_for():
    body = encode_fetch(3, 250, 1, 1000, 41, 6, [{"topic": "t", "partitions": [_entry(4, 12345)]}], [])
    request = decode_request(ApiKey.FETCH, VERSION, memoryview(body))
    assert (request.replica_id, request.session_id, request.session_epoch, request.min_bytes) == (3, 41, 6, 1)
    (topic,) = request.topics
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition, partition.fetch_offset, partition.current_leader_epoch) == (
        "t",
        4,
        12345,
        3,
    )
    assert (partition.last_fetched_epoch, partition.log_start_offset, partition.partition_max_bytes) == (-1, 7, 1048576)


def _response(records: bytes | None) -> bytes:
    cls = api.response_class(ApiKey.FETCH, VERSION)
    partition = {
        "partition_index": 3,
        "error_code": 0,
        "high_watermark": 120,
        "last_stable_offset": 118,
        "log_start_offset": 5,
        "diverging_epoch": {"epoch": 4, "end_offset": 99},  # a tagged field
        "aborted_transactions": [{"producer_id": 7, "first_offset": 100}],
        "preferred_read_replica": -1,
        "records": records,
    }
    failed = {**partition, "partition_index": 4, "error_code": 6, "records": None, "aborted_transactions": None}
    del failed["diverging_epoch"]
    values = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 77,
        "responses": [{"topic": "orders", "partitions": [partition, failed]}, {"topic": "é", "partitions": []}],
    }
    return encode(build(cls, values))


def test_the_response_decoder_reads_what_kio_writes():
    body = _response(b"\x00" * 300)
    response = decode_fetch_response(memoryview(b"pad" + body), 3)
    assert (response.error_code, response.session_id) == (0, 77)
    (orders, other) = response.responses
    assert (orders.topic, other.topic, other.partitions) == ("orders", "é", [])
    data, failed = orders.partitions
    assert (data.partition_index, data.error_code, data.high_watermark, data.last_stable_offset) == (3, 0, 120, 118)
    assert data.log_start_offset == 5 and bytes(data.records) == b"\x00" * 300
    assert (failed.partition_index, failed.error_code, failed.records) == (4, 6, None)


def test_a_truncated_or_inflated_response_is_a_decode_error():
    body = _response(b"\x01" * 40)
    for cut in (0, 5, 11, 30, len(body) - 41, len(body) - 1):
        with pytest.raises(DecodeError):
            decode_fetch_response(memoryview(body[:cut]))
    huge_count = body[:10] + b"\xff\xff\xff\x7f"  # a topic array of 2^28 in a few bytes
    with pytest.raises(DecodeError):
        decode_fetch_response(memoryview(huge_count))
