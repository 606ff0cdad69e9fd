"""Compaction: latest value per key, tombstone expiry, and crash safety of the segment swap."""

import os

import pytest

from strom.protocol.records import iter_records
from strom.storage import cleaner
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from strom.storage.log_manager import LogManager
from tests.storage.helpers import keyed_batch

NOW_MS = 10_000_000_000


class Crash(Exception):
    pass


def compacted_log(directory, *, tombstone_ts=NOW_MS - 1000):
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=600, delete_retention_ms=60_000)
    log = Log(directory, config, clock=lambda: NOW_MS / 1000)
    for round_ in range(5):
        for key in (b"a", b"b", b"c", b"d"):
            log.append_as_leader(keyed_batch([(key, b"%s-%d" % (key, round_))], timestamp=NOW_MS - 5000))
    log.append_as_leader(keyed_batch([(b"d", None)], timestamp=tombstone_ts))
    log.append_as_leader(keyed_batch([(b"e", b"e-0")], timestamp=NOW_MS - 5000))
    log.roll()
    log.append_as_leader(keyed_batch([(b"z", b"active")], timestamp=NOW_MS))
    log.update_high_watermark(log.log_end_offset)
    return log


def contents(log):
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data.slices:
            break
        records = list(iter_records(b"".join(s.read() for s in data.slices)))
        out.extend((r.offset, r.key, r.value) for r in records)
        offset = records[-1].offset + 1
    return out


def test_keeps_latest_value_per_key_and_offsets(tmp_path):
    log = compacted_log(str(tmp_path / "c-0"))
    segments_before = len(log.segments)
    assert cleaner.dirty_ratio(log, 0) == 1.0
    result = cleaner.clean_log(log, 0)
    assert result.records_removed == 17  # a, b, c: 4 each; d: all 5 values (a tombstone follows)
    assert contents(log) == [
        (16, b"a", b"a-4"),
        (17, b"b", b"b-4"),
        (18, b"c", b"c-4"),
        (20, b"d", None),
        (21, b"e", b"e-0"),
        (22, b"z", b"active"),
    ]
    assert result.bytes_after < result.bytes_before / 3
    cleaner.clean_log(log, 0)  # a second pass merges the now small segments, as Kafka groups by size
    assert len(log.segments) < segments_before
    assert result.first_dirty_offset == 22
    assert cleaner.dirty_ratio(log, result.first_dirty_offset) == 0.0
    assert not any(
        n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(log.directory) if not n.endswith(".deleted")
    )


def test_expired_tombstones_are_dropped(tmp_path):
    log = compacted_log(str(tmp_path / "t-0"), tombstone_ts=NOW_MS - 120_000)
    cleaner.clean_log(log, 0)
    keys = [k for _, k, _ in contents(log)]
    assert b"d" not in keys and keys == [b"a", b"b", b"c", b"e", b"z"]


def test_compacted_log_survives_reopen(tmp_path):
    directory = str(tmp_path / "r-0")
    log = compacted_log(directory)
    cleaner.clean_log(log, 0)
    expected = contents(log)
    log.close()
    reopened = Log(directory, log.config)
    assert contents(reopened) == expected
    assert reopened.append_as_leader(keyed_batch([(b"a", b"new")])).first_offset == 23


@pytest.mark.parametrize("step", ["cleaned-written", "renamed-to-swap", "old-segment-deleted", "swap-renamed"])
def test_crash_between_each_rename_step_loses_nothing(tmp_path, step):
    directory = str(tmp_path / "k-0")
    log = compacted_log(directory)
    before = {(k, v) for _, k, v in contents(log)}
    latest = {}
    for _, k, v in contents(log):
        latest[k] = v

    def crash(at):
        if at == step:
            raise Crash(at)

    with pytest.raises(Crash):
        cleaner.clean_log(log, 0, crash_hook=crash)
    log.close_crashlike()
    recovered = Log(directory, log.config, had_clean_shutdown=False, clock=log.clock)
    after = contents(recovered)
    # Every key still has its latest value, nothing new appeared, and offsets are ordered.
    found = {}
    for _, k, v in after:
        found[k] = v
    assert found == latest
    assert {(k, v) for _, k, v in after} <= before
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert recovered.log_end_offset == 23
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(directory))
    # and the cleaner can finish the job afterwards
    recovered.update_high_watermark(recovered.log_end_offset)
    cleaner.clean_log(recovered, 0)
    assert [k for _, k, _ in contents(recovered)] == [b"a", b"b", b"c", b"d", b"e", b"z"]


@pytest.mark.parametrize("change", ["truncation", "retention", "roll-only"])
def test_a_round_whose_segments_changed_meanwhile_is_abandoned(tmp_path, change):
    """The cleaner process works on a plan taken earlier; the swap on the event loop checks that
    the segments it replaces are still the log's. A roll (appends go on) does not matter."""
    directory = str(tmp_path / "m-0")
    log = compacted_log(directory)
    plan = cleaner.plan_cleaning(log, 0)
    outcome = cleaner.run_cleaning(plan.job)
    assert any(n.endswith(".cleaned") for n in os.listdir(directory))
    if change == "truncation":
        log.truncate_to(10)
    elif change == "retention":
        log.delete_records(log.segments[1].base_offset)  # the first segment goes
    else:
        log.append_as_leader(keyed_batch([(b"y", b"later")], timestamp=NOW_MS))
        log.roll()
    before = contents(log)
    result = cleaner.install(log, plan, outcome)
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(directory))
    if change == "roll-only":
        assert result is not None and result.records_removed == 17
        assert [k for _, k, _ in contents(log)] == [b"a", b"b", b"c", b"d", b"e", b"z", b"y"]
    else:
        assert result is None
        assert contents(log) == before  # nothing of the abandoned round reached the log


