"""``strom demo`` on a terminal: its live table is the only thing there while it runs.

The demo runs on a pseudo-terminal, as a user starts it. Spark's stage progress bars and
librdkafka's lines (the broker stops last, so its clients see it go) must not appear; the table
is redrawn in place on the alternate screen, and the last one is printed when the demo ends.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENTER_ALT_SCREEN, LEAVE_ALT_SCREEN = "\x1b[?1049h", "\x1b[?1049l"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
NOISE = ("[Stage", "rdkafka", "FAIL", "WARN", "ERROR", "Traceback")

pytestmark = pytest.mark.timeout(420)


def run_on_a_terminal(args: list[str], timeout: float) -> tuple[int, str]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TERM="xterm-256color")
    process = subprocess.Popen(
        [sys.executable, "-m", "strom.cli.main", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = process.wait(max(deadline - time.monotonic(), 1))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_the_live_table_is_alone_on_the_terminal_and_redrawn_in_place(tmp_path):
    code, output = run_on_a_terminal(
        [
            "demo",
            "--dir",
            str(tmp_path),
            "--duration",
            "45",
            "--rate",
            "100",
            "--window",
            "10 seconds",
            "--watermark",
            "2 seconds",
            "--trigger-seconds",
            "2",
            "--refresh",
            "2",
        ],
        timeout=360,
    )
    (tmp_path / "terminal.log").write_text(output)  # what the user saw, for a failing run
    assert code == 0, output[-3000:]
    assert output.count(ENTER_ALT_SCREEN) == 1 and output.count(LEAVE_ALT_SCREEN) == 1, output[-3000:]
    before, rest = output.split(ENTER_ALT_SCREEN)
    live, after = rest.split(LEAVE_ALT_SCREEN)
    assert "strom demo: starting Spark" in before
    registry = re.search(r"strom demo: Schema Registry on (http://127\.0\.0\.1:\d+)", before)
    assert registry is not None, before  # printed before the live table takes the screen
    assert f"--schema-registry-url {registry[1]}" in before  # how to browse access-stats decoded

    screen = ANSI.sub("", live)
    assert screen.count("strom demo  (up") >= 2  # redrawn, not printed once
    assert "\x1b[H" in live  # each redraw starts again at the top of the screen
    for word in NOISE:
        assert word not in screen, screen[-3000:]

    tail = ANSI.sub("", after)
    assert "strom demo  (up" in tail and "lines ingested into 'access-log'" in tail  # the last table stays
    assert "strom demo: stopping..." in tail and "strom demo: Parquet" in tail
    for word in NOISE:
        assert word not in tail, tail
