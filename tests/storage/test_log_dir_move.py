"""Moving a replica between log dirs (AlterReplicaLogDirs): the future log, the swap, crashes."""

import os
from types import SimpleNamespace

import pytest

from strom.protocol.errors import ErrorCode, KafkaError
from strom.replication.log_dir_mover import LogDirMover
from strom.storage.log import Log, parse_future_dir
from strom.storage.log_config import LogConfig
from strom.storage.log_dir_moves import DELETE_DIR_SUFFIX
from strom.storage.log_manager import LogManager
from tests.storage.helpers import make_batch

TP = ("moving.topic-x", 3)
NAME = "moving.topic-x-3"


def _manager(tmp_path, **config) -> tuple[LogManager, str, str]:
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    manager = LogManager(dirs, LogConfig(**config))
    manager.startup()
    return manager, *manager.log_dirs


def _mover(manager: LogManager, partitions=None) -> LogDirMover:
    """The mover with the replica manager's two attributes it uses; the copy itself is real."""
    replicas = SimpleNamespace(partitions=partitions or {}, purgatory=SimpleNamespace(notify=lambda key: None))
    return LogDirMover(manager, replicas, SimpleNamespace(broker_configs={}), 0)  # type: ignore[arg-type]


def _content(partition_log: Log) -> bytes:
    data = partition_log.read(partition_log.log_start_offset, 2**30, partition_log.log_end_offset)
    return b"".join(s.read() for s in data.slices)


def _fill(partition_log: Log, batches: int, epoch: int = 1) -> None:
    for i in range(batches):
        partition_log.append_as_leader(make_batch(3, value_size=200, prefix=b"b%d-" % i), leader_epoch=epoch)


def _future_dirs(log_dir: str) -> list[str]:
    return [n for n in os.listdir(log_dir) if parse_future_dir(n) == TP]


def test_a_replica_moves_while_it_keeps_taking_writes(tmp_path):
    manager, d1, d2 = _manager(tmp_path, segment_bytes=4000)
    current = manager.get_or_create_log(TP)
    assert manager.log_dir_of(TP) == d1
    _fill(current, 40)
    current.leader_epoch_cache.assign(2, current.log_end_offset)  # an epoch that begins with no records yet
    current.update_high_watermark(90)
    future = manager.moves.alter_log_dir(TP, d2)
    assert future is not None and manager.moves.future_log_dir_of(TP) == d2
    assert len(_future_dirs(d2)) == 1  # <topic>-<p>.<uuid>-future
    assert manager.moves.alter_log_dir(TP, d2) is None  # asked again: the move goes on
    partition = SimpleNamespace(log=current)
    mover = _mover(manager, {TP: partition})
    mover._step(TP, 3000)
    assert 0 < future.log_end_offset < current.log_end_offset
    for _ in range(10):  # written during the move, to the current log
        _fill(current, 1, epoch=2)
        mover._step(TP, 3000)
    expected, end = _content(current), current.log_end_offset
    while TP in manager.moves.future_logs:
        mover.step()
    moved = manager.logs[TP]
    assert partition.log is moved and manager.log_dir_of(TP) == d2
    assert moved.directory == os.path.join(d2, NAME) and not os.path.exists(os.path.join(d1, NAME))
    assert _future_dirs(d2) == [] and not any(n.endswith(DELETE_DIR_SUFFIX) for n in os.listdir(d1))
    assert _content(moved) == expected and moved.log_end_offset == end == 150
    assert moved.high_watermark == 90
    assert moved.leader_epoch_cache.entries == current.leader_epoch_cache.entries == [(1, 0), (2, 120)]
    _fill(moved, 1, epoch=2)  # and it takes writes where it is now
    expected = _content(moved)
    manager.shutdown()
    again = LogManager([d1, d2], LogConfig(segment_bytes=4000))
    again.startup()
    assert again.log_dir_of(TP) == d2 and _content(again.logs[TP]) == expected
    again.shutdown()


def test_errors_are_kafkas(tmp_path):
    manager, d1, d2 = _manager(tmp_path)
    manager.get_or_create_log(TP)
    for wrong in (str(tmp_path / "elsewhere"), "d2", d2 + "/"):
        with pytest.raises(KafkaError) as found:
            manager.moves.alter_log_dir(TP, wrong)
        assert found.value.error_code == ErrorCode.LOG_DIR_NOT_FOUND
    assert manager.moves.alter_log_dir(TP, d1) is None  # already there
    with pytest.raises(KafkaError) as found:
        manager.moves.alter_log_dir(("later", 0), d1)
    assert found.value.error_code == ErrorCode.REPLICA_NOT_AVAILABLE
    manager.get_or_create_log(("later", 0))
    assert manager.log_dir_of(("later", 0)) == d1  # where it was asked to go, not the emptier d2
    manager.fail_dir(d2, OSError(5, "Input/output error"), "a test")
    with pytest.raises(KafkaError) as found:
        manager.moves.alter_log_dir(TP, d2)
    assert found.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    manager.shutdown()


