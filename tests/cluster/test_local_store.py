"""The embedded metadata store behaves like the ZooKeeper it stands in for."""

import errno
import os
import re

import pytest

from strom.cluster.local_store import FILE_NAME, LocalStore
from strom.cluster.store import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from strom.storage.dir_lock import LogDirLockedError


def test_persistent_nodes_survive_and_ephemerals_do_not(tmp_path):
    store = LocalStore(str(tmp_path))
    store.create("/brokers/topics/t", b'{"p":1}', makepath=True)
    store.create("/brokers/ids/0", b"me", ephemeral=True, makepath=True)
    assert store.children("/brokers") == ["ids", "topics"]
    with pytest.raises(NodeExistsError):
        store.create("/brokers/topics/t", b"again")
    store.close()  # a second store on the file is refused while the first holds it
    reopened = LocalStore(str(tmp_path))
    assert reopened.get("/brokers/topics/t") == (b'{"p":1}', 0)
    assert not reopened.exists("/brokers/ids/0")


def test_compare_and_set_fences_stale_writers(tmp_path):
    store = LocalStore(str(tmp_path))
    store.create("/state", b"a")
    _, version = store.get("/state")
    assert store.set("/state", b"b", version) == version + 1
    with pytest.raises(BadVersionError):
        store.set("/state", b"c", version)
    assert store.get("/state")[0] == b"b"
    with pytest.raises(NoNodeError):
        store.set("/missing", b"x")


def test_watches_fire_once_and_deletes_respect_children(tmp_path):
    store = LocalStore(str(tmp_path))
    fired = []
    store.create("/a", b"")
    store.create("/a/b", b"")
    store.get("/a/b", fired.append)
    store.children("/a", fired.append)
    store.set("/a/b", b"x")
    store.set("/a/b", b"y")  # the data watch was one-shot
    with pytest.raises(NotEmptyError):
        store.delete("/a")
    store.delete("/a", recursive=True)
    assert fired == ["/a/b", "/a"]


def test_batch_writes_the_file_once(tmp_path):
    store = LocalStore(str(tmp_path))
    path = os.path.join(tmp_path, FILE_NAME)
    with store.batch():
        for i in range(20):
            store.create(f"/topics/p{i}", b"s", makepath=True)
        assert not os.path.exists(path)  # nothing written yet inside the batch
    store.close()
    assert len(LocalStore(str(tmp_path)).children("/topics")) == 20


def test_a_failed_log_dir_refuses_persistent_changes_and_keeps_memory_as_the_file(tmp_path):
    store = LocalStore(str(tmp_path))
    store.create("/a", b"1")
    store.on_log_dir_failure(os.path.abspath(str(tmp_path)))
    for change in (lambda: store.create("/b", b"2"), lambda: store.set("/a", b"3"), lambda: store.delete("/a")):
        with pytest.raises(OSError) as raised:
            change()
        assert raised.value.errno == errno.EIO and "offline" in str(raised.value)
    assert store.get("/a") == (b"1", 0) and not store.exists("/b")
    store.create("/e", b"x", ephemeral=True)  # ephemeral nodes never touch the file
    store.set("/e", b"y")
    store.close()
    assert LocalStore(str(tmp_path)).get("/a") == (b"1", 0)


def test_one_store_per_file_until_it_is_closed(tmp_path):
    store = LocalStore(str(tmp_path))
    store.create("/a", b"1")
    with pytest.raises(
        LogDirLockedError,
        match=re.escape(
            f"Failed to acquire lock on file .lock in {tmp_path}. A strom broker in another process or thread (pid {os.getpid()})"
        ),
    ):
        LocalStore(str(tmp_path))
    store.close()
    reopened = LocalStore(str(tmp_path))
    assert reopened.get("/a") == (b"1", 0)
    reopened.close()
