"""Decompression bombs: a small compressed batch that inflates past max.message.bytes is refused
with MESSAGE_TOO_LARGE before the broker allocates what it would inflate to.

Every codec, against a real broker process, through a raw Produce request (the bytes a hostile
client would send): zstd and gzip at the default max.message.bytes, lz4 and snappy (whose
ratios are capped near 250:1 and 30:1) on a topic with a 16 KiB limit, a raw snappy block whose
length header claims 4 GB, and a 33 KB zstd batch that would inflate to 1 GiB, sent twenty
times while the broker's resident memory is watched.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import crc32c
import pytest

from strom.protocol.api import ApiKey
from strom.protocol.compression import DecompressedTooLargeError, decompress
from strom.protocol.errors import ErrorCode
from strom.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, NewRecord, build_batch, encode_varint
from strom.server.wire import uvarint
from tests.integration.clients import Msg, RawClient, confluent_consume, confluent_produce, rss_kb, unique_topic

MiB = 1024 * 1024
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CHUNK = bytes(MiB)


def _record_prefix(value_size: int) -> tuple[bytes, bytes]:
    """One record whose value is ``value_size`` zero bytes: (bytes before the value, after it)."""
    body_head = b"\x00" + _varint(0) + _varint(0) + _varint(-1) + _varint(value_size)
    tail = _varint(0)  # no headers
    return _varint(len(body_head) + value_size + len(tail)) + body_head, tail


def _varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out)
    return bytes(out)


def _stream(codec: int, value_size: int) -> bytes:
    """The compressed records section, built chunk by chunk so the test never holds it inflated."""
    head, tail = _record_prefix(value_size)
    if codec == GZIP:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [compressor.compress(head)]
        for start in range(0, value_size, MiB):
            parts.append(compressor.compress(CHUNK[: min(MiB, value_size - start)]))
        return b"".join(parts) + compressor.compress(tail) + compressor.flush()
    if codec == SNAPPY:  # xerial framing, as Java writes it: 32 KiB blocks
        blocks = [b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)]
        raw = head + bytes(value_size) + tail
        for start in range(0, len(raw), 32 * 1024):
            block = bytes(cramjam.snappy.compress_raw(raw[start : start + 32 * 1024]))
            blocks.append(struct.pack(">i", len(block)) + block)
        return b"".join(blocks)
    compressor = (
        cramjam.zstd.Compressor(level=19)
        if codec == ZSTD
        else cramjam.lz4.Compressor(level=12, content_checksum=False, block_linked=False)
    )
    compressor.compress(head)
    for start in range(0, value_size, MiB):
        compressor.compress(CHUNK[: min(MiB, value_size - start)])
    compressor.compress(tail)
    return bytes(compressor.finish())


def bomb_batch(codec: int, records_section: bytes) -> bytes:
    """A v2 batch of one record with a valid CRC around an already compressed records section."""
    batch = bytearray(HEADER.size) + records_section
    HEADER.pack_into(
        batch, 0, 0, len(batch) - 12, -1, 2, 0, codec, 0, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, 1
    )
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def produce_body(topic: str, records: bytes) -> bytes:
    """A Produce v3-v8 body (v8 answers with error messages): no transactional id, acks=1, one topic, one partition."""
    name = topic.encode()
    return (
        struct.pack(">hhi", -1, 1, 10_000)
        + struct.pack(">i", 1)
        + struct.pack(">h", len(name))
        + name
        + struct.pack(">i", 1)
        + struct.pack(">ii", 0, len(records))
        + records
    )


def produce(client: RawClient, topic: str, records: bytes):
    response = client.request(ApiKey.PRODUCE, 8, produce_body(topic, records))
    return response.responses[0].partition_responses[0]


def _create(bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs or {})])[topic].result(15)


CASES = [  # codec, inflated value size, topic max.message.bytes (None: the broker default, 1 MiB)
    pytest.param(ZSTD, 32 * MiB, None, id="zstd"),
    pytest.param(GZIP, 1152 * 1024, None, id="gzip"),  # deflate tops out near 1000:1
    pytest.param(LZ4, 256 * 1024, "16384", id="lz4"),
    pytest.param(SNAPPY, 40 * 1024, "16384", id="snappy"),
]


@pytest.mark.parametrize("codec, inflated, limit", CASES)
def test_small_batch_inflating_past_max_message_bytes_is_refused(broker, codec, inflated, limit):
    topic = unique_topic("bomb")
    _create(broker.bootstrap, topic, {"max.message.bytes": limit} if limit else None)
    batch = bomb_batch(codec, _stream(codec, inflated))
    assert len(batch) < 2100, f"the bomb is {len(batch)} bytes"
    with RawClient(broker.bootstrap) as client:
        result = produce(client, topic, batch)
        assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE, result
        assert "expands past max.message.bytes" in result.error_message
        # the same records, compressed but within the bound, are accepted: the bound is on size, not on ratio
        small = build_batch([NewRecord(bytes(1000))], compression=codec)
        assert produce(client, topic, small).error_code == ErrorCode.NONE


def test_raw_snappy_block_claiming_4_gb_is_refused_from_its_header(broker):
    topic = unique_topic("bomb-snappy-raw")
    _create(broker.bootstrap, topic)
    lying = uvarint(4 * 1024 * MiB - 1) + b"\x00" * 40  # the block's length header, then junk
    with RawClient(broker.bootstrap) as client:
        result = produce(client, topic, bomb_batch(SNAPPY, lying))
    assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE, result


def test_gigabyte_bombs_leave_the_brokers_memory_alone(broker):
    """Twenty 33 KB batches that would each inflate to 1 GiB: refused, and the broker's resident
    memory grows by less than 64 MiB (before the bound, each one was inflated up to 256 MiB)."""
    topic = unique_topic("bomb-gib")
    _create(broker.bootstrap, topic)
    batch = bomb_batch(ZSTD, _stream(ZSTD, 1024 * MiB))
    assert len(batch) < 40_000
    sent = [Msg(b"k", b"still served")]
    with RawClient(broker.bootstrap, timeout=30) as client:
        produce(client, topic, build_batch([NewRecord(b"warm-up")], compression=ZSTD))
        before = rss_kb(broker.process.pid)
        for _ in range(20):
            assert produce(client, topic, batch).error_code == ErrorCode.MESSAGE_TOO_LARGE
        grown = rss_kb(broker.process.pid) - before
    assert grown < 64 * 1024, f"broker RSS grew by {grown} KiB"
    assert confluent_produce(broker.bootstrap, topic, sent) == [1]
    assert [m.value for m in confluent_consume(broker.bootstrap, topic, 2)] == [b"warm-up", b"still served"]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_decompress_names_the_bound_it_refused(codec):
    data = _stream(codec, 4 * MiB)
    with pytest.raises(DecompressedTooLargeError, match="expands past the limit of 1048576 bytes"):
        decompress(codec, data, MiB)
