"""Where requests wait for a condition instead of polling: Fetch for data, acks=all for the HW.

A waiter registers a future under one or more keys (a topic-partition); whoever changes that
partition (an append, a high-watermark move) calls ``notify(key)``, which wakes every waiter on
it. The waiter then re-checks its own condition and either completes or waits again, until its
deadline.

A fetch session also subscribes a set of its own to its partitions' keys: each notification
adds the key to the sets subscribed to it, so that the session's next request looks at the
partitions that changed since its last one, instead of at all of its own or at every change of
the broker.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = defaultdict(set)
        self._subscribers: dict[Hashable, list[set]] = {}

    def subscribe(self, keys: Iterable[Hashable], into: set) -> None:
        """Add each of ``keys`` to ``into`` whenever it is notified, until unsubscribed."""
        subscribers = self._subscribers
        for key in keys:
            found = subscribers.get(key)
            if found is None:
                subscribers[key] = [into]
            else:
                found.append(into)

    def unsubscribe(self, keys: Iterable[Hashable], into: set) -> None:
        subscribers = self._subscribers
        for key in keys:
            found = subscribers.get(key)
            if found is not None:
                kept = [s for s in found if s is not into]
                if kept:
                    subscribers[key] = kept
                else:
                    del subscribers[key]

    def watch(self, keys: Iterable[Hashable]) -> asyncio.Future:
        keys = tuple(keys)
        future = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters[key].add(future)
        future.add_done_callback(lambda f: self._forget(f, keys))
        return future

    def _forget(self, future: asyncio.Future, keys: tuple) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[key]

    def notify(self, key: Hashable) -> None:
        marks = self._subscribers.get(key)
        if marks is not None:
            for into in marks:
                into.add(key)
        waiters = self._waiters.get(key)
        if waiters:
            for future in list(waiters):
                if not future.done():
                    future.set_result(key)

    def has_waiters(self, key: Hashable) -> bool:
        return bool(self._waiters.get(key))

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or the timeout passes; True if notified.

        The waiter awaits the future itself, with a timer that resolves it at the deadline:
        asyncio.wait_for would add two turns of the event loop to every wake-up, and an acks=all
        produce waits for one of these per replication round trip.
        """
        if timeout_s <= 0:
            return False
        future = self.watch(keys)
        timer = future.get_loop().call_later(timeout_s, _expire, future)
        try:
            return await future is not _EXPIRED
        finally:
            timer.cancel()
            if not future.done():
                future.cancel()


_EXPIRED = object()


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(_EXPIRED)
