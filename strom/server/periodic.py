"""Running a broker task every N seconds until shutdown, on the event loop; and hearing of a
background task that ended with an error."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger("strom.server")


async def run_every(interval_s: float, task: Callable[[], Any], stop: asyncio.Event, name: str) -> None:
    """Call ``task`` (plain or async) every ``interval_s`` until ``stop`` is set.

    A failing run is logged and the schedule goes on: a background task must never take the
    broker down. Shutdown cancels the sleep; waiting on ``stop`` with a timeout instead would
    make and cancel a task every period (five a second for the ZooKeeper session check).
    """
    while not stop.is_set():
        await asyncio.sleep(interval_s)
        if stop.is_set():
            return
        try:
            result = task()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("%s failed", name)


def log_if_failed(task: asyncio.Task) -> None:
    """A done-callback for the broker's background tasks: log the error that ended one.

    Otherwise nothing would show it: the task is kept in the broker's list until shutdown, whose
    ``gather(..., return_exceptions=True)`` drops the error, and whatever the task did (the
    storage scheduler's retention and flushes, the transaction timers) just stops.
    """
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        what = getattr(task.get_coro(), "__qualname__", task.get_name())  # LogManager.run_scheduler
        log.error("background task %s stopped: %r", what, error, exc_info=error)


class BackgroundTasks:
    """The broker's background tasks: work that runs until shutdown (``run``) and work repeated
    every N seconds (``every``). Each is logged if an error ends it (``log_if_failed``); shutdown
    sets ``stop``, then ``cancel`` ends them all."""

    def __init__(self, stop: asyncio.Event):
        self._stop = stop
        self.tasks: list[asyncio.Task] = []

    def run(self, work: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Run ``work`` on ``loop`` (the running one by default) until it ends or is cancelled."""
        task = (loop or asyncio.get_running_loop()).create_task(work)
        task.add_done_callback(log_if_failed)
        self.tasks = [t for t in self.tasks if not t.done()]
        self.tasks.append(task)

    def every(self, interval_s: float, task: Callable[[], Any], name: str) -> None:
        """Call ``task`` every ``interval_s`` until ``stop`` (``run_every``)."""
        self.run(run_every(interval_s, task, self._stop, name))

    def cancel(self) -> asyncio.Future:
        """Cancel every task; the future is done once they have all ended (shutdown bounds the wait)."""
        for task in self.tasks:
            task.cancel()
        return asyncio.gather(*self.tasks, return_exceptions=True)
