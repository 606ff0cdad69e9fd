"""Keeping a broker's metadata cache current: a watch fires on a znode, and the znodes that changed
are re-read soon, once for a burst of changes, by the broker's metadata pass (``refresh``).

With ZooKeeper the reads are made first on a metadata reader thread, into a shadow of the cache
(``ReadAheadStore``), so that a ZooKeeper that stops answering holds no request meanwhile; the pass
then runs on the event loop with those reads replayed. A pass re-reads at most RELOAD_CHUNK changed
znodes (registrations and topics first) and leaves the rest to a pass right after, so the loop
answers requests in between. A pass that fails (ZooKeeper unreachable) is retried every 0.5 s over
everything, since what failed to load is not known. The embedded store answers at once: its passes
run straight away.

The broker gives this class its store, cache, loop and stop event, its metadata pass, and what to
do after a pass that succeeded (unfence a broker whose session is confirmed again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from strom.cluster import model
from strom.cluster.metadata_cache import MetadataCache, state_key
from strom.cluster.read_ahead import ReadAheadStore
from strom.cluster.store import MetadataStore, StoreError
from strom.loop_handoff import on_loop_when_done

log = logging.getLogger("strom.broker")

# A metadata pass re-reads at most this many changed znodes (registrations and topics first), and
# leaves the rest to a pass right after: the loop answers requests in between. A controller's own
# elections of 10,000 partitions fire as many watches, whose re-reads held its loop for 14 s.
RELOAD_CHUNK = 1000


class MetadataReloader:
    def __init__(
        self,
        store: Callable[[], MetadataStore],
        metadata: MetadataCache,
        refresh: Callable[[set[str] | None, MetadataStore | None], None],
        loop: Callable[[], asyncio.AbstractEventLoop],
        stop: asyncio.Event,
        after_reload: Callable[[], None],
    ):
        """``store`` and ``loop``: the broker's, made by its start(). ``refresh(changed, reads)``:
        the broker's metadata pass over the changed znodes (None: everything), ``reads`` answering
        in place of the store where they were made ahead; it counts itself in ``passes``."""
        self._store = store
        self._metadata = metadata
        self._refresh = refresh
        self._loop = loop
        self._stop = stop
        self._after_reload = after_reload
        self.passes = 0  # metadata passes: reads made ahead of a later pass are stale
        self._changed_paths: set[str] = set()  # znodes whose watches fired since the last reload
        self._everything = False
        self._handle: asyncio.TimerHandle | None = None
        self._failing = False
        self._reader: ThreadPoolExecutor | None = None  # reads a reload's znodes (with ZooKeeper)
        self._read_ahead: Future | None = None  # the reads of the reload under way
        self._reading_ahead: set[str] | None = None  # what they re-read (None: everything)

    def on_store_change(self, path: str) -> None:
        """A metadata watch fired (maybe on kazoo's thread): reload soon, once for a burst of changes."""
        loop = self._loop()
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.schedule, path)

    def schedule(self, path: str | None = None) -> None:
        """Reload soon: just the znode ``path`` (a watch fired on it), or everything (None)."""
        if path is None:
            self._everything = True
        else:
            self._changed_paths.add(path)
        self._soon(0.02)

    def unapplied_changes(self) -> set[str]:
        """The znodes a reload has yet to apply; where that is everything, what decides elections."""
        everything = self._everything or (self._read_ahead is not None and self._reading_ahead is None)
        if everything:
            return {model.BROKERS_IDS, model.CONTROLLER}
        return self._changed_paths | (self._reading_ahead or set())

    def retry_everything(self) -> None:
        """Re-read everything in 0.5 s: after a write whose outcome is unknown, or a failed election."""
        self._everything = True
        self._retry()

    def close(self) -> None:
        """No more reloads; reads still waiting for ZooKeeper end with the store's close."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)

    def _reload(self) -> None:
        self._handle = None
        if self._stop.is_set() or self._read_ahead is not None:
            return  # a reload whose reads are under way reloads again when they are in
        changed = None if self._everything else self._changed_paths
        rest: set[str] = set()
        if changed is not None and len(changed) > RELOAD_CHUNK:
            ordered = sorted(changed, key=lambda path: state_key(path) is not None)
            changed, rest = set(ordered[:RELOAD_CHUNK]), set(ordered[RELOAD_CHUNK:])
        self._changed_paths, self._everything = rest, False
        store = self._store()
        if not store.remote:  # the embedded store answers at once: nothing to wait for
            self._apply(changed, None)
            return
        if self._reader is None:
            self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strom-metadata-reader")
        reads = ReadAheadStore(store)
        shadow, watch, passes = self._metadata.shadow(), self.on_store_change, self.passes

        def read_ahead() -> None:  # on the reader thread: touches only the shadow and ``reads``
            if changed is None:
                shadow.load(reads, watch)
            else:
                shadow.apply_changes(reads, changed, watch)

        self._read_ahead = self._reader.submit(read_ahead)
        self._reading_ahead = changed
        on_loop_when_done(self._read_ahead, self._loop(), self._read_ahead_done, changed, reads, passes)

    def _read_ahead_done(self, changed: set[str] | None, reads: ReadAheadStore, passes: int, future: Future) -> None:
        self._read_ahead = self._reading_ahead = None
        if self._stop.is_set():
            return
        failed = future.exception()
        if failed is None and passes != self.passes:
            # a request's read-back changed the cache meanwhile, from newer reads than these
            self._requeue(changed)
            self._soon(0.01)
            return
        reads.start_replay()
        self._apply(changed, reads, failed)
        if reads.missed:
            log.debug("metadata reload: %d reads were not made ahead", reads.missed)

    def _requeue(self, changed: set[str] | None) -> None:
        if changed is None:
            self._everything = True
        else:
            self._changed_paths |= changed

    def _apply(
        self, changed: set[str] | None, reads: ReadAheadStore | None, failed: BaseException | None = None
    ) -> None:
        """Apply a reload (its reads made ahead, or made now) and schedule the next, or a retry."""
        try:
            if failed is not None:
                raise failed
            self._refresh(changed, reads)
            if self._changed_paths or self._everything:
                self._soon(0.01)  # the next chunk, or what fired meanwhile
            if self._failing:
                self._failing = False
                log.info("metadata reloaded after ZooKeeper came back")
            self._after_reload()
        except StoreError as exc:  # ZooKeeper unreachable for now: expected while it is down
            if not self._failing:  # once per outage, not twice a second
                log.warning("metadata reload failed (%s); retrying every 0.5s", exc)
            self._failing = True
            self._everything = True  # what failed to load is not known: all of it, next time
            self._retry()
        except Exception:
            log.exception("metadata reload failed; retrying")
            self._everything = True
            self._retry()

    def _retry(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._soon(0.5)

    def _soon(self, delay_s: float) -> None:
        if self._handle is None and not self._stop.is_set():
            self._handle = self._loop().call_later(delay_s, self._reload)
