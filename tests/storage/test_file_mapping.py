"""Index mappings that hold no descriptor: what is stored reaches the file, a closed mapping
refuses use instead of crashing, and a partition replica costs one open file."""

from __future__ import annotations

import os

import pytest

from strom.protocol.records import iter_records
from strom.storage.file_mapping import FileMapping
from strom.storage.log_config import LogConfig
from strom.storage.log_manager import LogManager
from tests.storage.helpers import make_batch


def test_stores_reach_the_file_and_the_descriptor_is_not_needed(tmp_path):
    path = tmp_path / "f.index"
    path.write_bytes(bytes(8192))
    fd = os.open(path, os.O_RDWR)
    mapping = FileMapping(fd, 8192)
    os.close(fd)  # the mapping lives on without it
    mapping.view[100:105] = b"hello"
    mapping.view[8191] = 7
    mapping.flush()
    assert path.read_bytes()[100:105] == b"hello"
    assert path.read_bytes()[8191] == 7
    assert len(mapping) == 8192 and bytes(mapping.view[100:105]) == b"hello"
    view = mapping.view
    mapping.close()
    with pytest.raises(ValueError):  # released, not unmapped memory read
        view[0]
    mapping.close()  # twice is harmless


def test_a_mapping_of_nothing_is_refused(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(ValueError):
            FileMapping(fd, 0)
    finally:
        os.close(fd)


def descriptors_under(directory) -> int:
    """Count this process's descriptors on files under ``directory``. Counting every
    descriptor would let another test's thread in the same worker, closing a socket at the
    wrong moment, change the figure."""
    prefix = str(directory) + os.sep
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed between the listing and the read
        count += target.startswith(prefix)
    return count


def test_each_new_partition_replica_holds_one_descriptor(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig(index_interval_bytes=64))
    assert descriptors_under(tmp_path) == 0
    for partition in range(50):
        manager.get_or_create_log(("t", partition))
    assert descriptors_under(tmp_path) == 50
    # appends write index entries and a read from the middle looks one up, through the mappings
    log = manager.logs[("t", 7)]
    for i in range(40):
        log.append_as_leader(make_batch(2, prefix=b"r%d-" % i), leader_epoch=0)
    assert log.active_segment.index.entries > 10
    chunk = b"".join(s.read() for s in log.read(51, 1 << 20).slices)
    assert [r.value[:6] for r in iter_records(chunk)][:2] == [b"r25-0.", b"r25-1."]
    manager.shutdown()
    assert descriptors_under(tmp_path) == 0
