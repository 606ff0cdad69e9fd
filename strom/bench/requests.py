"""Requests per broker CPU-second: one message per Produce request.

    python -m strom.bench.requests [--messages 100000] [--size 100] [--kcat kcat] [--acks 1] [--record]

Starts a strom broker on 127.0.0.1 (port 0, data in a temporary directory), then pipes
--messages lines into ``kcat -P`` with ``linger.ms=0`` and ``batch.num.messages=1``, so every
message travels in its own Produce request (librdkafka pipelines them on one connection). The
broker's CPU time is read from ``/proc/PID/stat`` (utime + stime) before and after, which makes
the figure independent of how busy the rest of this shared machine is. Prints requests, wall
time, broker CPU-seconds and requests per broker CPU-second; asserts nothing about time.

Set LD_LIBRARY_PATH to use a newer librdkafka with Debian's kcat (the shared bench does).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from strom.bench.results import add_record_argument, record_if_asked

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def start_broker(data_dir: str, overrides: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    """A broker process on 127.0.0.1:<free port>; its pid is what the CPU figures are read from."""
    port_file = os.path.join(data_dir, "strom.port")
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data_dir, **(overrides or {})}
    command = [sys.executable, "-m", "strom.cli.main", "server-start", "--parent-pid", str(os.getpid())]
    for key, value in settings.items():
        command += ["--override", f"{key}={value}"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if os.path.exists(port_file):
            with open(port_file) as handle:
                text = handle.read().strip()
            if text:
                return process, int(text)
        if process.poll() is not None:
            raise SystemExit("broker exited during startup")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("broker did not start within 30 s")


def stop_broker(process: subprocess.Popen, data_dir: str) -> None:
    """Stop a broker of ``start_broker`` (killed if it does not stop within 30 s) and remove its data."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)
    shutil.rmtree(data_dir, ignore_errors=True)


def kcat_produce(
    kcat: str,
    bootstrap: str,
    topic: str,
    lines: bytes,
    config: dict[str, str],
    partition: int | None = 0,
    quiet: bool = False,
) -> float:
    """Seconds for ``kcat -P`` to send newline-separated ``lines`` with librdkafka ``config``
    (to ``partition``, or spread by kcat's partitioner with None); kcat fails the call if any
    delivery fails. The benchmarks' one way of driving load from C, not from a Python loop."""
    command = [kcat, "-P", "-b", bootstrap, "-t", topic]
    if partition is not None:
        command += ["-p", str(partition)]
    for key, value in {**config, "queue.buffering.max.messages": "1000000"}.items():
        command += ["-X", f"{key}={value}"]
    started = time.perf_counter()
    subprocess.run(command, input=lines, check=True, capture_output=quiet, timeout=600)
    return time.perf_counter() - started


def produce(kcat: str, bootstrap: str, topic: str, lines: bytes, acks: str) -> float:
    """One message per Produce request."""
    return kcat_produce(kcat, bootstrap, topic, lines, {"linger.ms": "0", "batch.num.messages": "1", "acks": acks})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--kcat", default=shutil.which("kcat") or "kcat")
    parser.add_argument("--acks", default="1")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    line = b"x" * (args.size - 1) + b"\n"
    data_dir = tempfile.mkdtemp(prefix="strom-bench-requests-")
    broker, port = start_broker(data_dir)
    try:
        bootstrap = f"127.0.0.1:{port}"
        produce(args.kcat, bootstrap, "warmup", line * 1000, args.acks)
        before = cpu_seconds(broker.pid)
        wall = produce(args.kcat, bootstrap, "requests", line * args.messages, args.acks)
        used = cpu_seconds(broker.pid) - before
    finally:
        stop_broker(broker, data_dir)
    print(f"one message per Produce request: {args.messages} x {args.size} B, acks={args.acks}")
    print(f"wall {wall:.2f} s  ({args.messages / wall:,.0f} requests/s)")
    print(f"broker CPU {used:.2f} s  ->  {args.messages / used:,.0f} requests per broker CPU-second")
    figures = {
        "requests per second": (args.messages / wall, "requests/s"),
        "requests per broker CPU-second": (args.messages / used, "requests/CPU-s"),
    }
    record_if_asked(args, "requests", figures, argv)


if __name__ == "__main__":
    main()
