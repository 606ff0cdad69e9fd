"""A broker's in-memory copy of some znodes, kept current by watches.

SCRAM credentials, client quotas and ACLs are read on every request that needs them, so each
broker keeps them in memory and re-reads the znodes when a watch fires. Watches fire on the
ZooKeeper client's thread and come in bursts (one AlterClientQuotas writes several znodes), so
the re-read runs on the event loop, once per burst; while ZooKeeper is unreachable it is retried.
"""

from __future__ import annotations

import asyncio
import logging

from strom.cluster.store import StoreError

log = logging.getLogger("strom.cluster")

RELOAD_DELAY_S = 0.02  # how long a burst of watch events may take to arrive
RETRY_S = 0.5


class WatchedView:
    """Subclasses implement ``load()`` (read everything, watching with ``self.watch``) and name
    what they hold in ``what`` for the log."""

    what = "metadata"

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self._loop = loop
        self._reload_handle: asyncio.TimerHandle | None = None
        self._stopped = False

    @property
    def watch(self):
        """The watch to pass to the store's reads: none without a loop to reload on."""
        return self._on_change if self._loop is not None else None

    def load(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stopped = True
        if self._reload_handle is not None:
            self._reload_handle.cancel()
            self._reload_handle = None

    def _on_change(self, path: str) -> None:
        """A watch fired, maybe on the ZooKeeper client's thread: reload on the loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._schedule, RELOAD_DELAY_S)

    def _schedule(self, delay: float) -> None:
        if self._reload_handle is None and not self._stopped and self._loop is not None:
            self._reload_handle = self._loop.call_later(delay, self._reload)

    def _reload(self) -> None:
        self._reload_handle = None
        try:
            self.load()
        except StoreError as exc:
            log.warning("reading %s failed (%s); retrying", self.what, exc)
            self._schedule(RETRY_S)
