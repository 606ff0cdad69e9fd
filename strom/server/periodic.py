"""Running a broker task every N seconds until shutdown, on the event loop; and hearing of a
background task that ended with an error."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
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
