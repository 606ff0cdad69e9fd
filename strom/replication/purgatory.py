"""Where requests wait for a condition instead of polling: Fetch for data, acks=all for the HW.

A waiter registers a future under one or more keys (a topic-partition); whoever changes that
partition (an append, a high-watermark move) calls ``notify(key)``, which wakes every waiter on
it. The waiter then re-checks its own condition and either completes or waits again, until its
deadline.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Hashable, Iterable


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = defaultdict(set)

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
        waiters = self._waiters.get(key)
        if waiters:
            for future in list(waiters):
                if not future.done():
                    future.set_result(key)

    def has_waiters(self, key: Hashable) -> bool:
        return bool(self._waiters.get(key))

    async def wait(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or the timeout passes; True if notified."""
        keys = tuple(keys)
        if timeout_s <= 0:
            return False
        future = self.watch(keys)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            if not future.done():
                future.cancel()
