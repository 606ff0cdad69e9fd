"""Produce latency with Iceberg translation running against without, on one broker.

    python -m strom.bench.iceberg_latency [--rounds 3] [--seconds 10] [--rate 5000] [--size 100]
                                          [--target-lag-ms 1000] [--record]

Starts one broker process (``iceberg.enabled=true``, ``iceberg.target.lag.ms`` 1 s so that
translation rounds run during every measurement) with two one-partition topics alike but for
``iceberg.mode``: ``plain`` (disabled) and ``iceberg`` (key_value). Then ``--rounds`` times,
alternating: ``--seconds`` of ``--rate`` messages/s of ``--size``-byte values to ``plain``, then
the same to ``iceberg`` (confluent-kafka, acks=all, linger.ms=1, each message timed from
``produce()`` to its delivery report, paced one by one). After each ``iceberg`` phase the
benchmark waits until the table holds every record, so no translation spills into the next
``plain`` phase. The translation worker's CPU (the broker's child process) during each phase
shows the rounds ran while the latencies were taken, and the broker's
``strom_eventloop_lag_max_seconds`` after each (the latest timer among its checks of the last
10 s) whether its event loop was held up.

Prints p50/p99 of each phase and overall, and the ratio p99(with)/p99(without) (the issue's goal:
at most 1.2). Asserts nothing (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import os
import statistics

from strom.bench.connections import percentile, produce_latencies
from strom.bench.iceberg_broker import IcebergBroker, load_average
from strom.bench.requests import cpu_seconds
from strom.bench.results import add_record_argument, record_if_asked

PHASES = ("without", "with")
TOPICS = {"without": "plain", "with": "iceberg"}


def children_cpu_seconds(pid: int) -> float:
    """CPU-seconds of ``pid``'s live child processes (the broker's translation worker)."""
    total = 0.0
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        children = handle.read().split()
    for child in children:
        try:
            total += cpu_seconds(int(child))
        except (FileNotFoundError, ProcessLookupError):
            pass  # gone between the listing and the read
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="without/with pairs (default 3)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase (default 10)")
    parser.add_argument("--rate", type=float, default=5000.0, help="messages per second (default 5000)")
    parser.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    parser.add_argument("--target-lag-ms", type=int, default=1000, help="iceberg.target.lag.ms (default 1000)")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    from confluent_kafka import Producer

    broker = IcebergBroker("strom-bench-iceberg-latency-", args.target_lag_ms, args.dir).start()
    latencies: dict[str, list[float]] = {phase: [] for phase in PHASES}
    p99s: dict[str, list[float]] = {phase: [] for phase in PHASES}
    loop_lags: dict[str, list[float]] = {phase: [] for phase in PHASES}
    try:
        broker.create_topic("plain", 1)
        broker.create_topic("iceberg", 1, **{"iceberg.mode": "key_value"})
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1, "enable.idempotence": False}
        )
        payload = os.urandom(args.size)
        # metadata, connections, the table's creation and first commit: not in the figures
        produce_latencies(producer, "plain", 1.0, args.rate, payload)
        produced = len(produce_latencies(producer, "iceberg", 1.0, args.rate, payload))
        broker.wait_translated("iceberg", {0: produced}, 120)
        for round_ in range(args.rounds):
            for phase in PHASES:
                worker_before = children_cpu_seconds(broker.pid)
                taken = produce_latencies(producer, TOPICS[phase], args.seconds, args.rate, payload)
                worker_cpu = children_cpu_seconds(broker.pid) - worker_before
                [loop_lag_s] = broker.metric("strom_eventloop_lag_max_seconds")  # the last 10 s
                loop_lags[phase].append(loop_lag_s)
                latencies[phase].extend(taken)
                p99s[phase].append(percentile(taken, 0.99))
                note = ""
                if phase == "with":
                    produced += len(taken)
                    caught_up = broker.wait_translated("iceberg", {0: produced}, 120)
                    note = f"; table caught up {caught_up:.1f} s after the phase"
                print(
                    f"round {round_ + 1} {phase:>7} translation: {len(taken):,} messages, "
                    f"p50 {percentile(taken, 0.5) * 1000:.2f} ms, p99 {p99s[phase][-1] * 1000:.2f} ms, "
                    f"translation worker CPU {worker_cpu:.2f} s, broker event loop late by up to "
                    f"{loop_lag_s * 1000:.0f} ms{note}",
                    flush=True,
                )
        del producer
    finally:
        broker.close()
    p50 = {phase: percentile(latencies[phase], 0.5) for phase in PHASES}
    p99 = {phase: percentile(latencies[phase], 0.99) for phase in PHASES}
    ratio = p99["with"] / p99["without"]
    print(
        f"\n{args.rounds} rounds of {args.seconds:.0f} s per phase, {args.rate:,.0f} msg/s x {args.size} B, acks=all, "
        f"linger.ms=1, iceberg.target.lag.ms={args.target_lag_ms}; {load_average()}"
    )
    for phase in PHASES:
        print(
            f"produce latency {phase} translation: p50 {p50[phase] * 1000:.2f} ms, p99 {p99[phase] * 1000:.2f} ms "
            f"({len(latencies[phase]):,} messages)"
        )
    print(f"ratio p99 with/without: {ratio:.2f}   goal <= 1.2")
    per_round = [w / wo for w, wo in zip(p99s["with"], p99s["without"], strict=True)]
    print(
        f"p99 ratio of each round (with / the without just before it): {', '.join(f'{r:.2f}' for r in per_round)}; "
        f"median {statistics.median(per_round):.2f} (one busy moment of a shared machine moves it less)"
    )
    print(
        "broker event loop late by up to: "
        + ", ".join(f"{phase} {max(loop_lags[phase]) * 1000:.0f} ms" for phase in PHASES)
        + " (the worst of any phase)"
    )
    figures = {
        f"p{q} {phase} translation": (v[phase] * 1000, "ms") for q, v in ((50, p50), (99, p99)) for phase in PHASES
    }
    figures["p99 ratio with/without"] = (ratio, "ratio")
    figures["median of the rounds' p99 ratios"] = (statistics.median(per_round), "ratio")
    record_if_asked(args, "iceberg_latency", figures, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
