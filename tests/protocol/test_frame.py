"""Frame splitting, request header parsing and response framing, on exact bytes."""

import struct

import pytest

from strom.protocol.errors import DecodeError
from strom.protocol.frame import (
    FrameDecoder,
    FrameError,
    RequestHeader,
    encode_response_frame,
    parse_request_header,
    response_header,
)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def drain(decoder: FrameDecoder) -> list[bytes]:
    out = []
    while (f := decoder.next_frame()) is not None:
        out.append(bytes(f))
    return out


# --- FrameDecoder -------------------------------------------------------------


def test_several_frames_in_one_chunk():
    d = FrameDecoder(100)
    d.feed(frame(b"one") + frame(b"") + frame(b"three") + b"\x00\x00")
    assert drain(d) == [b"one", b"", b"three"]
    d.feed(b"\x00\x02hi")
    assert drain(d) == [b"hi"]
    assert d.buffered_bytes == 0


def test_one_frame_in_one_byte_chunks():
    data = frame(b"hello world") + frame(b"x")
    d = FrameDecoder(100)
    got = []
    for i in range(len(data)):
        d.feed(data[i : i + 1])
        got += drain(d)
        if i < 14:
            assert got == []
    assert got == [b"hello world", b"x"]


def test_truncated_frame_waits_for_more():
    d = FrameDecoder(100)
    d.feed(frame(b"abcdef")[:-2])
    assert d.next_frame() is None
    assert d.buffered_bytes == 4  # only what arrived: an announced size reserves nothing
    d.feed(b"ef")
    assert drain(d) == [b"abcdef"]


@pytest.mark.parametrize("size", [101, 2**31 - 1])
def test_huge_size_is_refused_before_buffering(size):
    d = FrameDecoder(100)
    with pytest.raises(FrameError):
        d.feed(struct.pack(">i", size) + b"x" * 10)
    assert d.buffered_bytes == 0
    with pytest.raises(FrameError):  # a dead decoder stays dead
        d.next_frame()
    with pytest.raises(FrameError):
        d.feed(frame(b"ok"))


def test_huge_size_split_across_chunks():
    d = FrameDecoder(100)
    d.feed(b"\x7f\xff")
    with pytest.raises(FrameError):
        d.feed(b"\xff\xff")


def test_negative_size():
    d = FrameDecoder(100)
    with pytest.raises(FrameError):
        d.feed(struct.pack(">i", -1))


def test_size_equal_to_max_is_accepted():
    d = FrameDecoder(5)
    d.feed(frame(b"12345"))
    assert drain(d) == [b"12345"]


def test_frames_inside_a_bytes_chunk_are_not_copied():
    chunk = frame(b"abc") + frame(b"defg")
    d = FrameDecoder(100)
    d.feed(chunk)
    first = d.next_frame()
    assert isinstance(first, memoryview) and first.obj is chunk and bytes(first) == b"abc"


def test_mutable_chunks_are_copied():
    chunk = bytearray(frame(b"abc"))
    d = FrameDecoder(100)
    d.feed(chunk)
    chunk[4:7] = b"xyz"  # the caller reuses its receive buffer
    assert drain(d) == [b"abc"]


def test_memoryview_chunk():
    data = frame(b"abc") + frame(b"de")
    d = FrameDecoder(100)
    d.feed(memoryview(data)[:5])
    d.feed(memoryview(data)[5:])
    assert drain(d) == [b"abc", b"de"]


# --- request headers -----------------------------------------------------------


def test_header_v1():
    # ApiVersions v0, correlation id 7, client id "cli"
    data = bytes.fromhex("0012 0000 00000007 0003 636c69")
    header, offset = parse_request_header(data)
    assert header == RequestHeader(18, 0, 7, "cli", 1)
    assert offset == len(data)


def test_header_v1_null_client_id():
    data = bytes.fromhex("0003 0001 ffffffff ffff") + b"body"
    header, offset = parse_request_header(data)
    assert header == RequestHeader(3, 1, -1, None, 1)
    assert data[offset:] == b"body"


def test_header_v2_client_id_is_not_compact_and_tags_are_skipped():
    # Metadata v12; client id "rdkafka" as int16 length; one unknown tagged field (tag 5, 2 bytes).
    data = bytes.fromhex("0003 000c 0000002a 0007") + b"rdkafka" + bytes.fromhex("01 05 02 abcd") + b"B"
    header, offset = parse_request_header(data)
    assert header == RequestHeader(3, 12, 42, "rdkafka", 2)
    assert data[offset:] == b"B"


def test_header_v0_controlled_shutdown():
    data = bytes.fromhex("0007 0000 00000003 00000001")
    header, offset = parse_request_header(data)
    assert header == RequestHeader(7, 0, 3, None, 0)
    assert offset == 8


@pytest.mark.parametrize(
    "data",
    [
        bytes.fromhex("03e7 0000 0000000b 0002 6869"),  # unknown api key 999
        bytes.fromhex("0012 0063 0000000b 7fff"),  # ApiVersions v99, client id truncated
        bytes.fromhex("0012 0063 0000000b"),  # nothing after the correlation id
        bytes.fromhex("0004 0000 0000000b 0001"),  # LeaderAndIsr v0: ZooKeeper-era, no schema anywhere in strom
    ],
)
def test_unknown_versions_still_yield_the_correlation_id(data):
    header, _ = parse_request_header(data)
    assert header.correlation_id == 11


@pytest.mark.parametrize(
    "data",
    [
        b"",
        bytes.fromhex("0012 0000 0000"),  # shorter than the fixed part
        bytes.fromhex("0012 0000 00000001 0009 6869"),  # client id runs past the end
        bytes.fromhex("0012 0000 00000001 fffe"),  # length -2
        bytes.fromhex("0003 000c 00000001 ffff 05"),  # tagged fields truncated
    ],
)
def test_malformed_headers(data):
    with pytest.raises(DecodeError):
        parse_request_header(data)


def test_client_id_with_bad_utf8_is_replaced():
    header, _ = parse_request_header(bytes.fromhex("0012 0000 00000001 0002 ff41"))
    assert header.client_id == "\ufffdA"


# --- responses -------------------------------------------------------------------


def test_response_header_v0():
    assert b"".join(encode_response_frame(5, 0, [b"ab", b"c"])) == bytes.fromhex("00000007 00000005") + b"abc"


def test_response_header_v1_has_empty_tags():
    chunks = encode_response_frame(-2, 1, [memoryview(b"xyz")])
    assert b"".join(chunks) == bytes.fromhex("00000008 fffffffe 00") + b"xyz"


def test_response_body_chunks_are_not_copied():
    body = b"q" * 1000
    chunks = encode_response_frame(1, 0, body)
    assert chunks[1] is body and len(chunks) == 2


def test_response_header_alone_for_sendfile():
    assert response_header(9, 1, 100) == struct.pack(">ii", 105, 9) + b"\x00"
    with pytest.raises(ValueError):
        response_header(9, 2, 0)
