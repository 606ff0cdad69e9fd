"""MetadataStore: the small ZooKeeper-like interface the controller and brokers coordinate through.

Two implementations share it: ``ZkStore`` (a real ZooKeeper via kazoo, for clusters) and
``LocalStore`` (embedded, for the single-node default), so there is one controller and one
broker code path. Paths and JSON payloads follow Kafka's classic ZooKeeper layout.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable


class StoreError(Exception):
    pass


class NodeExistsError(StoreError):
    pass


class NoNodeError(StoreError):
    pass


class BadVersionError(StoreError):
    """A compare-and-set lost: somebody else wrote the node since it was read (fencing)."""


class NotEmptyError(StoreError):
    pass


# A watch fires once with the path that changed, as in ZooKeeper; re-register to keep watching.
Watcher = Callable[[str], None]


class MetadataStore(ABC):
    @abstractmethod
    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False) -> None: ...

    @abstractmethod
    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, int]:
        """(data, version); raises NoNodeError."""

    @abstractmethod
    def set(self, path: str, data: bytes, version: int = -1) -> int:
        """Write ``data`` if the node's version is ``version`` (or any, with -1); returns the new version."""

    @abstractmethod
    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None: ...

    @abstractmethod
    def exists(self, path: str, watch: Watcher | None = None) -> bool: ...

    @abstractmethod
    def children(self, path: str, watch: Watcher | None = None) -> list[str]: ...

    @abstractmethod
    def close(self) -> None: ...

    def unconfirmed_for(self) -> float:
        """Seconds since this broker last knew its session (registration) alive; 0 while it does.

        The embedded store has no session to lose.
        """
        return 0.0

    @contextlib.contextmanager
    def batch(self):
        """Group many writes; a store may make them durable once at the end (no atomicity implied)."""
        yield

    def ensure_path(self, path: str) -> None:
        parts = [p for p in path.split("/") if p]
        current = ""
        for part in parts:
            current += "/" + part
            try:
                self.create(current)
            except NodeExistsError:
                pass

    def get_or_none(self, path: str) -> tuple[bytes, int] | None:
        try:
            return self.get(path)
        except NoNodeError:
            return None
