from strom.storage.leader_epoch import LeaderEpochCache


def test_assign_keeps_epochs_and_offsets_monotonic(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(0, 0)
    cache.assign(1, 10)
    cache.assign(1, 15)  # same epoch, later offset: no change
    cache.assign(2, 20)
    assert cache.entries == [(0, 0), (1, 10), (2, 20)]
    cache.assign(2, 12)  # a re-elected epoch starting earlier replaces the later entries
    assert cache.entries == [(0, 0), (1, 10), (2, 12)]
    assert LeaderEpochCache(str(tmp_path)).entries == cache.entries


def test_end_offset_for_follows_kafka(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, start in [(1, 5), (3, 20), (4, 30)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(4, 42) == (4, 42)  # latest epoch ends at the log end
    assert cache.end_offset_for(3, 42) == (3, 30)
    assert cache.end_offset_for(2, 42) == (1, 20)  # unknown epoch: largest below it, next start
    assert cache.end_offset_for(0, 42) == (0, 5)  # below the first epoch
    assert cache.end_offset_for(9, 42) == (-1, -1)
    assert cache.end_offset_for(-1, 42) == (-1, -1)


def test_truncation_from_end_and_start(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    for epoch, start in [(0, 0), (1, 10), (2, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(15)
    assert cache.entries == [(0, 0), (1, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(1, 12)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 12\n"