def test_max_compaction_lag_rolls_and_cleans_below_the_dirty_ratio_unless_min_lag_holds_it(tmp_path):
    """KIP-354 on three logs with min.cleanable.dirty.ratio=0.99, fed the same records: a first round
    cleans each (nothing is clean yet: ratio 1.0); the second dirty segment is cleaned only where
    max.compaction.lag.ms is set and min.compaction.lag.ms does not hold it back."""
    overrides = {
        "lagged": {"max.compaction.lag.ms": "60000"},
        "plain": {"segment.ms": "60000"},  # rolls as "lagged" does, without the lag
        # overdue too, but its newest record is within min.compaction.lag.ms
        "held": {"segment.ms": "60000", "max.compaction.lag.ms": "120000", "min.compaction.lag.ms": "120000"},
    }
    config = LogConfig(cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.99)
    manager = LogManager([str(tmp_path)], config, topic_overrides=lambda t: overrides[t], clock=lambda: NOW_MS / 1000)
    manager.startup()
    t0 = NOW_MS - 200_000
    logs = {topic: manager.get_or_create_log((topic, 0)) for topic in overrides}
    assert logs["lagged"].config.max_segment_ms == 60_000 and logs["plain"].config.max_segment_ms == 60_000

    def feed(first_ts: int, closer: bytes) -> None:
        for log in logs.values():
            for round_ in range(5):
                for key in (b"a", b"b", b"c"):
                    batch = keyed_batch([(key, b"%s-%d" % (key, round_))], timestamp=first_ts + 10_000 * round_)
                    log.append_as_leader(batch)
            segments = len(log.segments)
            log.append_as_leader(keyed_batch([(closer, b"")], timestamp=first_ts + 61_000))
            assert len(log.segments) == segments + 1  # rolled by max.compaction.lag.ms (or segment.ms)
            log.update_high_watermark(log.log_end_offset)

    feed(t0, b"x")
    assert manager.compaction.clean_logs() == 3
    assert all(cleaner.dirty_ratio(log, 15) == 0.0 for log in logs.values())
    feed(t0 + 61_001, b"y")
    assert all(cleaner.dirty_ratio(log, 15) < 0.99 for log in logs.values())
    assert cleaner.max_compaction_delay(logs["plain"], 15) == 0
    assert cleaner.max_compaction_delay(logs["lagged"], 15) == NOW_MS - 60_000 - (t0 + 61_000)
    assert cleaner.max_compaction_delay(logs["held"], 15) > 0
    assert manager.compaction.clean_logs() == 1

    keys = [(key, value) for _, key, value in contents(logs["lagged"])]
    assert keys == [(b"x", b""), (b"a", b"a-4"), (b"b", b"b-4"), (b"c", b"c-4"), (b"y", b"")]
    untouched = [(b"a", b"a-4"), (b"b", b"b-4"), (b"c", b"c-4"), (b"x", b"")]
    untouched += [(k, b"%s-%d" % (k, r)) for r in range(5) for k in (b"a", b"b", b"c")] + [(b"y", b"")]
    assert [(key, value) for _, key, value in contents(logs["plain"])] == untouched
    assert [(key, value) for _, key, value in contents(logs["held"])] == untouched


def test_a_cleaned_segment_written_back_in_steps_keeps_every_record(tmp_path, monkeypatch):
    """The cleaner's fdatasync every WRITEBACK_STEP_BYTES (made small here) changes no byte."""
    monkeypatch.setattr(cleaner, "WRITEBACK_STEP_BYTES", 500)
    directory = str(tmp_path / "w-0")
    log = compacted_log(directory)
    for n in range(40):  # unique keys: all of them survive, in several write-back steps
        log.append_as_leader(keyed_batch([(b"u-%d" % n, b"x" * 100)], timestamp=NOW_MS - 5000))
    log.roll()
    log.append_as_leader(keyed_batch([(b"z", b"active-2")], timestamp=NOW_MS))
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean_log(log, 0)
    expected = contents(log)
    assert [k for _, k, _ in expected if k.startswith(b"u-")] == [b"u-%d" % n for n in range(40)]
    log.close()
    assert contents(Log(directory, log.config)) == expected


def test_a_round_gives_way_inside_a_large_batch(tmp_path):
    """A cleaner process yields its CPU every few hundred microseconds (cleaner_process.GiveWay),
    which needs a call inside a batch: one of 1,000 records takes milliseconds to decode."""
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=1 << 20, delete_retention_ms=60_000)
    log = Log(str(tmp_path / "big-0"), config, clock=lambda: NOW_MS / 1000)
    log.append_as_leader(keyed_batch([(b"k%d" % (i % 10), b"v%d" % i) for i in range(1000)], timestamp=NOW_MS))
    log.roll()
    log.append_as_leader(keyed_batch([(b"z", b"active")], timestamp=NOW_MS))
    log.update_high_watermark(log.log_end_offset)
    calls = []
    plan = cleaner.plan_cleaning(log, 0)
    outcome = cleaner.run_cleaning(plan.job, give_way=lambda: calls.append(1))
    # both passes (the offset map, then the copy) decode the batch: a call every 32 records of each
    assert len(calls) == 2 * -(-1000 // cleaner.GIVE_WAY_EVERY_RECORDS)
    result = cleaner.install(log, plan, outcome)
    assert result is not None and result.records_removed == 990
    assert contents(log)[:10] == [(990 + i, b"k%d" % i, b"v%d" % (990 + i)) for i in range(10)]
