"""The first code a cleaner process runs: lower its CPU priority before it imports anything heavy.

A spawned cleaner process imports the storage and protocol modules (most of a second of CPU) when
it unpickles its first job; with the priority lowered first, even that start-up gives way to the
broker's event loop. Kept free of strom imports for that reason.
"""

from __future__ import annotations

import os
import threading

# Background work: on a busy machine the broker's event loop runs first.
CLEANER_NICENESS = 10


def init(stop: threading.Event, bytes_per_second: float) -> None:
    """The pool's initializer: nice, then the cleaner's per-process state (stop flag, I/O throttle)."""
    try:
        os.nice(CLEANER_NICENESS)
    except OSError:
        pass  # not permitted here: the cleaner runs at the broker's priority
    from strom.storage import cleaner

    cleaner.worker_init(stop, bytes_per_second)
