"""Record-level validation on the leader's append, as Kafka's LogValidator does it.

Each test appends what a producer could send and checks what the producer would be told (error
code, the failed records' indexes and messages) and that a refused batch leaves no trace.
"""

import struct

import pytest

from strom.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    RecordTooLargeError,
    RecordValidationError,
)
from strom.protocol.records import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    LOG_APPEND_TIME,
    NewRecord,
    batch_crc,
    build_batch,
    iter_batch_headers,
    iter_records,
)
from strom.storage.log import Log
from strom.storage.log_config import LONG_MAX, LogConfig

NOW_MS = 1_700_000_000_000
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


def open_log(tmp_path, **config) -> Log:
    return Log(str(tmp_path / "orders-3"), LogConfig(**config), clock=lambda: NOW_MS / 1000)


def stored(log: Log) -> list:
    if log.log_end_offset == 0:
        return []
    data = log.read(0, 1 << 24)
    return list(iter_records(b"".join(s.read() for s in data.slices)))


def patched(batch: bytes, **fields) -> bytes:
    """A batch with header fields changed and its CRC made right again (what a buggy client sends)."""
    out = bytearray(batch)
    offsets = {"last_offset_delta": (23, ">i"), "records_count": (57, ">i"), "attributes": (21, ">h")}
    for name, value in fields.items():
        position, fmt = offsets[name]
        struct.pack_into(fmt, out, position, value)
    struct.pack_into(">I", out, CRC_OFFSET, batch_crc(out, 0, len(out)))
    return bytes(out)


@pytest.mark.parametrize("codec", CODECS)
def test_compacted_topic_refuses_the_batch_and_names_each_record_without_a_key(tmp_path, codec):
    log = open_log(tmp_path, cleanup_policy=("compact",))
    keys = [b"a", None, b"b", b"c", None, b"d"]
    batch = build_batch([NewRecord(b"v%d" % i, key=k, timestamp=NOW_MS) for i, k in enumerate(keys)], compression=codec)
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(batch)
    message = "Compacted topic cannot accept message without key in topic partition orders-3"
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert refused.value.record_errors == [(1, message), (4, message)]
    assert str(refused.value) == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{message}'), "
        f"RecordError(batchIndex=4, message='{message}')]"
    )
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    # keyed records only: accepted, and tombstones (a key, no value) are fine
    log.append_as_leader(
        build_batch([NewRecord(b"v", key=b"a", timestamp=NOW_MS), NewRecord(None, key=b"b")], compression=codec)
    )
    assert [(r.offset, r.key, r.value) for r in stored(log)] == [(0, b"a", b"v"), (1, b"b", None)]


def test_plain_topic_takes_records_without_keys(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(build_batch([NewRecord(b"v", timestamp=NOW_MS)] * 3, compression=3))
    assert [r.key for r in stored(log)] == [None] * 3


def test_timestamps_before_the_bound_fail_with_invalid_timestamp(tmp_path):
    log = open_log(tmp_path, message_timestamp_before_max_ms=60_000)
    times = [NOW_MS - 1_000, NOW_MS - 60_000, NOW_MS - 60_001, -1, NOW_MS + 10**9]
    batch = build_batch([NewRecord(b"v", key=b"k", timestamp=t) for t in times])
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(batch)
    assert refused.value.error_code == ErrorCode.INVALID_TIMESTAMP
    upper = NOW_MS + LONG_MAX - 2**64  # Kafka's bound is a Java long: now + Long.MAX wraps
    assert refused.value.record_errors == [
        (
            2,
            f"Timestamp {NOW_MS - 60_001} of message with offset 2 is out of range. "
            f"The timestamp should be within [{NOW_MS - 60_000}, {upper}]",
        )
    ]
    assert str(refused.value) == "One or more records have been rejected due to invalid timestamp"
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [0, 4])
def test_timestamps_after_the_bound_fail_with_invalid_timestamp(tmp_path, codec):
    log = open_log(tmp_path, message_timestamp_after_max_ms=3_600_000)
    times = [NOW_MS + 3_600_001, NOW_MS, NOW_MS + 3_600_000, NOW_MS + 7_200_000]
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(build_batch([NewRecord(b"v", timestamp=t) for t in times], compression=codec))
    assert [index for index, _ in refused.value.record_errors] == [0, 3]
    assert refused.value.record_errors[0][1].endswith(f"within [{NOW_MS - LONG_MAX}, {NOW_MS + 3_600_000}]")
    log.append_as_leader(build_batch([NewRecord(b"v", timestamp=t) for t in times[1:3]], compression=codec))
    assert log.log_end_offset == 2


