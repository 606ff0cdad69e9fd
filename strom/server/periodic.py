"""Running a broker task every N seconds until shutdown, on the event loop."""

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
