import os

import pytest

from strom.protocol.errors import CorruptRecordError, InvalidRecordError, OffsetOutOfRangeError, RecordTooLargeError
from strom.protocol.records import BatchHeader, NewRecord, build_batch, iter_batch_headers, iter_records
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from tests.storage.helpers import make_batch


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def open_log(tmp_path, **config) -> Log:
    return Log(str(tmp_path / "topic-0"), LogConfig(**config))


def read_all(log: Log, start: int = 0) -> bytes:
    out = b""
    offset = start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data.slices:
            break
        chunk = b"".join(s.read() for s in data.slices)
        headers = list(iter_batch_headers(chunk))
        out += chunk[: sum(h.size for h in headers)]
        offset = headers[-1].next_offset
    return out


def test_round_trip_across_many_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=4096, index_interval_bytes=256)
    appended = []
    for i in range(200):
        batch = make_batch(3, value_size=50, prefix=b"b%d-" % i)
        info = log.append_as_leader(batch, leader_epoch=0)
        assert info.first_offset == i * 3 and info.last_offset == i * 3 + 2
        appended.append(batch)
    assert len(log.segments) > 10
    assert log.log_end_offset == 600
    stored = read_all(log)
    # Byte-identical apart from the two fields the broker assigns (offset, leader epoch).
    headers = list(iter_batch_headers(stored))
    assert len(headers) == 200
    for i, (header, original) in enumerate(zip(headers, appended)):
        chunk = stored[header.position : header.position + header.size]
        assert header.base_offset == i * 3 and header.partition_leader_epoch == 0
        assert chunk[16:] == original[16:] and chunk[8:12] == original[8:12]
    values = [r.value for r in iter_records(stored)]
    assert values[0].startswith(b"b0-0") and values[-1].startswith(b"b199-2")
    assert [r.offset for r in iter_records(stored)] == list(range(600))


def test_reads_at_every_offset_and_segment_boundary(tmp_path):
    log = open_log(tmp_path, segment_bytes=2048, index_interval_bytes=100)
    for i in range(120):
        log.append_as_leader(make_batch(2, value_size=30))
    boundaries = [s.base_offset for s in log.segments]
    assert len(boundaries) > 5
    for offset in range(log.log_end_offset):
        data = log.read(offset, 1)  # min_one_message: the first batch comes whole
        header = BatchHeader.parse(data.slices[0].read())
        assert header.base_offset <= offset <= header.last_offset
    for base in boundaries[1:]:
        header = BatchHeader.parse(log.read(base, 1).slices[0].read())
        assert header.base_offset == base
    assert log.read(log.log_end_offset, 1000).slices == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 1000)


def test_read_respects_max_bytes_and_max_offset(tmp_path):
    log = open_log(tmp_path)
    for _ in range(10):
        log.append_as_leader(make_batch(1, value_size=100))
    size = len(make_batch(1, value_size=100))
    assert log.read(0, size * 3).size == size * 3
    assert log.read(0, 10, min_one_message=True).size == size
    assert log.read(0, 10, min_one_message=False).size == 10
    assert log.read(0, 1 << 20, max_offset=4).size == size * 4
    assert log.read(4, 1 << 20, max_offset=4).slices == []


def test_timestamp_lookups(tmp_path):
    log = open_log(tmp_path, segment_bytes=1024, index_interval_bytes=64)
    for i in range(50):
        log.append_as_leader(make_batch(2, timestamp=10_000 + i * 100))
    assert log.offset_for_timestamp(-2) == (-1, 0)
    assert log.offset_for_timestamp(-1) == (-1, 100)
    assert log.offset_for_timestamp(0) == (10_000, 0)
    assert log.offset_for_timestamp(10_001) == (10_001, 1)
    assert log.offset_for_timestamp(10_050) == (10_100, 2)
    assert log.offset_for_timestamp(14_901) == (14_901, 99)
    assert log.offset_for_timestamp(15_000) is None
    assert log.offset_for_timestamp(-3) == (14_901, 99)


