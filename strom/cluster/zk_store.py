"""MetadataStore on a real ZooKeeper, through kazoo (the only module that imports it).

Watches and session events arrive on kazoo's threads; callers that touch asyncio state must
hop back to their loop (the broker does, with call_soon_threadsafe). A lost session (expired)
deletes this broker's ephemeral nodes, exactly as in Kafka; ``session_listeners`` are told when
a new session replaces it, so the broker can register again.

Every call is bounded: kazoo's plain methods wait forever while the connection is suspended,
and they run on the broker's event loop, so one unanswered call would freeze the broker (and
its shutdown). While the connection is down a call fails at once; otherwise it goes through
kazoo's async methods and waits at most the session timeout. Either way it raises StoreError,
which callers already treat as "ZooKeeper is unavailable".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError as KazooBadVersion
from kazoo.exceptions import CancelledError as KazooCancelled
from kazoo.exceptions import (
    ConnectionDropped,
    ConnectionLoss,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.exceptions import NodeExistsError as KazooNodeExists
from kazoo.exceptions import NoNodeError as KazooNoNode
from kazoo.exceptions import NotEmptyError as KazooNotEmpty
from kazoo.handlers.threading import KazooTimeoutError

from strom.cluster.store import (
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreError,
    StoreUnavailableError,
    Watcher,
)

log = logging.getLogger("strom.zookeeper")

# Requests in flight at once in the *_many calls: enough to hide the round trip, few enough that
# kazoo's queue and the server's stay small.
PIPELINE_DEPTH = 500
# Writes per ZooKeeper transaction in the *_many writes: 200 partition states are about 30 KB, far
# below ZooKeeper's 1 MB request limit (jute.maxbuffer).
MULTI_OPS = 200
# what a failed transaction's ops answer (a multi is all or nothing): its chunk is then redone node by node
_TRANSACTION_REFUSALS = (KazooNoNode, KazooNodeExists, KazooBadVersion, RolledBackError, RuntimeInconsistency)
CONNECT_NOTICE_S = 1.0  # a session not up by then is worth a line in the log
# no answer, rather than an answer: the call may or may not have taken effect (ConnectionClosedError,
# kazoo's answer once the client is closing, is a SessionExpiredError)
_UNAVAILABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, ConnectionDropped, KazooCancelled)


def _translate(exc: Exception) -> Exception:
    if isinstance(exc, KazooNoNode):
        return NoNodeError(str(exc))
    if isinstance(exc, KazooNodeExists):
        return NodeExistsError(str(exc))
    if isinstance(exc, KazooBadVersion):
        return BadVersionError(str(exc))
    if isinstance(exc, KazooNotEmpty):
        return NotEmptyError(str(exc))
    if isinstance(exc, _UNAVAILABLE):
        return StoreUnavailableError(f"{type(exc).__name__} from ZooKeeper{f': {exc}' if str(exc) else ''}")
    return StoreError(f"{type(exc).__name__}: {exc}")


class ZkStore(MetadataStore):
    remote = True

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None):
        self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000)
        self.call_timeout_s = session_timeout_ms / 1000
        self._suspended_since: float | None = None  # monotonic time the connection dropped
        self.session_listeners: list[Callable[[str], None]] = []  # called with "lost" / "connected"
        self._lost = False
        self._wrappers: dict[Watcher, Callable] = {}  # one kazoo callback per watcher, so kazoo dedups
        self.client.add_listener(self._on_state)
        self._connect(connect, (connection_timeout_ms or session_timeout_ms) / 1000)
        if "/" in connect:  # kazoo handles a chroot but does not create it
            self.client.ensure_path("/")

    def _connect(self, connect: str, timeout_s: float) -> None:
        """Wait up to zookeeper.connection.timeout.ms for a session, as Kafka does, saying so once when slow.

        A ZooKeeper that is paused, restarting or overloaded accepts the TCP connection and answers
        later; kazoo retries inside ``start_async`` until it does.
        """
        started = self.client.start_async()
        if not started.wait(min(CONNECT_NOTICE_S, timeout_s)):
            log.info(
                "waiting up to %.0fs (zookeeper.connection.timeout.ms) for a ZooKeeper session with %s",
                timeout_s,
                connect,
            )
            started.wait(max(0.0, timeout_s - CONNECT_NOTICE_S))
        if not self.client.connected:
            self.client.stop()
            self.client.close()
            raise StoreError(
                f"no ZooKeeper session with {connect} (zookeeper.connect) within {timeout_s:g}s "
                "(zookeeper.connection.timeout.ms)"
            )

    def _on_state(self, state: str) -> None:
        if state == KazooState.SUSPENDED:
            self._suspended_since = time.monotonic()
        elif state == KazooState.CONNECTED:
            self._suspended_since = None
        if state == KazooState.LOST:
            log.warning("ZooKeeper session expired: ephemeral registrations are gone")
            self._lost = True
            for listener in list(self.session_listeners):
                listener("lost")
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            log.info("new ZooKeeper session established")
            for listener in list(self.session_listeners):
                listener("connected")

    def unconfirmed_for(self) -> float:
        """A lost session is unconfirmed for good (until a new one); a dropped connection since it dropped."""
        if self._lost:
            return float("inf")
        since = self._suspended_since
        return 0.0 if since is None else time.monotonic() - since

    @property
    def session_id(self) -> int:
        return self.client.client_id[0] if self.client.client_id else 0

    def _wrap(self, watch: Watcher | None):
        if watch is None:
            return None
        wrapper = self._wrappers.get(watch)
        if wrapper is None:
            wrapper = self._wrappers[watch] = lambda event: watch(event.path)
        return wrapper

    def _check_connected(self) -> None:
        if self._lost or self._suspended_since is not None:
            raise StoreUnavailableError("not connected to ZooKeeper")

    def _call(self, started, timeout_s: float | None = None, kept: tuple[type[Exception], ...] = ()):
        """Wait for a kazoo async call, at most ``call_timeout_s`` (or ``timeout_s``); an exception
        of a type in ``kept`` is returned, not raised."""
        try:
            return started.get(timeout=self.call_timeout_s if timeout_s is None else timeout_s)
        except KazooTimeoutError:
            raise StoreUnavailableError(f"ZooKeeper did not answer within {self.call_timeout_s:.0f}s") from None
        except kept as exc:
            return exc
        except Exception as exc:
            raise _translate(exc) from None

    def _pipelined(
        self, start: Callable[[Any], Any], items: Sequence[Any], kept: tuple[type[Exception], ...] = ()
    ) -> list[Any]:
        """Start the calls PIPELINE_DEPTH at a time, then collect them: each one's result, or the
        NoNode/NodeExists/BadVersion error it got. Any other error (the connection, a timeout)
        raises: the store is unavailable and the caller retries the whole step, as after a
        single call. A chunk waits at most ``call_timeout_s`` in all, not per call.

        The next chunk is sent before the previous one is collected, so the pipe never runs dry.
        ZooKeeper answers a session's requests in order, so once a chunk's last answer is in, all
        of it is: the loop waits once per chunk, not once per call (each wait is a hand-off
        between kazoo's thread and this one, which a loaded machine makes slow)."""
        self._check_connected()
        results: list[Any] = []
        in_flight: list[tuple[list[Any], float]] = []
        for first in range(0, len(items), PIPELINE_DEPTH):
            try:
                started = [start(item) for item in items[first : first + PIPELINE_DEPTH]]
            except Exception as exc:
                raise _translate(exc) from None
            in_flight.append((started, time.monotonic() + self.call_timeout_s))
            if len(in_flight) > 1:
                self._collect(*in_flight.pop(0), results, kept)
        while in_flight:
            self._collect(*in_flight.pop(0), results, kept)
        return results

    def _collect(
        self, started: list[Any], deadline: float, results: list[Any], kept: tuple[type[Exception], ...]
    ) -> None:
        started[-1].wait(max(0.001, deadline - time.monotonic()))
        for call in started:
            try:
                results.append(self._call(call, max(0.001, deadline - time.monotonic()), kept))
            except (NoNodeError, NodeExistsError, BadVersionError) as exc:
                results.append(exc)

    def get_many(self, paths: Sequence[str], watch: Watcher | None = None) -> list[tuple[bytes, int] | None]:
        wrapped = self._wrap(watch)
        found = self._pipelined(lambda path: self.client.get_async(path, watch=wrapped), paths)
        if any(isinstance(got, (NodeExistsError, BadVersionError)) for got in found):
            raise StoreError("unexpected answer to a read")
        return [None if isinstance(got, NoNodeError) else (got[0], got[1].version) for got in found]

    def exists_many(self, paths: Sequence[str], watch: Watcher | None = None) -> list[bool]:
        wrapped = self._wrap(watch)
        found = self._pipelined(lambda path: self.client.exists_async(path, watch=wrapped), paths)
        if any(isinstance(got, StoreError) for got in found):
            raise StoreError("unexpected answer to an exists")
        return [got is not None for got in found]

    def set_many(self, writes: Sequence[tuple[str, bytes, int]]) -> list[int | StoreError]:
        done = self._in_transactions(
            lambda tx, write: tx.set_data(write[0], write[1], version=write[2]),
            lambda write: self.client.set_async(write[0], write[1], version=write[2]),
            writes,
        )
        return [got if isinstance(got, StoreError) else got.version for got in done]

    def create_many(self, nodes: Sequence[tuple[str, bytes]]) -> list[StoreError | None]:
        done = self._in_transactions(
            lambda tx, node: tx.create(node[0], node[1]), lambda node: self.client.create_async(node[0], node[1]), nodes
        )
        return [got if isinstance(got, StoreError) else None for got in done]

    def _in_transactions(
        self, add: Callable[[Any, Any], Any], alone: Callable[[Any], Any], items: Sequence[Any]
    ) -> list[Any]:
        """Writes MULTI_OPS at a time as one ZooKeeper transaction (a multi), pipelined: one request
        per chunk, where kazoo spends about as much per request as ZooKeeper per write. A chunk
        that fails (a node exists, or has another version: a multi is all or nothing) is written
        again one request per node, so each node still succeeds or fails alone."""
        chunks = [items[first : first + MULTI_OPS] for first in range(0, len(items), MULTI_OPS)]

        def commit(chunk: Sequence[Any]) -> Any:
            tx = self.client.transaction()
            for item in chunk:
                add(tx, item)
            return tx.commit_async()

        results: list[Any] = []
        for chunk, done in zip(chunks, self._pipelined(commit, chunks, _TRANSACTION_REFUSALS), strict=True):
            if isinstance(done, list) and len(done) == len(chunk) and not any(isinstance(r, Exception) for r in done):
                results.extend(done)
            else:
                results.extend(self._pipelined(alone, chunk))
        return results

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False) -> None:
        self._check_connected()
        try:
            started = self.client.create_async(path, data, ephemeral=ephemeral, makepath=makepath)
        except Exception as exc:
            raise _translate(exc) from None
        self._call(started)

    def create_sequential(self, prefix: str, data: bytes = b"") -> str:
        self._check_connected()
        try:
            started = self.client.create_async(prefix, data, sequence=True, makepath=True)
        except Exception as exc:
            raise _translate(exc) from None
        return str(self._call(started))

    def _stat(self, path: str) -> Any:
        """The znode's ZnodeStat, None if it does not exist."""
        self._check_connected()
        try:
            started = self.client.exists_async(path)
        except Exception as exc:
            raise _translate(exc) from None
        return self._call(started)

    def ctime_ms(self, path: str) -> int:
        stat = self._stat(path)
        if stat is None:
            raise NoNodeError(path)
        return int(stat.ctime)

    def ephemeral_owned(self, path: str) -> bool:
        stat = self._stat(path)
        return stat is not None and stat.ephemeralOwner != 0 and stat.ephemeralOwner == self.session_id

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, int]:
        self._check_connected()
        try:
            started = self.client.get_async(path, watch=self._wrap(watch))
        except Exception as exc:
            raise _translate(exc) from None
        data, stat = self._call(started)
        return data, stat.version

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        self._check_connected()
        try:
            started = self.client.set_async(path, data, version=version)
        except Exception as exc:
            raise _translate(exc) from None
        return self._call(started).version

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        if recursive:  # children first, each call bounded; a path already gone is fine (as in kazoo)
            try:
                for child in self.children(path):
                    self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
                self.delete(path)
            except NoNodeError:
                pass
            return
        self._check_connected()
        try:
            started = self.client.delete_async(path, version=version)
        except Exception as exc:
            raise _translate(exc) from None
        self._call(started)

    def exists(self, path: str, watch: Watcher | None = None) -> bool:
        self._check_connected()
        try:
            started = self.client.exists_async(path, watch=self._wrap(watch))
        except Exception as exc:
            raise _translate(exc) from None
        return self._call(started) is not None

    def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        self._check_connected()
        try:
            started = self.client.get_children_async(path, watch=self._wrap(watch))
        except Exception as exc:
            raise _translate(exc) from None
        return sorted(self._call(started))

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # closing must not fail shutdown
            log.debug("error closing the ZooKeeper client", exc_info=True)
