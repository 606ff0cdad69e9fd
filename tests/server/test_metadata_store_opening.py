"""The broker's metadata store at startup built from its config and its first log dir's lock alone,
no broker: the embedded store in a tmp dir, its cluster id made once and read back, a damaged store
file and a log dir that cannot be written refused naming log.dirs, left as found."""

from __future__ import annotations

import pytest

from strom.cluster import model
from strom.cluster.local_store import FILE_NAME, LocalStore
from strom.server.config import BrokerConfig
from strom.server.metadata_store_opening import cluster_id, open_store, startup_step
from strom.startup import StartupError
from strom.storage import dir_lock


def config_of(*log_dirs) -> BrokerConfig:
    return BrokerConfig.from_mapping({"log.dirs": ",".join(str(d) for d in log_dirs)})


def test_the_embedded_store_keeps_the_cluster_id_it_made_first(tmp_path):
    config = config_of(tmp_path / "a", tmp_path / "b")
    (tmp_path / "a").mkdir()
    (lock,) = dir_lock.acquire_all([str(tmp_path / "a")])
    try:
        store, made = open_store(config, lock)
        assert isinstance(store, LocalStore) and (tmp_path / "b").is_dir()  # every log dir is made
        assert len(made) == 22 and store.get_or_none(model.CLUSTER_ID) is not None
        store.close()
        again, read = open_store(config, lock)
        assert read == made and cluster_id(again) == made
        again.close()
    finally:
        lock.release()


def test_a_damaged_store_file_is_named_under_log_dirs_and_left_as_found(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / FILE_NAME).write_bytes(b'{"half a fi')
    (lock,) = dir_lock.acquire_all([str(data)])
    try:
        with pytest.raises(StartupError) as refused:
            open_store(config_of(data), lock)
        assert refused.value.key == "log.dirs"
        assert f"the embedded metadata store {data}/{FILE_NAME} is damaged" in str(refused.value)
        assert "restore it from a backup" in str(refused.value)
        assert (data / FILE_NAME).read_bytes() == b'{"half a fi'
    finally:
        lock.release()


def test_a_log_dir_that_cannot_be_made_is_named_under_log_dirs(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "file").write_text("not a directory")
    (lock,) = dir_lock.acquire_all([str(tmp_path / "data")])
    try:
        with pytest.raises(StartupError) as refused:
            open_store(config_of(tmp_path / "data", tmp_path / "file" / "logs"), lock)
        assert refused.value.key == "log.dirs" and "cannot write" in str(refused.value)
    finally:
        lock.release()


def test_without_zookeeper_a_startup_step_runs_once_and_its_error_is_its_own(tmp_path):
    config = config_of(tmp_path)
    runs: list[int] = []
    assert startup_step(config, "reading", lambda: runs.append(1) or "read") == "read"
    assert runs == [1]

    def fails() -> None:
        runs.append(2)
        raise ValueError("not a store error")

    with pytest.raises(ValueError):
        startup_step(config, "failing", fails)
    assert runs == [1, 2]
