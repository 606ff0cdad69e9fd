"""Crash recovery: torn tails, corrupt batches, and missing or damaged index files."""

import os
import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom.protocol.records import iter_batch_headers, iter_records
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from tests.storage.helpers import make_batch

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=128)


def build_crashed_log(directory: str, batches: int = 30) -> list[int]:
    """A log with several segments, closed the way kill -9 leaves it; returns batch end offsets."""
    log = Log(directory, CONFIG)
    for i in range(batches):
        log.append_as_leader(make_batch(2, value_size=40, prefix=b"r%d-" % i), leader_epoch=0)
    ends = [s.base_offset for s in log.segments]
    log.close_crashlike()
    return ends


def last_segment_path(directory: str) -> str:
    return os.path.join(directory, sorted(n for n in os.listdir(directory) if n.endswith(".log"))[-1])


def values(log: Log) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = b"".join(s.read() for s in log.read(offset, 1 << 20).slices)
        records = list(iter_records(data))
        out.extend(r.value for r in records)
        offset = records[-1].offset + 1
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_recovery_after_cutting_the_last_batch_at_any_byte(tmp_path_factory, cut):
    template = str(tmp_path_factory.mktemp("template") / "t-0")
    build_crashed_log(template)
    path = last_segment_path(template)
    with open(path, "rb") as handle:
        data = handle.read()
    last = list(iter_batch_headers(data))[-1]
    cut_at = last.position + cut % last.size  # somewhere inside the last batch, header included
    work = str(tmp_path_factory.mktemp("work") / "t-0")
    shutil.copytree(template, work)
    with open(last_segment_path(work), "r+b") as handle:
        handle.truncate(cut_at)
    log = Log(work, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert log.log_end_offset == 58  # the last batch (offsets 58, 59) is gone, nothing else
    got = values(log)
    assert len(got) == 58 and got[-1].startswith(b"r28-1")
    assert log.append_as_leader(make_batch(1), leader_epoch=1).first_offset == 58
    log.close()


def test_recovery_every_byte_of_last_batch_exhaustively(tmp_path):
    """The property above, for every single byte position of the last batch."""
    template = str(tmp_path / "template" / "t-0")
    build_crashed_log(template, batches=3)
    with open(last_segment_path(template), "rb") as handle:
        data = handle.read()
    last = list(iter_batch_headers(data))[-1]
    for cut_at in range(last.position, last.position + last.size):
        work = str(tmp_path / f"w{cut_at}" / "t-0")
        shutil.copytree(template, work)
        with open(last_segment_path(work), "r+b") as handle:
            handle.truncate(cut_at)
        log = Log(work, CONFIG, had_clean_shutdown=False)
        assert log.log_end_offset == last.base_offset, cut_at
        log.close()
        shutil.rmtree(work)


def test_corrupt_batch_in_the_middle_truncates_there_and_drops_later_segments(tmp_path):
    directory = str(tmp_path / "c-0")
    bases = build_crashed_log(directory)
    assert len(bases) >= 3
    second = os.path.join(directory, f"{bases[1]:020d}.log")
    with open(second, "r+b") as handle:
        data = bytearray(handle.read())
        headers = list(iter_batch_headers(data))
        data[headers[2].position + 70] ^= 0x55  # inside the records: CRC mismatch
        handle.seek(0)
        handle.write(data)
    log = Log(directory, CONFIG, had_clean_shutdown=False)
    assert log.log_end_offset == headers[2].base_offset
    assert len(log.segments) == 2
    assert len(values(log)) == headers[2].base_offset


def test_clean_shutdown_skips_recovery_but_rebuilds_missing_indexes(tmp_path):
    directory = str(tmp_path / "i-0")
    log = Log(directory, CONFIG)
    for i in range(30):
        log.append_as_leader(make_batch(2, value_size=40, timestamp=10_000 + i * 10))
    expected = values(log)
    log.close()
    first = sorted(n for n in os.listdir(directory) if n.endswith(".index"))[0]
    os.unlink(os.path.join(directory, first))
    reopened = Log(directory, CONFIG)
    assert values(reopened) == expected
    assert reopened.segments[0].index.entries > 0
    assert reopened.offset_for_timestamp(10_001) == (10_001, 1)
    reopened.close()


def test_corrupt_index_files_are_rebuilt(tmp_path):
    directory = str(tmp_path / "x-0")
    log = Log(directory, CONFIG)
    for i in range(30):
        log.append_as_leader(make_batch(2, value_size=40, timestamp=20_000 + i * 10))
    expected = values(log)
    log.close()
    names = sorted(os.listdir(directory))
    index = os.path.join(directory, [n for n in names if n.endswith(".index")][0])
    with open(index, "ab") as handle:
        handle.write(b"\x01\x02\x03")  # not a multiple of the entry size
    time_index = os.path.join(directory, [n for n in names if n.endswith(".timeindex")][1])
    os.unlink(time_index)
    second_index = os.path.join(directory, [n for n in names if n.endswith(".index")][1])
    with open(second_index, "r+b") as handle:
        handle.write(b"\x00\x00\x00\x05\x7f\xff\xff\xff")  # points far past the end of the log
    reopened = Log(directory, CONFIG)
    assert values(reopened) == expected
    for offset in range(reopened.log_end_offset):
        header = next(iter_batch_headers(reopened.read(offset, 1).slices[0].read()))
        assert header.base_offset <= offset <= header.last_offset
    assert reopened.offset_for_timestamp(20_100) == (20_100, 20)
    reopened.close()


def test_crash_left_preallocated_indexes_reopen(tmp_path):
    directory = str(tmp_path / "p-0")
    build_crashed_log(directory)
    log = Log(directory, CONFIG, had_clean_shutdown=False)
    assert log.log_end_offset == 60
    assert len(values(log)) == 60
    log.close()
    sizes = [os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".index")]
    assert all(size % 8 == 0 and size < CONFIG.segment_index_bytes for size in sizes)
