import asyncio
import os

import pytest

from strom.storage.log_config import LogConfig
from strom.storage.log_dir_error import LogDirError
from strom.storage.log_manager import LogManager, SchedulerIntervals
from tests.storage.helpers import make_batch


def test_layout_checkpoints_and_clean_shutdown(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    manager = LogManager(dirs, LogConfig(segment_bytes=1000), broker_id=3)
    manager.startup()
    for partition in range(4):
        partition_log = manager.get_or_create_log(("my.topic_a-b", partition))
        for _ in range(5):
            partition_log.append_as_leader(make_batch(1, value_size=300), leader_epoch=1)
        partition_log.update_high_watermark(partition_log.log_end_offset)
    assert {manager.log_dir_of(("my.topic_a-b", p)) for p in range(4)} == set(os.path.abspath(d) for d in dirs)
    manager.shutdown()
    for d in dirs:
        names = set(os.listdir(d))
        assert {
            ".kafka_cleanshutdown",
            "meta.properties",
            "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint",
            "log-start-offset-checkpoint",
        } <= names
        assert "broker.id=3" in open(os.path.join(d, "meta.properties")).read()
        lines = open(os.path.join(d, "recovery-point-offset-checkpoint")).read().splitlines()
        assert lines[:2] == ["0", "2"] and all(line.endswith(" 5") for line in lines[2:])
    partition_dir = os.path.join(manager.log_dir_of(("my.topic_a-b", 0)), "my.topic_a-b-0")
    assert sorted(os.listdir(partition_dir))[:3] == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert open(os.path.join(partition_dir, "leader-epoch-checkpoint")).read() == "0\n1\n1 0\n"

    again = LogManager(dirs, LogConfig(segment_bytes=1000), broker_id=3)
    again.startup()
    assert again.had_clean_shutdown
    assert not any(os.path.exists(os.path.join(d, ".kafka_cleanshutdown")) for d in dirs)
    assert sorted(again.logs) == [("my.topic_a-b", p) for p in range(4)]
    assert all(log.log_end_offset == 5 and log.high_watermark == 5 for log in again.logs.values())
    again.shutdown()


def test_crash_is_detected_and_recovered(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    manager.startup()
    partition_log = manager.get_or_create_log(("t", 0))
    for _ in range(3):
        partition_log.append_as_leader(make_batch(2))
    partition_log.close_crashlike()  # kill -9: no marker, no checkpoints
    with open(partition_log.segments[0].log_path, "ab") as handle:
        handle.write(b"\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00\x01")  # a torn half-written batch
    recovered = LogManager([str(tmp_path)], LogConfig())
    recovered.startup()
    assert not recovered.had_clean_shutdown
    assert recovered.logs[("t", 0)].log_end_offset == 6
    recovered.shutdown()


def test_wrong_broker_id_is_refused(tmp_path):
    LogManager([str(tmp_path)], LogConfig(), broker_id=1).startup()
    with pytest.raises(LogDirError, match="broker.id=1"):
        LogManager([str(tmp_path)], LogConfig(), broker_id=2).startup()


def test_delete_log_removes_the_directory(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    manager.startup()
    manager.get_or_create_log(("gone", 0)).append_as_leader(make_batch(1))
    manager.delete_log(("gone", 0))
    assert manager.get_log(("gone", 0)) is None
    assert not any(n.startswith("gone") for n in os.listdir(tmp_path))


def test_topic_overrides_apply_to_new_and_existing_logs(tmp_path):
    overrides = {"compacted": {"cleanup.policy": "compact", "segment.bytes": "2048"}}
    manager = LogManager([str(tmp_path)], LogConfig(), topic_overrides=lambda t: overrides.get(t, {}))
    manager.startup()
    assert manager.get_or_create_log(("compacted", 0)).config.compact
    assert manager.get_or_create_log(("compacted", 0)).config.segment_bytes == 2048
    assert not manager.get_or_create_log(("plain", 0)).config.compact
    overrides["plain"] = {"retention.ms": "1000"}
    manager.update_topic_config("plain")
    assert manager.get_log(("plain", 0)).config.retention_ms == 1000


def test_scheduler_runs_retention_and_stops(tmp_path):
    manager = LogManager(
        [str(tmp_path)],
        LogConfig(segment_bytes=500, retention_bytes=0, file_delete_delay_ms=0),
        intervals=SchedulerIntervals(retention_check_ms=20, flush_check_ms=20, checkpoint_ms=20, cleaner_backoff_ms=20),
    )
    manager.startup()
    partition_log = manager.get_or_create_log(("r", 0))
    for _ in range(6):
        partition_log.append_as_leader(make_batch(1, value_size=300))

    async def run():
        stop = asyncio.Event()
        task = asyncio.create_task(manager.run_scheduler(stop))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if partition_log.log_start_offset == 5:
                break
        stop.set()
        await asyncio.wait_for(task, 5)

    asyncio.run(run())
    assert partition_log.log_start_offset == 5 and len(partition_log.segments) == 1
    assert os.path.exists(tmp_path / "recovery-point-offset-checkpoint")


def test_a_failed_write_takes_only_its_log_dir_offline_until_a_restart(tmp_path):
    """Kafka's LogDirFailureChannel: the dir that failed serves nothing more, the other one goes on,
    shutdown leaves the failed one to recovery, and new logs are refused while a dir is offline."""
    from strom.protocol.errors import KafkaStorageError

    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    failed_dirs = []

    async def scenario():
        manager = LogManager(dirs, LogConfig())
        manager.failure_listeners.append(failed_dirs.append)
        manager.startup()
        bad, good = manager.get_or_create_log(("t", 0)), manager.get_or_create_log(("t", 1))
        assert manager.log_dir_of(("t", 0)) != manager.log_dir_of(("t", 1))
        for partition_log in (bad, good):
            partition_log.append_as_leader(make_batch(3), leader_epoch=0)
        manager.write_behind.write_all()
        bad.append_as_leader(make_batch(2), leader_epoch=0)  # held in the buffer
        good.append_as_leader(make_batch(2), leader_epoch=0)
        os.close(bad.active_segment._fd)  # the next write fails for real (EBADF)
        await asyncio.sleep(0)  # the end of the turn writes both buffers
        await asyncio.sleep(0)
        assert failed_dirs == [manager.log_dir_of(("t", 0))]
        assert manager.offline_dirs == {manager.log_dir_of(("t", 0))}
        with pytest.raises(KafkaStorageError, match="offline"):
            manager.get_or_create_log(("t", 2))
        bad.active_segment._fd = -1  # closed above
        manager.shutdown()
        return manager

    manager = asyncio.run(scenario())
    bad_dir, good_dir = manager.log_dir_of(("t", 0)), manager.log_dir_of(("t", 1))
    assert os.path.exists(os.path.join(good_dir, ".kafka_cleanshutdown"))
    assert not os.path.exists(os.path.join(bad_dir, ".kafka_cleanshutdown"))
    again = LogManager(dirs, LogConfig())
    again.startup()
    assert not again.offline_dirs
    assert again.logs[("t", 0)].log_end_offset == 3  # the unwritten append is gone, the written one stays
    assert again.logs[("t", 1)].log_end_offset == 5
    again.shutdown()


def test_reconfigure_gives_every_log_the_new_defaults_under_its_topics_overrides(tmp_path):
    """Dynamic broker configs (KIP-226): new log.* defaults reach open logs, a topic's own key wins."""
    from strom.storage.cleaner import CleanerSettings

    overrides = {"kept": {"retention.ms": "1000"}}
    manager = LogManager([str(tmp_path)], LogConfig(), topic_overrides=lambda topic: overrides.get(topic, {}))
    manager.startup()
    plain, kept = manager.get_or_create_log(("plain", 0)), manager.get_or_create_log(("kept", 0))
    manager.reconfigure(LogConfig(retention_ms=3_600_000, segment_bytes=2048), CleanerSettings(threads=2))
    assert (plain.config.retention_ms, plain.config.segment_bytes) == (3_600_000, 2048)
    assert (kept.config.retention_ms, kept.config.segment_bytes) == (1000, 2048)
    assert manager.compaction.settings.threads == 2
    assert manager.get_or_create_log(("new", 0)).config.retention_ms == 3_600_000
    manager.shutdown()
