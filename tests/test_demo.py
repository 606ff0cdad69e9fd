"""The demo pipeline (the README's main job after the quickstart) runs and writes its results;
killed with SIGKILL, it leaves no broker behind, and a restart counts every access-log line once."""

import calendar
import collections
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from strom.cli.demo import EmbeddedBroker
from tests.processes import alive, cmdline, descendants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW_S = 10
# small windows, a short watermark and 2 s triggers: windows close within seconds
DEMO_ARGS = [
    "--rate",
    "200",
    "--window",
    f"{WINDOW_S} seconds",
    "--watermark",
    "2 seconds",
    "--trigger-seconds",
    "2",
    "--refresh",
    "5",
]
STATS = r"access-stats \(read_committed\) holds (\d+) minute rows for (\d+) windows \((\d+) results read as Avro\)"
FIRST_COMMIT_S = 150  # Spark's start and first micro-batch (about 20 s here), on a loaded 2-core machine
GONE_WITHIN_S = 10
SPARK_GONE_WITHIN_S = 60


def demo_command(directory: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "strom.cli.main", "demo", "--dir", str(directory), *DEMO_ARGS, *extra]


def demo_env() -> dict[str, str]:
    return dict(os.environ, PYSPARK_PYTHON=sys.executable)


def run_demo(directory: Path, duration_s: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        demo_command(directory, "--duration", str(duration_s)),
        capture_output=True,
        text=True,
        timeout=250,
        stdin=subprocess.DEVNULL,
        env=demo_env(),
        cwd=ROOT,
    )


def commits(directory: Path) -> set[str]:
    """The micro-batches the Spark queries have committed (their checkpoints' commit files)."""
    return set(glob.glob(str(directory / "checkpoints" / "*" / "commits" / "[0-9]*")))


def start_and_kill(directory: Path, log: Path, kill_group: bool) -> float:
    """Start the demo, wait until its queries commit a new micro-batch, SIGKILL it (its process
    group, or only the demo's own process), and check that no broker of it is left after
    GONE_WITHIN_S. Returns when it was killed (time.time())."""
    before = commits(directory)
    with open(log, "ab") as out:
        demo = subprocess.Popen(
            demo_command(directory),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=demo_env(),
            cwd=ROOT,
            start_new_session=True,  # its own process group, as in a terminal
        )
    try:
        deadline = time.monotonic() + FIRST_COMMIT_S
        while not commits(directory) - before:
            assert demo.poll() is None, f"the demo exited with {demo.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"no micro-batch within {FIRST_COMMIT_S}s:\n{log.read_text()[-3000:]}"
            time.sleep(0.2)
        started = descendants(demo.pid)
        brokers = [pid for pid in started if "server-start" in cmdline(pid)]
        assert len(brokers) == 1, [cmdline(pid) for pid in started]
        killed_at = time.time()
        if kill_group:
            os.killpg(demo.pid, signal.SIGKILL)
        else:
            demo.kill()
        demo.wait(10)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(10)
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(alive(pid) for pid in brokers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: cmdline(pid)[:120] for pid in brokers if alive(pid)}
    assert not left, f"broker left {GONE_WITHIN_S}s after the demo's SIGKILL: {left}"
    # Spark's own processes (its JVM, the Python source runner) go too, in their own time: a runner
    # in the middle of a read once outlived the 10 s of the brokers (a full run of 2026-11-29)
    deadline = time.monotonic() + SPARK_GONE_WITHIN_S
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: cmdline(pid)[:120] for pid in started if alive(pid)}
    assert not left, f"left {SPARK_GONE_WITHIN_S}s after the demo's SIGKILL: {left}"
    return killed_at


def access_log_windows(path: Path) -> collections.Counter:
    """Lines of the access log per event-time window (start, seconds since the epoch, UTC)."""
    counts: collections.Counter = collections.Counter()
    stamp = re.compile(rb"\[([^\]]+)\]")
    with open(path, "rb") as handle:
        for line in handle:
            found = stamp.search(line)
            assert found is not None, line
            epoch = calendar.timegm(datetime.strptime(found[1].decode(), "%d/%b/%Y:%H:%M:%S %z").utctimetuple())
            counts[epoch - epoch % WINDOW_S] += 1
    return counts


