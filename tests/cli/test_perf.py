"""``strom producer-perf-test`` / ``consumer-perf-test`` against a real broker: the summary lines and their numbers."""

import os
import pty
import re
import select
import subprocess
import sys
import time

RECORDS = 20_000
SIZE = 100

PRODUCER_TOTAL = re.compile(
    r"(?P<count>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\."
)
CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"


def strom(*args):
    return subprocess.run([sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=60)


def create(broker, topic, partitions=1):
    result = strom(
        "topics",
        "--bootstrap-server",
        broker.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--replication-factor",
        "1",
    )
    assert result.returncode == 0, result.stderr


def producer_perf(broker, topic, *extra, records=RECORDS):
    return strom(
        "producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(SIZE),
        "--producer-props",
        f"bootstrap.servers={broker.bootstrap}",
        *extra,
    )


def test_producer_then_consumer_perf_report_what_they_measured(broker):
    create(broker, "perf", 2)
    started = time.monotonic()
    produced = producer_perf(broker, "perf", "--throughput", "-1")
    elapsed = time.monotonic() - started
    assert produced.returncode == 0, produced.stderr
    assert "\r" not in produced.stderr  # no progress bar when stderr is not a terminal
    total = PRODUCER_TOTAL.fullmatch(produced.stdout.splitlines()[-1])
    assert total, produced.stdout
    assert int(total["count"]) == RECORDS
    rate = float(total["rate"])
    assert RECORDS / elapsed < rate  # measured over the run, which is shorter than the process
    assert abs(float(total["mb"]) - rate * SIZE / 1048576) <= 0.01
    p50, p95, p99, p999 = (int(total[k]) for k in ("p50", "p95", "p99", "p999"))
    assert p50 <= p95 <= p99 <= p999 <= float(total["max"])
    assert 0 < float(total["avg"]) <= float(total["max"])

    consumed = strom(
        "consumer-perf-test",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "perf",
        "--messages",
        str(RECORDS),
        "--timeout",
        "20000",
    )
    assert consumed.returncode == 0, consumed.stderr
    header, line = consumed.stdout.splitlines()
    assert header == CONSUMER_HEADER
    fields = line.split(", ")
    assert re.fullmatch(DATE, fields[0]) and re.fullmatch(DATE, fields[1])
    assert fields[2] == f"{RECORDS * SIZE / 1048576:.4f}"  # MB consumed: values, no keys
    assert int(fields[4]) == RECORDS
    assert int(fields[6]) == 0  # no group, so no rebalance
    assert float(fields[5]) > 0 and float(fields[3]) > 0


def test_throughput_is_throttled(broker):
    create(broker, "slow")
    started = time.monotonic()
    result = producer_perf(broker, "slow", "--throughput", "4000", records=8000)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 1.9
    total = PRODUCER_TOTAL.fullmatch(result.stdout.splitlines()[-1])
    assert int(total["count"]) == 8000 and float(total["rate"]) <= 4000 * 1.05


def test_consumer_perf_warns_when_the_topic_runs_dry(broker):
    create(broker, "short")
    assert producer_perf(broker, "short", "--throughput", "-1", records=500).returncode == 0
    result = strom(
        "consumer-perf-test",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "short",
        "--messages",
        "1000",
        "--timeout",
        "1500",
        "--hide-header",
    )
    assert result.returncode == 0, result.stderr
    warning, line = result.stdout.splitlines()
    assert warning.startswith("WARNING: Exiting before consuming the expected number of messages: timeout (1500 ms)")
    assert line.split(", ")[4] == "500"


def test_consumer_perf_detailed_stats(broker):
    create(broker, "detail")
    assert producer_perf(broker, "detail", "--throughput", "2000", records=4000).returncode == 0
    result = strom(
        "consumer-perf-test",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "detail",
        "--messages",
        "4000",
        "--show-detailed-stats",
        "--reporting-interval",
        "1",
        "--timeout",
        "20000",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("time, threadId, data.consumed.in.MB")
    for line in lines[1:]:
        fields = line.split(", ")
        assert re.fullmatch(DATE, fields[0]) and fields[1] == "0" and len(fields) == 10


def test_producer_perf_draws_a_progress_bar_on_a_terminal(broker):
    create(broker, "tty")
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "strom.cli.main",
                "producer-perf-test",
                "--topic",
                "tty",
                "--num-records",
                "3000",
                "--record-size",
                "10",
                "--throughput",
                "2000",
                "--bootstrap-server",
                broker.bootstrap,
            ],
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
        )
        os.close(follower)
        follower = None
        seen = b""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the terminal closes when the process exits
                    break
                if not chunk:
                    break
                seen += chunk
            elif process.poll() is not None:
                break
        out, _ = process.communicate(timeout=60)
    finally:
        os.close(leader)
        if follower is not None:
            os.close(follower)
    assert process.returncode == 0
    assert b"\r[" in seen and b"records" in seen and b"#" in seen
    assert PRODUCER_TOTAL.fullmatch(out.splitlines()[-1])


def read_csv(path):
    import csv

    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def polylines(page: str) -> list[int]:
    """The number of points of each line chart in an HTML or SVG file."""
    return [len(points.split()) for points in re.findall(r'<polyline [^>]*points="([^"]*)"', page)]


def test_perf_tools_write_their_per_second_series_as_csv_and_charts(broker, tmp_path):
    create(broker, "series")
    produced_csv, produced_plot = tmp_path / "produce.csv", tmp_path / "produce.html"
    # throttled to 1000/s, 3000 records take at least 3 s: at least three rows of about a second
    result = producer_perf(
        broker, "series", "--throughput", "1000", "--csv", str(produced_csv), "--plot", str(produced_plot), records=3000
    )
    assert result.returncode == 0, result.stderr
    header, *rows = read_csv(produced_csv)
    assert header == ["time_s", "records", "records_per_sec", "mb_per_sec", "avg_latency_ms"]
    assert len(rows) >= 3
    assert sum(int(row[1]) for row in rows) == 3000  # every delivered record is in exactly one row
    times = [float(row[0]) for row in rows]
    assert all(later - earlier >= 1.0 for earlier, later in zip(times, times[1:-1]))  # whole seconds but the last
    page = produced_plot.read_text()
    assert page.startswith("<!doctype html>") and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert polylines(page) == [len(rows)] * 4  # one chart per column, one point per row

    consumed_csv, consumed_plot = tmp_path / "consume.csv", tmp_path / "consume.svg"
    result = strom(
        "consumer-perf-test",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "series",
        "--messages",
        "3000",
        "--timeout",
        "20000",
        "--csv",
        str(consumed_csv),
        "--plot",
        str(consumed_plot),
    )
    assert result.returncode == 0, result.stderr
    header, *rows = read_csv(consumed_csv)
    assert header == ["time_s", "messages", "messages_per_sec", "mb_per_sec"]
    assert rows and sum(int(row[1]) for row in rows) == 3000
    assert polylines(consumed_plot.read_text()) == [len(rows)] * 3


def test_a_png_plot_needs_matplotlib(broker, tmp_path):
    create(broker, "png")
    png = tmp_path / "chart.png"
    result = producer_perf(broker, "png", "--throughput", "-1", "--plot", str(png), records=100)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert result.returncode == 1
        assert result.stderr == (
            f"strom producer-perf-test: cannot draw {png}: PNG needs matplotlib, which is not "
            "installed; use --plot FILE.html (or .svg) instead\n"
        )
        assert not png.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert png.read_bytes().startswith(b"\x89PNG")
