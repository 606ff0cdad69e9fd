"""What serving metrics costs the produce path: broker CPU per request with metrics on and off.

    python -m strom.bench.metrics [--messages 50000] [--rounds 3] [--size 100] [--scrape-every 2] [--batch 1]
                                  [--together] [--record]

Starts two brokers on 127.0.0.1, one with ``metrics.listener=http://127.0.0.1:0`` and one
without, and sends each the same kcat workload as ``strom.bench.requests`` (one message per
Produce request, the case where per-request overhead weighs most; --batch N lets kcat put up to N
messages in a request, as producers do under load), alternating between them for
--rounds rounds so that both see the same machine. The broker with metrics is scraped every
--scrape-every seconds meanwhile (Prometheus' default is 15 s: this is the pessimistic case), and
the scrapes' CPU counts against it. The figure is messages per broker CPU-second, read from
/proc; a loaded machine still moves it by 10-20% between rounds (caches, frequency), so each
round runs both brokers back to back and the result is the median of the per-round ratios. On a machine that other work loads heavily, --together loads both brokers at once in
each round (two kcat processes), so that both see the same moment of the machine rather than
consecutive ones; that halves the spread of the per-round ratios there.
Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import urllib.request

from strom.bench import requests as requests_bench
from strom.bench.requests import cpu_seconds, kcat_produce
from strom.bench.results import add_record_argument, record_if_asked


def produce(kcat: str, bootstrap: str, topic: str, lines: bytes, batch: int) -> None:
    """kcat -P, acks=1; ``batch`` messages per Produce request at most (1: one message per request)."""
    linger = "0" if batch == 1 else "5"
    kcat_produce(kcat, bootstrap, topic, lines, {"linger.ms": linger, "batch.num.messages": str(batch), "acks": "1"})


def start_broker(data_dir: str, metrics: bool) -> tuple[subprocess.Popen, int]:
    return requests_bench.start_broker(data_dir, {"metrics.listener": "http://127.0.0.1:0"} if metrics else None)


def scrape_until(url: str, every_s: float, stop: threading.Event, counter: list[int]) -> None:
    while not stop.wait(every_s):
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
        counter[0] += 1


def run_together(
    args: argparse.Namespace,
    brokers: dict[bool, tuple[subprocess.Popen, int]],
    url: str,
    line: bytes,
    scrapes: list[int],
    on_first: bool,
) -> dict[bool, float]:
    """One round with both brokers loaded at once; each broker's CPU seconds for its messages."""
    stop = threading.Event()
    scraper = threading.Thread(target=scrape_until, args=(url, args.scrape_every, stop, scrapes))
    before = {on: cpu_seconds(process.pid) for on, (process, _) in brokers.items()}
    order = [True, False] if on_first else [False, True]  # alternated: the first kcat may have an edge
    scraper.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(len(brokers)) as pool:
            sends = [
                pool.submit(
                    produce, args.kcat, f"127.0.0.1:{brokers[on][1]}", "requests", line * args.messages, args.batch
                )
                for on in order
            ]
            for send in sends:
                send.result()  # a kcat failure ends the benchmark with its error
    finally:
        stop.set()
        scraper.join(timeout=15)
    return {on: cpu_seconds(process.pid) - before[on] for on, (process, _) in brokers.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--scrape-every", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=1, help="messages per Produce request at most (default 1)")
    parser.add_argument(
        "--together", action="store_true", help="load both brokers at once in each round (a busy machine)"
    )
    parser.add_argument("--kcat", default=shutil.which("kcat") or "kcat")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    line = b"x" * (args.size - 1) + b"\n"
    dirs = {on: tempfile.mkdtemp(prefix=f"strom-bench-metrics-{'on' if on else 'off'}-") for on in (False, True)}
    brokers = {}
    rates: dict[bool, list[float]] = {False: [], True: []}
    scrapes = [0]
    try:
        for on in (False, True):
            brokers[on] = start_broker(dirs[on], on)
        with open(os.path.join(dirs[True], "strom.metrics")) as handle:
            url = handle.read().strip()
        for on in (False, True):
            produce(args.kcat, f"127.0.0.1:{brokers[on][1]}", "warmup", line * 1000, args.batch)
        for round_ in range(args.rounds):
            if args.together:
                used_both = run_together(args, brokers, url, line, scrapes, on_first=round_ % 2 == 1)
                for on in (False, True):
                    rates[on].append(args.messages / used_both[on])
                print(
                    f"round {round_ + 1} messages per broker CPU-second: metrics off "
                    f"{rates[False][-1]:,.0f}, on {rates[True][-1]:,.0f}",
                    flush=True,
                )
                continue
            for on in (False, True) if round_ % 2 == 0 else (True, False):
                process, port = brokers[on]
                stop = threading.Event()
                scraper = threading.Thread(target=scrape_until, args=(url, args.scrape_every, stop, scrapes))
                if on:
                    scraper.start()
                before = cpu_seconds(process.pid)
                produce(args.kcat, f"127.0.0.1:{port}", "requests", line * args.messages, args.batch)
                used = cpu_seconds(process.pid) - before
                stop.set()
                if on:
                    scraper.join(timeout=15)
                rates[on].append(args.messages / used)
                print(
                    f"round {round_ + 1} metrics {'on ' if on else 'off'}: {args.messages / used:,.0f} messages "
                    "per broker CPU-second",
                    flush=True,
                )
    finally:
        for process, _ in brokers.values():
            process.terminate()
            process.wait(timeout=30)
        for path in dirs.values():
            shutil.rmtree(path, ignore_errors=True)
    ratios = [with_ / without for without, with_ in zip(rates[False], rates[True])]
    off_rate, on_rate = statistics.median(rates[False]), statistics.median(rates[True])
    ratio = statistics.median(ratios)
    print(
        f"up to {args.batch} message(s) per Produce request, {args.messages} x {args.size} B, acks=1, "
        f"{args.rounds} rounds{' (both brokers at once)' if args.together else ''}, {scrapes[0]} scrapes"
    )
    print(f"median messages per broker CPU-second: metrics off {off_rate:,.0f}, on {on_rate:,.0f}")
    print(
        f"on/off per round: {', '.join(f'{r:.3f}' for r in ratios)}; median {ratio:.3f} "
        f"({(1 - ratio) * 100:+.1f}% cost)"
    )
    figures = {
        "metrics off": (off_rate, "msgs per broker CPU-s"),
        "metrics on": (on_rate, "msgs per broker CPU-s"),
        "on / off (median round)": (ratio, "ratio"),
    }
    record_if_asked(args, "metrics", figures, argv)


if __name__ == "__main__":
    main()