def parquet_windows(directory: Path) -> list[tuple[int, int]]:
    """(window start, requests) of every row of the minute_stats table, all batches."""
    rows = []
    for path in glob.glob(str(directory / "parquet" / "minute_stats" / "batch_id=*" / "*.parquet")):
        for row in pq.read_table(path).to_pylist():
            start = row["window_start"]
            if start.tzinfo is None:  # Spark's INT96: a UTC instant without a zone
                start = start.replace(tzinfo=UTC)
            rows.append((int(start.timestamp()), row["requests"]))
    return rows


@pytest.mark.timeout(600)  # three Spark starts (about 95 s here, unloaded)
def test_demo_ingests_and_writes_window_results_and_a_killed_demo_leaves_no_broker(tmp_path):
    """The demo is killed with SIGKILL twice, its process alone, then its whole process group
    (what closing the terminal does): its broker stops by itself within seconds either time.
    The third run starts its own broker on the same data (no orphan holds it), goes on from the
    checkpoints, stops after --duration, and has written every window once: in access-stats
    (read_committed) and in Parquet, where each window holds exactly its access-log lines."""
    log = tmp_path / "demo.out"
    first_kill = start_and_kill(tmp_path, log, kill_group=False)
    start_and_kill(tmp_path, log, kill_group=True)

    result = run_demo(tmp_path, 25)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # access-stats is written exactly once (transactions + batch markers) and read read_committed
    stats = re.search(STATS, result.stdout)
    assert stats is not None, result.stdout[-2000:]
    assert stats[1] == stats[2], stats[0]
    # with the embedded broker's registry the results are Avro records of access-stats-value
    assert int(stats[3]) > 0, stats[0]
    assert re.search(
        r"strom console --bootstrap-server \S+ --schema-registry-url http://127\.0\.0\.1:\d+", result.stdout
    )

    lines = access_log_windows(tmp_path / "access.log")
    written = parquet_windows(tmp_path)
    starts = [start for start, _ in written]
    assert len(starts) == len(set(starts)), f"a window written twice: {sorted(starts)}"
    assert {start: requests for start, requests in written} == {start: lines[start] for start in starts}
    # the windows checked include lines written before the first kill
    assert any(start < first_kill for start in starts), (sorted(starts), first_kill)


HOLD_A_BROKER = """
import sys, time
from strom.cli.demo import EmbeddedBroker
print(EmbeddedBroker(sys.argv[1]).start().process.pid, flush=True)
time.sleep(600)
"""


def test_a_restart_waits_for_the_killed_runs_broker_to_let_go_of_the_data(tmp_path):
    """The demo's broker notices its demo's death within half a second and then shuts down
    cleanly; a demo started again meanwhile waits for it rather than failing on the dir's lock.
    The old broker is held stopped (SIGSTOP) for a second to make that wait certain."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_BROKER, str(tmp_path / "data")], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert holder.stdout is not None
        orphan = int(holder.stdout.readline())
        os.kill(orphan, signal.SIGSTOP)
    finally:
        holder.kill()
        holder.wait(10)
    started: dict = {}

    def start() -> None:
        try:
            started["broker"] = EmbeddedBroker(tmp_path / "data").start()
        except BaseException as exc:
            started["error"] = exc

    try:
        began = time.monotonic()
        starting = threading.Thread(target=start)
        starting.start()
        time.sleep(1)
        assert starting.is_alive() and alive(orphan)  # waiting for the lock the stopped orphan holds
        os.kill(orphan, signal.SIGCONT)
        starting.join(30)
        assert "error" not in started, started
        assert not alive(orphan)
        started["broker"].stop()
        assert 1 <= time.monotonic() - began < 12
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)
