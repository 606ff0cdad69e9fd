"""A broker's wall clock stepped forward or back (strom.clock), as Kafka's log takes it.

Record timestamps follow the wall clock (LogAppendTime, retention by time, ListOffsets by time);
durations (file.delete.delay.ms, flush.ms) follow the monotonic clock and ignore the jump.
"""

import os

from strom.clock import OFFSET_FILE_ENV, ShiftedClock, read_offset, write_offset
from strom.protocol.records import decode_batch_records
from strom.storage.log import MAX_TIMESTAMP, Log
from strom.storage.log_config import LogConfig
from tests.storage.helpers import make_batch

HOUR_S = 3600.0


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _timestamps(log: Log) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record, read back from the files."""
    found = []
    for header, chunk in log.iter_batches():
        found.extend((r.offset, r.timestamp) for r in decode_batch_records(chunk, header))
    return found


def test_log_append_time_going_back_keeps_each_time_index_increasing_and_list_offsets_exact(tmp_path):
    wall = Clock(1_000_000.0)
    log = Log(
        str(tmp_path / "lat-0"),
        LogConfig(message_timestamp_type="LogAppendTime", segment_bytes=700, index_interval_bytes=1),
        clock=wall,
    )
    steps = [10.0, 10.0, -HOUR_S, 10.0, 10.0, 2 * HOUR_S, -3 * HOUR_S, 10.0, 10.0, 10.0, -5.0, 10.0]
    for step in steps:  # several batches per step, over several segments
        for _ in range(2):
            log.append_as_leader(make_batch(2, value_size=60))
            wall.now += 0.001
        wall.now += step
    assert len(log.segments) > 3
    for segment in log.segments:
        entries = [segment.time_index.entry(i)[0] for i in range(segment.time_index.entries)]
        assert entries == sorted(set(entries)), entries  # only a new largest timestamp is indexed
        stored = [ts for offset, ts in _timestamps(log) if segment.base_offset <= offset < log.log_end_offset]
        assert segment.max_timestamp == max(stored[: segment.read_next_offset() - segment.base_offset])

    records = _timestamps(log)
    assert len(records) == log.log_end_offset == len(steps) * 4
    assert any(b[1] < a[1] for a, b in zip(records, records[1:]))  # the clock did go back
    probes = sorted({ts for _, ts in records} | {ts + 1 for _, ts in records} | {ts - 1 for _, ts in records})
    for target in probes:
        expected = next(((ts, offset) for offset, ts in records if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    largest = max(ts for _, ts in records)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (largest, next(o for o, ts in records if ts == largest))


def test_retention_counts_from_a_segments_largest_timestamp_so_a_shorter_jump_deletes_nothing(tmp_path):
    wall = Clock(1_000_000.0)
    log = Log(str(tmp_path / "ret-0"), LogConfig(segment_bytes=500, retention_ms=6 * 3_600_000), clock=wall)
    for _ in range(12):
        log.append_as_leader(make_batch(1, value_size=200, timestamp=int(wall.now * 1000)))
        wall.now += 1.0
    segments = len(log.segments)
    assert segments > 3

    wall.now += 5 * HOUR_S  # forward, less than retention.ms past the newest closed segment
    assert log.delete_old_segments() == 0 and len(log.segments) == segments
    wall.now -= 10 * HOUR_S  # back, to before anything was written
    assert log.delete_old_segments() == 0 and len(log.segments) == segments
    assert log.log_start_offset == 0 and len(_timestamps(log)) == 12

    wall.now += 5 * HOUR_S + 7 * HOUR_S  # now 7 h past every record: retention applies, as in Kafka
    assert log.delete_old_segments() == segments - 1
    assert log.log_start_offset == log.active_segment.base_offset


def test_deleted_files_go_after_the_delay_whatever_the_wall_clock_does(tmp_path):
    wall, steady = Clock(1_000_000.0), Clock(50.0)
    log = Log(
        str(tmp_path / "del-0"),
        LogConfig(segment_bytes=500, retention_bytes=0, file_delete_delay_ms=1000),
        clock=wall,
        monotonic=steady,
    )
    for _ in range(4):
        log.append_as_leader(make_batch(1, value_size=300))
    log.delete_old_segments()
    assert any(n.endswith(".deleted") for n in os.listdir(log.directory))
    wall.now += HOUR_S  # a jump forward does not cut the delay short: a fetch may still be sending them
    log.delete_old_segments()
    assert any(n.endswith(".deleted") for n in os.listdir(log.directory))
    wall.now -= 2 * HOUR_S  # a jump back does not keep them an hour longer
    steady.now += 1.5
    log.delete_old_segments()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))


def test_the_offset_file_shifts_the_clock_while_it_runs(tmp_path, monkeypatch):
    import time

    path = str(tmp_path / "clock")
    assert read_offset(path) == 0.0  # no file: no shift
    clock = ShiftedClock(path)
    assert abs(clock() - time.time()) < 60
    write_offset(path, 7200.5)
    assert read_offset(path) == 7200.5
    monkeypatch.setattr(clock, "_next_check", 0.0)  # the next read looks at the file again
    assert 7100 < clock() - time.time() < 7300
    (tmp_path / "clock").write_text("not a number")
    monkeypatch.setattr(clock, "_next_check", 0.0)
    assert 7100 < clock() - time.time() < 7300  # a bad file keeps the last offset
    write_offset(path, -3600)
    monkeypatch.setattr(clock, "_next_check", 0.0)
    assert -3700 < clock() - time.time() < -3500
    assert OFFSET_FILE_ENV == "STROM_CLOCK_OFFSET_FILE"
