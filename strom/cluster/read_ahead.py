"""The metadata reads of a reload, done on a thread first and then answered from memory.

A broker re-reads metadata on its event loop, where the cache is changed: the cache is what every
Produce, Fetch and Metadata request consults, and changing it from another thread would race
them. But each read waits on ZooKeeper, and a ZooKeeper that stops answering held the loop, and
every request of the broker with it, until kazoo gave the connection up, two thirds of the
session timeout later (issue 14).

So a reload runs twice over the same code. On a thread, ``MetadataCache.shadow()`` (the topics
and partitions the cache holds, which is all that decides what a reload reads) does the reload
against a ``ReadAheadStore``, which asks ZooKeeper, sets the watches and keeps every answer.
Then, on the loop, the real cache does the same reload against the same ``ReadAheadStore``: it
asks the same questions and gets the kept answers without waiting. A question that was not
asked on the thread goes to the store itself, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from strom.cluster.store import MetadataStore, NoNodeError, Watcher


class ReadAheadStore(MetadataStore):
    """Reads of ``store`` answered once and then from memory; writes are refused (a reload writes nothing).

    Not shared between threads: the thread that fills it hands it over when it is done.
    """

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._data: dict[str, tuple[bytes, int] | None] = {}
        self._exists: dict[str, bool] = {}
        self._children: dict[str, list[str] | None] = {}
        self.missed = 0  # questions that went to the store after the read-ahead (for tests and logs)

    # -- reads -------------------------------------------------------------------------------------
    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, int]:
        got = self.get_many([path], watch)[0]
        if got is None:
            raise NoNodeError(path)
        return got

    def get_many(self, paths: Sequence[str], watch: Watcher | None = None) -> list[tuple[bytes, int] | None]:
        unknown = [path for path in dict.fromkeys(paths) if path not in self._data]
        if unknown:
            self.missed += len(unknown)
            for path, got in zip(unknown, self.store.get_many(unknown, watch), strict=True):
                self._data[path] = got
        return [self._data[path] for path in paths]

    def exists(self, path: str, watch: Watcher | None = None) -> bool:
        return self.exists_many([path], watch)[0]

    def exists_many(self, paths: Sequence[str], watch: Watcher | None = None) -> list[bool]:
        unknown = [path for path in dict.fromkeys(paths) if path not in self._exists]
        if unknown:
            self.missed += len(unknown)
            for path, there in zip(unknown, self.store.exists_many(unknown, watch), strict=True):
                self._exists[path] = there
                if there and self._data.get(path, ()) is None:
                    # read as missing, then found: created in between, so the next read of it asks again
                    del self._data[path]
        return [self._exists[path] for path in paths]

    def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        if path not in self._children:
            self.missed += 1
            try:
                self._children[path] = list(self.store.children(path, watch))
            except NoNodeError:
                self._children[path] = None
        found = self._children[path]
        if found is None:
            raise NoNodeError(path)
        return list(found)

    def start_replay(self) -> None:
        """The read-ahead is done: from now on ``missed`` counts what it did not foresee."""
        self.missed = 0

    # -- what a reload never does ------------------------------------------------------------------
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False) -> None:
        raise TypeError("a metadata read-ahead writes nothing")

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        raise TypeError("a metadata read-ahead writes nothing")

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        raise TypeError("a metadata read-ahead writes nothing")

    def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        raise TypeError("a metadata read-ahead writes nothing")

    def ctime_ms(self, path: str) -> int:
        return self.store.ctime_ms(path)

    def close(self) -> None:
        """The store belongs to the broker; closing the read-ahead leaves it open."""
