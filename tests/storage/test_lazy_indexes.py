"""Index files made on first need (issue 13): which files a log has when, and that every log
operation works while they are absent."""

from __future__ import annotations

import os

from strom.protocol.records import iter_records
from strom.storage.checkpoint import LeaderEpochCheckpointFile
from strom.storage.cleaner import clean_log
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from tests.storage.helpers import keyed_batch, make_batch

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)


def files(directory: str) -> list[str]:
    return sorted(os.listdir(directory))


def read_values(log: Log, offset: int) -> list[bytes]:
    """Values from ``offset`` to the log end, fetch by fetch (a fetch reads one segment)."""
    values: list[bytes] = []
    while offset < log.log_end_offset:
        data = b"".join(s.read() for s in log.read(offset, 1 << 20).slices)
        records = [r for r in iter_records(data) if r.offset >= offset]
        if not records:
            break
        values += [r.value or b"" for r in records]
        offset = records[-1].offset + 1
    return values


def fill(log: Log, count: int) -> None:
    for i in range(count):
        log.append_as_leader(make_batch(1, value_size=60, timestamp=T0 + 1000 * i, prefix=b"r%d-" % i))


def test_a_new_log_makes_only_its_log_file_until_it_needs_more(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, CONFIG)
    assert files(directory) == ["00000000000000000000.log"]
    assert log.read(0, 1000).slices == [] and log.offset_for_timestamp(T0) is None
    fill(log, 2)  # below index.interval.bytes: no entry, no index file
    assert files(directory) == ["00000000000000000000.log"]
    assert read_values(log, 1)[0].startswith(b"r1-") and log.offset_for_timestamp(T0 + 500) == (T0 + 1000, 1)
    fill(log, 2)
    assert "00000000000000000000.index" in files(directory)  # the first entry made it
    log.close()
    reopened = Log(directory, CONFIG)
    assert [v[:3] for v in read_values(reopened, 0)] == [b"r0-", b"r1-", b"r0-", b"r1-"]
    reopened.close()


def test_roll_retention_truncation_and_deletion_with_absent_files(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, CONFIG.with_overrides({"retention.bytes": "2500", "file.delete.delay.ms": "0"}))
    fill(log, 40)
    assert len(log.segments) > 2
    active = log.active_segment
    for segment in log.segments[:-1]:  # a rolled segment's files are final: both exist
        assert os.path.exists(segment.index.path) and os.path.exists(segment.time_index.path)
    assert not os.path.exists(active.txn_index.path)
    assert log.delete_old_segments() > 0  # retention.bytes
    assert log.log_start_offset > 0 and read_values(log, log.log_start_offset)
    # the active segment may have no index file: reads, lookups by time and truncation still work
    log.roll()
    log.append_as_leader(make_batch(1, timestamp=T0 + 10**6, prefix=b"last-"))
    assert not os.path.exists(log.active_segment.index.path)
    assert log.offset_for_timestamp(T0 + 10**6) == (T0 + 10**6, 40)
    assert read_values(log, 40)[0].startswith(b"last-")
    log.truncate_to(40)
    assert log.log_end_offset == 40 and files(directory).count("00000000000000000040.log") == 1
    log.truncate_fully_and_start_at(100)
    assert [n for n in files(directory) if not n.endswith(".deleted")] == [
        "00000000000000000100.log",
        "leader-epoch-checkpoint",
    ]
    log.delete()
    assert not os.path.exists(directory)


def test_crash_with_absent_or_torn_index_files_rebuilds_them(tmp_path):
    directory = str(tmp_path / "t-0")
    log = Log(directory, LogConfig(index_interval_bytes=200))
    fill(log, 30)
    expected = read_values(log, 17)
    log.close_crashlike()
    index = os.path.join(directory, "00000000000000000000.index")
    time_index = os.path.join(directory, "00000000000000000000.timeindex")
    os.unlink(index)  # a crash before the file was made, or a lost one
    with open(time_index, "r+b") as handle:
        handle.truncate(12 * 3 + 5)  # torn
    reopened = Log(directory, LogConfig(index_interval_bytes=200), had_clean_shutdown=False)
    assert read_values(reopened, 17) == expected
    assert reopened.offset_for_timestamp(T0 + 17_000 - 1) == (T0 + 17_000, 17)
    assert reopened.active_segment.index.entries > 5
    reopened.close()
    assert (
        os.path.getsize(index) == 8 * Log(directory, LogConfig(index_interval_bytes=200)).active_segment.index.entries
    )


def test_compaction_of_segments_without_index_entries(tmp_path):
    directory = str(tmp_path / "t-0")
    config = LogConfig(segment_bytes=300, index_interval_bytes=4096, cleanup_policy="compact")
    log = Log(directory, config)
    for i in range(12):
        log.append_as_leader(keyed_batch([(b"k%d" % (i % 3), b"v%d" % i)], timestamp=T0 + i))
    assert len(log.segments) >= 3
    log.update_high_watermark(log.log_end_offset)
    result = clean_log(log, 0)
    assert result.records_removed > 0
    values = read_values(log, 0)
    assert values[-3:] == [b"v9", b"v10", b"v11"]
    for segment in log.segments[:-1]:
        assert segment.index.entries == 0  # the interval was never reached
        assert segment.size == 0 or os.path.exists(segment.index.path)
    log.close()
    reopened = Log(directory, config)
    assert read_values(reopened, 0) == values
    reopened.close()


def test_a_clean_close_makes_and_rewrites_nothing_it_does_not_need(tmp_path):
    directory = str(tmp_path / "t-0")
    Log(directory, CONFIG).close()  # a follower's new replica: no batch, no leader epoch
    assert files(directory) == ["00000000000000000000.log"]
    log = Log(directory, CONFIG)
    log.leader_epoch_cache.assign(3, 0)  # becoming leader writes the checkpoint at once
    checkpoint = os.path.join(directory, "leader-epoch-checkpoint")
    written = os.stat(checkpoint).st_ino
    log.close()
    assert os.stat(checkpoint).st_ino == written  # not rewritten: it holds the entries already
    # what the file holds (a reopened Log drops it again, as Kafka does: the epoch starts at the log end)
    assert LeaderEpochCheckpointFile(checkpoint).read() == [(3, 0)]
