"""examples/delivery: at-least-once and at-most-once consumers, SIGKILLed mid-stream and restarted.

At least once (process, then commit): after the crash nothing is missing; at most the message
in flight at the kill is processed twice. At most once (commit, then process): nothing is
processed twice; at most the message in flight at the kill is lost.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.group.support import create_topic, produce, unique, wait_until

pytestmark = pytest.mark.timeout(90)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "delivery"
TOTAL = 300


def start(script: str, broker, topic: str, group: str, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLES / f"{script}.py"),
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--out",
            str(out),
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "heartbeat.interval.ms=500",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("script", ["at_least_once", "at_most_once"])
def test_crash_and_restart(broker, tmp_path, script):
    topic = create_topic(broker.bootstrap, unique("delivery"), 3)
    group = unique("g")
    values = [f"m{i:04d}" for i in range(TOTAL)]
    produce(broker.bootstrap, topic, [v.encode() for v in values], partitions=3)
    out = tmp_path / "processed.txt"

    first = start(script, broker, topic, group, out, "--delay-ms", "10")
    try:
        wait_until(lambda: len(lines(out)) >= 60 or first.poll() is not None, 20, what="60 processed messages")
        assert first.poll() is None, first.stderr.read()
        first.kill()  # SIGKILL: no commit, no LeaveGroup, no cleanup
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    before = lines(out)
    assert 60 <= len(before) < TOTAL, "the kill did not land mid-stream"

    second = start(script, broker, topic, group, out, "--idle-exit", "3")
    try:
        second.wait(45)  # the group waits for the killed member's session (6 s) before reassigning
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(10)
            pytest.fail(f"the restarted consumer did not finish: {second.stderr.read()}")
    assert second.returncode == 0, second.stderr.read()

    processed = lines(out)
    counts = Counter(processed)
    assert set(processed) <= set(values)
    twice = sorted(v for v, n in counts.items() if n > 1)
    missing = sorted(set(values) - set(processed))
    if script == "at_least_once":
        assert missing == [], f"lost {missing[:5]}"
        assert len(twice) <= 1 and all(counts[v] == 2 for v in twice), f"processed again: {twice}"
    else:
        assert twice == [], f"processed twice: {twice[:5]}"
        assert len(missing) <= 1, f"lost more than the message in flight: {missing}"