def test_max_timestamp_lookup_finds_the_record_inside_its_batch(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(
        build_batch([NewRecord(b"a", timestamp=5), NewRecord(b"b", timestamp=99), NewRecord(b"c", timestamp=7)])
    )
    assert log.offset_for_timestamp(-3) == (99, 1)


def test_roll_by_size_time_and_full_index(tmp_path):
    by_size = Log(str(tmp_path / "s-0"), LogConfig(segment_bytes=1000))
    batch = make_batch(1, value_size=300)
    for _ in range(6):
        by_size.append_as_leader(batch)
    assert all(s.size <= 1000 for s in by_size.segments) and len(by_size.segments) == 3

    by_time = Log(str(tmp_path / "t-0"), LogConfig(segment_ms=60_000))
    by_time.append_as_leader(make_batch(1, timestamp=1_000_000))
    by_time.append_as_leader(make_batch(1, timestamp=1_030_000))
    assert len(by_time.segments) == 1
    by_time.append_as_leader(make_batch(1, timestamp=1_061_000))
    assert len(by_time.segments) == 2 and by_time.active_segment.base_offset == 2

    by_index = Log(str(tmp_path / "i-0"), LogConfig(segment_index_bytes=24, index_interval_bytes=1))
    for _ in range(10):
        by_index.append_as_leader(make_batch(1))
    assert len(by_index.segments) > 1
    assert all(s.index.entries <= 3 for s in by_index.segments)
    assert read_all(by_index).count(b"v0") == 10


def test_retention_by_time_never_deletes_the_active_segment(tmp_path):
    clock = Clock(2_000.0)
    log = Log(str(tmp_path / "r-0"), LogConfig(segment_bytes=500, retention_ms=60_000), clock=clock)
    for i in range(20):
        log.append_as_leader(make_batch(1, value_size=200, timestamp=1_000_000 + i * 10_000))
    segments_before = len(log.segments)
    clock.now = (1_000_000 + 20 * 10_000 + 30_000) / 1000
    deleted = log.delete_old_segments()
    assert deleted > 0 and len(log.segments) == segments_before - deleted
    assert log.log_start_offset == log.segments[0].base_offset
    clock.now = 10**7
    log.delete_old_segments()
    assert len(log.segments) == 1 and log.log_start_offset == log.active_segment.base_offset
    assert log.log_end_offset == 20
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    for _ in range(30):
        log.append_as_leader(make_batch(1, value_size=300))
    log.delete_old_segments()
    assert log.size_in_bytes - log.active_segment.size <= 2500
    assert log.size_in_bytes > 2500 - 1000
    assert log.log_start_offset == log.segments[0].base_offset > 0


def test_deleted_segment_files_stay_readable_until_the_delay(tmp_path):
    clock = Clock(1.0)
    log = Log(
        str(tmp_path / "d-0"),
        LogConfig(segment_bytes=500, retention_bytes=0, file_delete_delay_ms=1000),
        monotonic=clock,  # file.delete.delay.ms is a duration: measured on the monotonic clock
    )
    for _ in range(4):
        log.append_as_leader(make_batch(1, value_size=300))
    in_flight = log.read(0, 1000).slices[0]
    log.delete_old_segments()
    assert log.log_start_offset == 3
    assert any(n.endswith(".log.deleted") for n in os.listdir(log.directory))
    assert b"v0" in in_flight.read()  # a fetch that already has the slice can still send it
    clock.now = 3.0
    log.delete_old_segments()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))


def test_delete_records_moves_the_log_start(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    for _ in range(10):
        log.append_as_leader(make_batch(1, value_size=200))
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(5)  # nothing is committed yet
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_records(5) == 5
    assert log.log_start_offset == 5
    assert log.segments[0].base_offset <= 5
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    assert BatchHeader.parse(log.read(5, 10).slices[0].read()).base_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(11)


def test_invalid_batches_leave_the_log_untouched(tmp_path):
    log = open_log(tmp_path, max_message_bytes=500)
    log.append_as_leader(make_batch(2))
    good_end = log.log_end_offset
    size_before = log.size_in_bytes
    corrupt = bytearray(make_batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bytes(corrupt))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(1, value_size=1000))
    old_magic = bytearray(make_batch(1))
    old_magic[16] = 1
    with pytest.raises(InvalidRecordError, match="magic"):
        log.append_as_leader(bytes(old_magic))
    wrong_count = bytearray(make_batch(3))
    wrong_count[60] = 2  # records count 2 but lastOffsetDelta 2
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytes(wrong_count))
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch(2)[:-5])
    # two batches where the second is bad: nothing of the first is written either
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch(1) + bytes(corrupt))
    assert log.log_end_offset == good_end and log.size_in_bytes == size_before


