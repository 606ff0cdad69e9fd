"""A broker started by a foreground tool stops when that tool dies, however it dies.

``strom demo``, scripts/quickstart.sh, strom.testing's fixtures and the test helpers start
``strom server-start --parent-pid <their pid>``. If the tool is killed with SIGKILL (a closed
terminal, the OOM killer, ``kill -9`` of its process group) nothing runs in it to stop its
broker, and an orphan would go on serving and holding its log dirs. So the broker watches:
once its parent is no longer that pid, it shuts down as on SIGTERM (controlled shutdown,
flush, checkpoints, the clean-shutdown marker).

Why this and not the alternatives:

* ``prctl(PR_SET_PDEATHSIG)`` fires when the *thread* that forked the child ends, not the
  process: a broker started from a short-lived thread (the cluster test helpers start brokers
  side by side from threads) would be killed right after its start. It also cannot be set by a
  shell script for its background job, and delivers a signal, not a clean shutdown in order.
* A pipe whose write end only the parent holds needs the descriptor passed down through every
  launcher (bash cannot keep the write end out of its other children).
* Comparing ``getppid()`` with a pid given on the command line needs nothing from the parent
  but its pid, works under any reaper (init, a container's, a subreaper) since the parent pid
  changes whatever adopts the orphan, and catches a parent that died before the broker even
  started (its parent is then already someone else). The cost is one system call per
  ``POLL_S``, and the broker notices within that.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

log = logging.getLogger("strom.broker")

POLL_S = 0.5


def parent_gone(parent_pid: int) -> bool:
    """Whether this process's parent is no longer ``parent_pid`` (it died; someone adopted us)."""
    return os.getppid() != parent_pid


async def watch_parent(parent_pid: int, on_gone: Callable[[], None], poll_s: float = POLL_S) -> None:
    """Call ``on_gone`` once, when the parent ``parent_pid`` is gone; runs until then (or cancelled)."""
    while not parent_gone(parent_pid):
        await asyncio.sleep(poll_s)
    log.warning("parent process %d is gone (--parent-pid): shutting down", parent_pid)
    on_gone()
