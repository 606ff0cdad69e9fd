"""Where requests wait for a condition instead of polling: Fetch for data, acks=all for the HW.

A waiter registers a future under one or more keys (a topic-partition); whoever changes that
partition (an append, a high-watermark move) calls ``notify(key)``, which wakes every waiter on
it. The waiter then re-checks its own condition and either completes or waits again, until its
deadline.

Every notification is also numbered and kept in a short log (``changed_since``), so that a fetch
session can look at the partitions that changed since its last request instead of all of its own.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Hashable, Iterable
from itertools import islice


class Purgatory:
    CHANGE_LOG = 65536

    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[asyncio.Future]] = defaultdict(set)
        self.sequence = 0  # notifications so far; the log holds the last CHANGE_LOG of them
        self._changes: deque[Hashable] = deque(maxlen=self.CHANGE_LOG)

    def changed_since(self, sequence: int) -> list[Hashable] | None:
        """Keys notified after ``sequence`` (with repeats), or None when the log no longer reaches back."""
        count = self.sequence - sequence
        if count > len(self._changes) or count < 0:
            return None
        return list(islice(reversed(self._changes), count))

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
        self.sequence += 1
        self._changes.append(key)
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
        except TimeoutError:
            return False
        finally:
            if not future.done():
                future.cancel()
