import os

import pytest

from strom.storage.index_file import CorruptIndexError
from strom.storage.offset_index import OffsetIndex
from strom.storage.time_index import TimeIndex


def test_lookup_at_every_boundary(tmp_path):
    index = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, 1024)
    for i in range(10):
        index.append(100 + i * 10, i * 4096)
    assert index.lookup(99) == (100, 0)
    for i in range(10):
        assert index.lookup(100 + i * 10) == (100 + i * 10, i * 4096)
        assert index.lookup(100 + i * 10 + 9) == (100 + i * 10, i * 4096)
    assert index.lookup(10**9) == (190, 9 * 4096)


def test_entries_must_increase_and_file_is_preallocated_then_trimmed(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    index = OffsetIndex(path, 0, 800)
    assert not os.path.exists(path)  # made by the first entry (Kafka's LazyIndex)
    assert index.lookup(7) == (0, 0)
    index.append(5, 0)
    assert os.path.getsize(path) == 800
    with pytest.raises(CorruptIndexError):
        index.append(5, 10)
    index.append(9, 100)
    index.close()
    assert os.path.getsize(path) == 16
    with open(path, "rb") as handle:
        assert handle.read() == bytes.fromhex("00000005 00000000 00000009 00000064".replace(" ", ""))
    reopened = OffsetIndex(path, 0, 800, writable=False)
    assert reopened.entries == 2 and reopened.last_offset == 9


def test_full_index_and_truncation(tmp_path):
    index = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 32)
    for i in range(4):
        index.append(i * 2, i * 100)
    assert index.is_full
    with pytest.raises(CorruptIndexError):
        index.append(100, 1000)
    index.truncate_to(4)
    assert index.entries == 2 and index.lookup(100) == (2, 100)


def test_crash_left_preallocated_tail_is_not_counted(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    index = OffsetIndex(path, 0, 8000)
    for i in range(7):
        index.append(i * 3, i * 50)
    index.close_without_trim()
    assert os.path.getsize(path) == 8000
    reopened = OffsetIndex(path, 0, 8000)
    assert reopened.entries == 7 and reopened.last_offset == 18


def test_size_not_a_multiple_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(path), 0, 1024)


def test_time_index_keeps_only_growing_timestamps(tmp_path):
    index = TimeIndex(str(tmp_path / "00000000000000000010.timeindex"), 10, 1200)
    assert index.maybe_append(1000, 10)
    assert not index.maybe_append(999, 12)
    assert not index.maybe_append(1000, 13)
    assert index.maybe_append(2000, 20)
    assert index.lookup(500) == (-1, 10)
    assert index.lookup(1500) == (1000, 10)
    assert index.lookup(2000) == (2000, 20)
    index.truncate_to(20)
    assert index.last_entry == (1000, 10)
    index.close()
    assert os.path.getsize(tmp_path / "00000000000000000010.timeindex") == 12


def test_an_index_never_written_leaves_no_file(tmp_path):
    path = str(tmp_path / "00000000000000000000.timeindex")
    index = TimeIndex(path, 0, 1200)
    assert index.lookup(10**12) == (-1, 0) and not index.is_full
    index.flush()
    index.close()
    assert not os.path.exists(path)
    index = TimeIndex(path, 0, 1200)
    index.materialize()  # what a segment with data does on roll and close: an empty file
    index.close()
    assert os.path.getsize(path) == 0
