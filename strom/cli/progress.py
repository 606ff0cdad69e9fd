"""A one-line progress bar for the perf tools, drawn on stderr only when stderr is a terminal.

In scripts (stderr not a TTY) the tools print Kafka's periodic lines instead, so logs stay plain.
"""

from __future__ import annotations

import shutil
import sys
import time


class ProgressBar:
    REFRESH_S = 0.2

    def __init__(self, total: int, unit: str = "records", stream=None):
        self.total = max(total, 1)
        self.unit = unit
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.last_draw = 0.0
        self.drawn = False

    def update(self, done: int, now: float | None = None, force: bool = False) -> None:
        now = time.monotonic() if now is None else now
        if not force and now - self.last_draw < self.REFRESH_S:
            return
        self.last_draw = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        fraction = min(done / self.total, 1.0)
        text = f" {fraction * 100:5.1f}% {done:,}/{self.total:,} {self.unit} {rate:,.0f}/s"
        if rate > 0 and done < self.total:
            text += f" eta {max(self.total - done, 0) / rate:,.0f}s"
        columns = shutil.get_terminal_size((80, 24)).columns
        width = max(columns - len(text) - 3, 10)
        filled = int(width * fraction)
        self.stream.write("\r[" + "#" * filled + "." * (width - filled) + "]" + text[: columns - width - 3])
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.drawn = False


def wants_progress_bar() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
