"""The broker's wall clock: the one source of every timestamp strom writes or compares records with.

Kafka keeps two clocks apart, and so does strom. Record timestamps are wall-clock times:
LogAppendTime, the time index, retention by time, segment.ms, ListOffsets by timestamp, offset
commit and transaction start timestamps (all persisted, and read by other brokers and clients).
Durations are measured on ``time.monotonic`` and never here: sessions, request and transaction
timeouts, ISR lag, file.delete.delay.ms, flush intervals. So a clock stepped by NTP or an operator
changes which records count as old, never when a session, a producer or a transaction expires.

The fault campaign steps one broker's clock while it runs. ``STROM_CLOCK_OFFSET_FILE`` names a
file holding an offset in seconds (a float; missing or empty: 0) added to ``time.time()``. A file
and not a signal: a signal carries no value (a jump of how much, which way?) and the broker's
signals already mean shutdown; a file is replaced atomically by the test (``write_offset``), keeps
its offset across a restart as a skewed clock would, and needs no key in the broker's config. It
is read again at most every ``CHECK_INTERVAL_S`` (on the monotonic clock), so a read of the clock
costs one comparison; without the variable the clock is ``time.time`` itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

OFFSET_FILE_ENV = "STROM_CLOCK_OFFSET_FILE"
CHECK_INTERVAL_S = 0.05


class ShiftedClock:
    """``time.time()`` plus the offset held in ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0.0
        self._next_check = 0.0

    def __call__(self) -> float:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + CHECK_INTERVAL_S
            self.offset = read_offset(self.path, self.offset)
        return time.time() + self.offset


def read_offset(path: str, previous: float = 0.0) -> float:
    """The offset in ``path``: 0 when the file is missing or empty, ``previous`` when it cannot be parsed."""
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return 0.0
    except OSError:
        return previous
    if not text:
        return 0.0
    try:
        return float(text)
    except ValueError:
        return previous


def write_offset(path: str, seconds: float) -> None:
    """Set the offset a broker's clock reads from ``path`` (atomically: a reader never sees half a number)."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as handle:
        handle.write(f"{seconds}\n")
    os.replace(temporary, path)


def _make_clock() -> Callable[[], float]:
    path = os.environ.get(OFFSET_FILE_ENV)
    return ShiftedClock(path) if path else time.time


wall_time: Callable[[], float] = _make_clock()


def wall_ms() -> int:
    """Milliseconds since the epoch on the broker's wall clock."""
    return int(wall_time() * 1000)
