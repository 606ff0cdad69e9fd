"""The embedded single-node MetadataStore: an in-process tree persisted in the data dir.

Persistent nodes are written to ``<log dir>/__cluster_metadata.json`` (temp file, fsync,
rename) on every change; ephemeral nodes live only as long as the process, exactly as a
ZooKeeper session's would. A change whose file cannot be written (a full disk) is undone in
memory and raises the OSError, so the tree never holds what a restart would not find; once the
log dir holding the file has failed, every persistent change is refused that way.

Two stores on one file would overwrite each other's changes, so a store holds its directory's
lock (``strom.storage.dir_lock``, the ``.lock`` a broker takes on every log dir) until ``close``:
the broker hands over the lock it already holds; a store opened on its own takes it.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import threading
import time
from dataclasses import dataclass, field

from strom.cluster.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreError,
    Watcher,
)
from strom.storage import dir_lock
from strom.storage.checkpoint import fsync_dir

FILE_NAME = "__cluster_metadata.json"


class DamagedStoreError(StoreError):
    """The store's file is not what this class writes (a partial copy, an edit, a bad disk)."""


@dataclass
class _Node:
    data: bytes = b""
    version: int = 0
    ephemeral: bool = False
    data_watchers: list[Watcher] = field(default_factory=list)
    child_watchers: list[Watcher] = field(default_factory=list)
    # not in the file: after a restart a node counts as created at load (its purge waits a little longer)
    ctime_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    sequence: int = 0  # the next sequential child's number (ZooKeeper takes it from the parent's cversion)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class LocalStore(MetadataStore):
    def __init__(self, directory: str | None, lock: dir_lock.DirLock | None = None):
        """``lock``: the directory's lock when the caller holds it already (the broker); without
        one the store takes it, raising LogDirLockedError if another store or broker has it."""
        self._path = os.path.join(directory, FILE_NAME) if directory else None
        if lock is not None and directory and lock.directory != os.path.abspath(directory):
            raise ValueError(f"the lock of {lock.directory} does not cover {directory}")
        self._own_lock = dir_lock.acquire(directory) if directory and lock is None else None
        self._nodes: dict[str, _Node] = {"/": _Node()}
        self._lock = threading.RLock()
        self._batching = 0
        self._dirty = False
        self._offline_dir: str | None = None
        try:
            if self._path and os.path.exists(self._path):
                with open(self._path, encoding="utf-8") as handle:
                    try:
                        saved = json.load(handle)
                        for path, entry in saved.items():
                            self._nodes[path] = _Node(base64.b64decode(entry["data"]), int(entry["version"]))
                    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # not JSON, or not our JSON
                        raise DamagedStoreError(f"{self._path} is damaged ({type(exc).__name__}: {exc})") from exc
        except BaseException:
            if self._own_lock is not None:
                self._own_lock.release()
            raise

    @contextlib.contextmanager
    def batch(self):
        """Write the file once for a burst of changes (creating 50 partitions fsyncs once, not 50 times)."""
        with self._lock:
            self._batching += 1
            try:
                yield
            finally:
                self._batching -= 1
                if self._batching == 0 and self._dirty:
                    self._persist()

    def on_log_dir_failure(self, log_dir: str) -> None:
        """A failed log dir is written no more by this process, and the file may be in it."""
        if self._path and os.path.dirname(os.path.abspath(self._path)) == log_dir:
            self._offline_dir = log_dir

    def _check_writable(self) -> None:
        """Refuse a persistent change before making it, in a batch too, once the file's dir failed."""
        if self._offline_dir is not None:
            raise OSError(errno.EIO, f"the metadata store's log dir {self._offline_dir} is offline")

    def _persist(self) -> None:
        if not self._path:
            return
        if self._batching:
            self._dirty = True
            return
        self._check_writable()
        self._dirty = False
        saved = {
            p: {"data": base64.b64encode(n.data).decode(), "version": n.version}
            for p, n in self._nodes.items()
            if not n.ephemeral and p != "/"
        }
        tmp = self._path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(saved, handle)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a partial temp file would only hold space a full disk lacks
            raise
        os.replace(tmp, self._path)
        fsync_dir(os.path.dirname(self._path))

    @staticmethod
    def _fire(watchers: list[Watcher], path: str) -> None:
        pending = list(watchers)
        watchers.clear()
        for watcher in pending:
            watcher(path)

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False) -> None:
        with self._lock:
            if path in self._nodes:
                raise NodeExistsError(path)
            parent = _parent(path)
            if not ephemeral:
                self._check_writable()
            if parent not in self._nodes:
                if not makepath:
                    raise NoNodeError(parent)
                self.ensure_path(parent)
            self._nodes[path] = _Node(data, 0, ephemeral)
            if not ephemeral:
                try:
                    self._persist()
                except OSError:
                    del self._nodes[path]
                    raise
            self._fire(self._nodes[parent].child_watchers, parent)

    def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        with self._lock:
            parent = _parent(prefix)
            if parent not in self._nodes:
                self.ensure_path(parent)
            while True:  # the counter is not persisted: skip numbers a restarted store still holds
                node = self._nodes[parent]
                path = f"{prefix}{node.sequence:010d}"
                node.sequence += 1
                if path not in self._nodes:
                    self.create(path, data)
                    return path

    def ctime_ms(self, path: str) -> int:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            return node.ctime_ms

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, int]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watch and watch not in node.data_watchers:
                node.data_watchers.append(watch)
            return node.data, node.version

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if version != -1 and version != node.version:
                raise BadVersionError(f"{path}: expected version {version}, found {node.version}")
            if not node.ephemeral:
                self._check_writable()
            previous = node.data
            node.data = data
            node.version += 1
            if not node.ephemeral:
                try:
                    self._persist()
                except OSError:
                    node.data = previous
                    node.version -= 1
                    raise
            self._fire(node.data_watchers, path)
            return node.version

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if version != -1 and version != node.version:
                raise BadVersionError(path)
            kids = [p for p in self._nodes if p.startswith(path + "/")]
            if kids and not recursive:
                raise NotEmptyError(path)
            if not node.ephemeral:
                self._check_writable()
            for kid in sorted(kids, reverse=True):
                removed = self._nodes.pop(kid)
                self._fire(removed.data_watchers, kid)
                self._fire(removed.child_watchers, kid)
            del self._nodes[path]
            if not node.ephemeral:  # ephemeral nodes are never in the file
                self._persist()
            self._fire(node.data_watchers, path)
            self._fire(node.child_watchers, path)
            self._fire(self._nodes[_parent(path)].child_watchers, _parent(path))

    def exists(self, path: str, watch: Watcher | None = None) -> bool:
        with self._lock:
            node = self._nodes.get(path)
            if node is not None and watch and watch not in node.data_watchers:
                node.data_watchers.append(watch)
            return node is not None

    def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        with self._lock:
            node = self._nodes.get(path)
            if node is None:
                raise NoNodeError(path)
            if watch and watch not in node.child_watchers:
                node.child_watchers.append(watch)
            prefix = path.rstrip("/") + "/"
            return sorted(
                p[len(prefix) :]
                for p in self._nodes
                if p.startswith(prefix) and "/" not in p[len(prefix) :] and p != "/"
            )

    def close(self) -> None:
        with self._lock:
            for path in [p for p, n in self._nodes.items() if n.ephemeral]:
                self.delete(path)
            if self._own_lock is not None:  # a lock handed over stays its holder's to release
                self._own_lock.release()