def test_log_append_time_overrides_timestamps(tmp_path):
    clock = Clock(1234.5)
    log = Log(str(tmp_path / "lat-0"), LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    info = log.append_as_leader(make_batch(3, timestamp=5))
    assert info.log_append_time == 1234500
    records = list(iter_records(read_all(log)))
    assert [r.timestamp for r in records] == [1234500] * 3
    assert list(iter_batch_headers(read_all(log)))[0].timestamp_type == 1


def test_topic_compression_recompresses(tmp_path):
    log = open_log(tmp_path, compression_type="gzip")
    log.append_as_leader(make_batch(5, value_size=100))
    stored = read_all(log)
    header = next(iter_batch_headers(stored))
    assert header.compression == 1
    assert [r.value[:2] for r in iter_records(stored)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]


def test_compressed_batches_are_stored_as_written(tmp_path):
    log = open_log(tmp_path)
    for codec in (1, 2, 3, 4):
        batch = make_batch(4, value_size=64, compression=codec)
        log.append_as_leader(batch)
    stored = read_all(log)
    assert [h.compression for h in iter_batch_headers(stored)] == [1, 2, 3, 4]
    assert len([r for r in iter_records(stored)]) == 16


def test_truncate_to_and_leader_epochs(tmp_path):
    log = open_log(tmp_path, segment_bytes=800)
    for epoch in range(3):
        for _ in range(5):
            log.append_as_leader(make_batch(2, value_size=100), leader_epoch=epoch)
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 10), (2, 20)]
    assert log.leader_epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 20)
    assert log.leader_epoch_cache.end_offset_for(2, log.log_end_offset) == (2, 30)
    assert log.truncate_to(14)
    assert log.log_end_offset == 14
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 10)]
    assert log.leader_epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 14)
    info = log.append_as_leader(make_batch(1), leader_epoch=3)
    assert info.first_offset == 14
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 10), (3, 14)]
    assert [r.offset for r in iter_records(read_all(log))] == list(range(15))
    assert not log.truncate_to(100)


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path)
    for _ in range(3):
        log.append_as_leader(make_batch(1), leader_epoch=1)
    log.truncate_fully_and_start_at(50)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (50, 50, 50)
    assert log.leader_epoch_cache.entries == []
    assert log.append_as_leader(make_batch(1)).first_offset == 50
    assert sorted(n for n in os.listdir(log.directory) if n.endswith(".log")) == ["00000000000000000050.log"]


def test_follower_append_keeps_leader_offsets_and_epochs(tmp_path):
    leader = Log(str(tmp_path / "l-0"), LogConfig())
    follower = Log(str(tmp_path / "f-0"), LogConfig())
    leader.append_as_leader(make_batch(2), leader_epoch=4)
    leader.append_as_leader(make_batch(3), leader_epoch=5)
    follower.append_as_follower(read_all(leader))
    assert follower.log_end_offset == 5
    assert read_all(follower) == read_all(leader)
    assert follower.leader_epoch_cache.entries == [(4, 0), (5, 2)]
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(read_all(leader))


def test_reopen_after_clean_close_keeps_everything(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500)
    for i in range(40):
        log.append_as_leader(make_batch(2, timestamp=5000 + i), leader_epoch=2)
    before = read_all(log)
    log.close()
    reopened = open_log(tmp_path, segment_bytes=1500)
    assert reopened.log_end_offset == 80
    assert read_all(reopened) == before
    assert reopened.offset_for_timestamp(5021) == (5021, 41)
    assert reopened.offset_for_timestamp(5039) == (5039, 77)
    assert reopened.leader_epoch_cache.entries == [(2, 0)]
    assert reopened.append_as_leader(make_batch(1)).first_offset == 80


def idempotent_batch(seq: int, count: int = 2, producer_id: int = 42, epoch: int = 0) -> bytes:
    return build_batch(
        [NewRecord(b"s%d" % (seq + i)) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def test_idempotent_retries_are_deduplicated_even_after_reopen(tmp_path):
    from strom.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceError

    log = open_log(tmp_path)
    first = log.append_as_leader(idempotent_batch(0))
    second = log.append_as_leader(idempotent_batch(2))
    retry = log.append_as_leader(idempotent_batch(0))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 4
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent_batch(7))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent_batch(3, producer_id=99))
    log.close()
    reopened = open_log(tmp_path)
    again = reopened.append_as_leader(idempotent_batch(2))
    assert again.duplicate and again.first_offset == second.first_offset
    assert reopened.append_as_leader(idempotent_batch(4)).first_offset == 4
    assert reopened.append_as_leader(idempotent_batch(0, epoch=1)).first_offset == 6
    with pytest.raises(InvalidProducerEpochError):
        reopened.append_as_leader(idempotent_batch(6, epoch=0))
    assert reopened.log_end_offset == 8