def test_naming_the_current_dir_cancels_a_move(tmp_path):
    manager, d1, d2 = _manager(tmp_path)
    _fill(manager.get_or_create_log(TP), 5)
    assert manager.moves.alter_log_dir(TP, d2) is not None
    _mover(manager).step()
    assert manager.moves.alter_log_dir(TP, d1) is None
    assert TP not in manager.moves.future_logs and _future_dirs(d2) == [] and os.listdir(d2) == ["meta.properties"]
    manager.shutdown()


def test_a_truncation_of_the_current_log_starts_the_copy_again(tmp_path):
    manager, d1, d2 = _manager(tmp_path, segment_bytes=4000)
    current = manager.get_or_create_log(TP)
    _fill(current, 30)
    future = manager.moves.alter_log_dir(TP, d2)
    mover = _mover(manager)
    while future.log_end_offset < current.log_end_offset:
        mover._step(TP, 2000)
    current.truncate_to(45)  # a follower cutting back to a new leader's log
    _fill(current, 10, epoch=2)  # past where the copy ends, but different records
    expected = _content(current)
    while TP in manager.moves.future_logs:
        mover.step()
    assert _content(manager.logs[TP]) == expected and manager.logs[TP].log_end_offset == 75
    manager.shutdown()


def test_a_crash_while_copying_copies_again_after_the_restart(tmp_path):
    manager, d1, d2 = _manager(tmp_path, segment_bytes=4000)
    current = manager.get_or_create_log(TP)
    _fill(current, 30)
    expected = _content(current)
    future = manager.moves.alter_log_dir(TP, d2)
    _mover(manager)._step(TP, 3000)
    assert 0 < future.log_end_offset < current.log_end_offset
    current.flush()
    for partition_log in (current, future):  # kill -9
        partition_log.close_crashlike()
    again = LogManager([d1, d2], LogConfig(segment_bytes=4000))
    again.startup()
    assert again.log_dir_of(TP) == d1 and _content(again.logs[TP]) == expected
    assert again.moves.future_log_dir_of(TP) == d2 and again.moves.future_logs[TP].log_end_offset == 0
    assert len(_future_dirs(d2)) == 1
    mover = _mover(again)
    while TP in again.moves.future_logs:
        mover.step()
    assert again.log_dir_of(TP) == d2 and _content(again.logs[TP]) == expected
    assert not os.path.exists(os.path.join(d1, NAME))
    again.shutdown()


def test_a_crash_in_the_middle_of_the_swap_completes_it_after_the_restart(tmp_path):
    manager, d1, d2 = _manager(tmp_path, segment_bytes=4000)
    current = manager.get_or_create_log(TP)
    _fill(current, 30)
    expected = _content(current)
    future = manager.moves.alter_log_dir(TP, d2)
    mover = _mover(manager)
    while future.log_end_offset < current.log_end_offset:
        mover._step(TP, 5000)
    # The swap's first steps, then kill -9: the copy closed (complete on disk), the current log
    # renamed to -delete, the copy not yet renamed to its final name.
    future.close()
    current.flush()
    os.rename(current.directory, os.path.join(d1, f"{NAME}.{'0' * 32}{DELETE_DIR_SUFFIX}"))
    current.close_crashlike()
    again = LogManager([d1, d2], LogConfig(segment_bytes=4000))
    again.startup()
    assert again.log_dir_of(TP) == d2 and TP not in again.moves.future_logs
    assert _content(again.logs[TP]) == expected and again.logs[TP].log_end_offset == 90
    assert os.listdir(d1) == ["meta.properties"] or NAME not in os.listdir(d1)
    assert _future_dirs(d2) == []
    again.shutdown()


def test_deleting_a_moving_replica_deletes_its_copy_too(tmp_path):
    manager, d1, d2 = _manager(tmp_path)
    _fill(manager.get_or_create_log(TP), 5)
    manager.moves.alter_log_dir(TP, d2)
    manager.delete_log(TP)
    assert TP not in manager.moves.future_logs and _future_dirs(d2) == [] and NAME not in os.listdir(d1)
    manager.shutdown()
