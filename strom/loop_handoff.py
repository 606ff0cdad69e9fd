"""Work done on a worker thread, finished on the broker's event loop.

The broker keeps its state on one asyncio loop; calls that may wait on another process
(ZooKeeper, an fsync) run on threads of their own so that the loop serves requests meanwhile.
Their answers come back to the loop to be applied, and not at all once the loop has closed: the
broker stopped, and what is still waiting ends with its store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future


def handoff_loop(store) -> asyncio.AbstractEventLoop | None:
    """The running loop to hand an answer of ``store`` back to; None to make the call right here.

    Only ZooKeeper (``store.remote``) can stop answering: the embedded store answers at once.
    Without a running loop (tools, the fuzz harness, unit tests) there is nothing to keep serving.
    """
    if not store.remote:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_loop_when_done(future: Future, loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args) -> None:
    """When ``future`` is done, call ``callback(*args, future)`` on ``loop`` (nothing if it has closed)."""

    def done(finished: Future) -> None:  # on the thread that ran it
        with contextlib.suppress(RuntimeError):  # the loop closed: the broker is gone
            loop.call_soon_threadsafe(lambda: callback(*args, finished))

    future.add_done_callback(done)