def test_deprecated_difference_bound_applies_where_before_and_after_are_unset(tmp_path):
    log = open_log(tmp_path, message_timestamp_difference_max_ms=1_000, message_timestamp_after_max_ms=5_000)
    times = [NOW_MS - 1_001, NOW_MS + 4_000, NOW_MS + 5_001]
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(build_batch([NewRecord(b"v", timestamp=t) for t in times]))
    assert [index for index, _ in refused.value.record_errors] == [0, 2]


def test_log_append_time_topics_ignore_timestamp_bounds(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0)
    log.append_as_leader(build_batch([NewRecord(b"v", timestamp=5)]))
    assert [r.timestamp for r in stored(log)] == [NOW_MS]


def test_a_producer_may_not_claim_log_append_time(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    batch = build_batch([NewRecord(b"value", key=b"k", timestamp=NOW_MS)], timestamp_type=LOG_APPEND_TIME)
    with pytest.raises(RecordValidationError) as refused:
        log.append_as_leader(batch)
    assert refused.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert refused.value.record_errors == [
        (
            0,
            f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={NOW_MS}, key=1 bytes, "
            "value=5 bytes). Producer should not set timestamp type to LogAppendTime.",
        )
    ]


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_compressed_batch_with_fewer_records_than_its_header_says(tmp_path, codec):
    log = open_log(tmp_path)
    batch = build_batch([NewRecord(b"v%d" % i, timestamp=NOW_MS) for i in range(3)], compression=codec)
    with pytest.raises(InvalidRecordError, match="Incorrect declared batch size, premature EOF reached"):
        log.append_as_leader(patched(batch, records_count=4, last_offset_delta=3))
    with pytest.raises(InvalidRecordError, match="Incorrect declared batch size, records still remaining in file"):
        log.append_as_leader(patched(batch, records_count=2, last_offset_delta=1))
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_compressed_batch_with_garbage_inside_a_record(tmp_path):
    log = open_log(tmp_path, cleanup_policy=("compact",))
    records = [NewRecord(b"v", key=b"k", headers=[("h", b"x")], timestamp=NOW_MS)]
    raw = build_batch(records)
    body = bytearray(raw[BATCH_HEADER_SIZE:])
    body[-4] = 0x7F  # the header key length, now far past the record's end
    from strom.protocol.compression import compress

    batch = bytearray(raw[:BATCH_HEADER_SIZE]) + compress(4, bytes(body))
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    batch = patched(bytes(batch), attributes=4)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(batch)
    assert log.log_end_offset == 0


def test_undecompressable_batch_is_corrupt(tmp_path):
    log = open_log(tmp_path)
    raw = build_batch([NewRecord(b"v" * 100, timestamp=NOW_MS)])
    batch = bytearray(raw[:BATCH_HEADER_SIZE]) + b"\x28\xb5\x2f\xfd" + b"not zstd at all"
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    with pytest.raises(CorruptRecordError, match="cannot be decompressed"):
        log.append_as_leader(patched(bytes(batch), attributes=4))
    assert log.log_end_offset == 0


@pytest.mark.parametrize("codec", [1, 4])
def test_compressed_inner_offsets_are_renumbered_as_kafka_does(tmp_path, codec):
    """Old clients number a compressed batch's records wrongly; Kafka rewrites them, it does not refuse."""
    log = open_log(tmp_path)
    log.append_as_leader(build_batch([NewRecord(b"first", timestamp=NOW_MS)]))
    records = [
        NewRecord(b"r%d" % i, key=b"k%d" % i, timestamp=NOW_MS + i, offset_delta=d) for i, d in enumerate([0, 2, 7])
    ]
    info = log.append_as_leader(build_batch(records, compression=codec, last_offset_delta=2))
    assert (info.first_offset, info.last_offset) == (1, 3)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in stored(log)[1:]] == [
        (1, b"k0", b"r0", NOW_MS),
        (2, b"k1", b"r1", NOW_MS + 1),
        (3, b"k2", b"r2", NOW_MS + 2),
    ]
    assert [h.compression for h in iter_batch_headers(b"".join(s.read() for s in log.read(1, 1 << 20).slices))] == [
        codec
    ]


def test_max_message_bytes_is_per_batch_and_inclusive(tmp_path):
    batch = build_batch([NewRecord(b"x" * 500, timestamp=NOW_MS)])
    log = open_log(tmp_path, max_message_bytes=len(batch))
    log.append_as_leader(batch)
    smaller = open_log(tmp_path / "small", max_message_bytes=len(batch) - 1)
    with pytest.raises(RecordTooLargeError, match=f"record batch of {len(batch)} bytes exceeds the maximum"):
        smaller.append_as_leader(batch)
    assert smaller.log_end_offset == 0
