"""MetadataStore: the small ZooKeeper-like interface the controller and brokers coordinate through.

Two implementations share it: ``ZkStore`` (a real ZooKeeper via kazoo, for clusters) and
``LocalStore`` (embedded, for the single-node default), so there is one controller and one
broker code path. Paths and JSON payloads follow Kafka's classic ZooKeeper layout.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence


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


class StoreUnavailableError(StoreError):
    """The store did not answer: the connection was lost (ZooKeeper's ConnectionLoss), the session
    expired, or a call timed out. Transient, unlike the errors above, which are answers: whether
    the call took effect is unknown, so a retry must accept finding its own write already there."""


# A watch fires once with the path that changed, as in ZooKeeper; re-register to keep watching.
Watcher = Callable[[str], None]


class MetadataStore(ABC):
    # whether a call may wait on another process (ZooKeeper), for as long as its session timeout:
    # then what must not hold the event loop (an ISR change) calls it from a thread
    remote = False

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

    @abstractmethod
    def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        """A persistent node named ``prefix`` plus ZooKeeper's 10-digit sequence number (parents made);
        returns its path. Kafka's change notifications (``/kafka-acl-changes/acl_changes_...``) are such nodes."""

    @abstractmethod
    def ctime_ms(self, path: str) -> int:
        """When the node was created, in ms since the epoch; raises NoNodeError."""

    def ephemeral_owned(self, path: str) -> bool:
        """Whether ``path`` is an ephemeral node of this store's own session: a create whose answer
        was lost to a dropped connection finds its own node when it is retried.

        The embedded store loses no answers.
        """
        return False

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

    # Many nodes at once. A cluster of thousands of partitions reads and writes one znode per
    # partition; one round trip each would take seconds, so ZkStore pipelines these (all requests
    # sent, then all answers read). They are not transactions: each node succeeds or fails alone.
    def get_many(self, paths: Sequence[str], watch: Watcher | None = None) -> list[tuple[bytes, int] | None]:
        """(data, version) per path, None where the node does not exist; other errors raise."""
        found: list[tuple[bytes, int] | None] = []
        for path in paths:
            try:
                found.append(self.get(path, watch))
            except NoNodeError:
                found.append(None)
        return found

    def exists_many(self, paths: Sequence[str], watch: Watcher | None = None) -> list[bool]:
        """Whether each node exists; with ``watch``, each one's creation, change or deletion is reported."""
        return [self.exists(path, watch) for path in paths]

    def set_many(self, writes: Sequence[tuple[str, bytes, int]]) -> list[int | StoreError]:
        """Compare-and-set writes of (path, data, version): each one's new version, or the
        BadVersionError/NoNodeError that refused it; losing the store itself raises."""
        results: list[int | StoreError] = []
        for path, data, version in writes:
            try:
                results.append(self.set(path, data, version))
            except (BadVersionError, NoNodeError) as exc:
                results.append(exc)
        return results

    def create_many(self, nodes: Sequence[tuple[str, bytes]]) -> list[StoreError | None]:
        """Create persistent (path, data) nodes whose parents exist: None for each created, or the
        NodeExistsError/NoNodeError that refused it; losing the store itself raises."""
        results: list[StoreError | None] = []
        for path, data in nodes:
            try:
                self.create(path, data)
                results.append(None)
            except (NodeExistsError, NoNodeError) as exc:
                results.append(exc)
        return results
