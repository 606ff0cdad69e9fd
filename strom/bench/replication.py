"""Replication's cost on each side: one RF=3 partition under kcat, the leader's and each follower's CPU.

    python -m strom.bench.replication [--messages 1000000] [--size 200] [--seconds 10] [--dir D] [--record]

Starts ZooKeeper and three brokers with ``strom cluster start`` (as strom.bench.cluster does) and
creates one partition with three replicas (``min.insync.replicas=2``). kcat then produces rounds of
``--messages`` messages to it with acks=all, idempotence, linger.ms=5 and librdkafka's default
batch size, for ``--seconds`` seconds. After each round it prints the rate and the CPU-seconds per
million messages that the leader and each follower used (``/proc/PID/stat``).

strom.bench.cluster spreads three partitions over the three brokers, so each broker leads one
and follows two and the two sides are not told apart; here they are. Prints figures and asserts
nothing (these machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time

from strom.bench.cluster import LocalCluster, kcat_acks_all, kcat_line
from strom.bench.requests import cpu_seconds, kcat_produce
from strom.bench.results import add_record_argument, record_if_asked

TOPIC = "bench-replication"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per round")
    parser.add_argument("--size", type=int, default=200, help="message size in bytes")
    parser.add_argument("--seconds", type=float, default=10.0, help="rounds start until this much time has passed")
    parser.add_argument("--dir", help="where the cluster lives (default: a temporary directory, removed)")
    parser.add_argument("--kcat", default=shutil.which("kcat") or "kcat")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    cluster = LocalCluster.under(args.dir, "replication")
    try:
        cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        leader = cluster.partitions(TOPIC)[0].leader
        pids = {broker: cluster.pid(broker) for broker in (1, 2, 3)}
        line, config = kcat_line(args.size), kcat_acks_all(idempotent=True)
        kcat_produce(args.kcat, cluster.bootstrap, TOPIC, line * 20_000, config, partition=0, quiet=True)  # warm up
        data = line * args.messages
        roles = "  ".join(f"{'leader' if b == leader else 'follower'} {b}" for b in pids)
        print(
            f"one partition, RF=3, kcat acks=all idempotent linger.ms=5, {args.messages:,} x {args.size} B per "
            f"round; CPU-s per million messages: {roles}"
        )
        per_million = 1e6 / args.messages
        end = time.monotonic() + args.seconds
        rates: list[float] = []
        cpu: dict[int, list[float]] = {b: [] for b in pids}
        while time.monotonic() < end:
            before = {b: cpu_seconds(p) for b, p in pids.items()}
            seconds = kcat_produce(args.kcat, cluster.bootstrap, TOPIC, data, config, partition=0, quiet=True)
            used = {b: (cpu_seconds(p) - before[b]) * per_million for b, p in pids.items()}
            print(f"  {args.messages / seconds:10,.0f} msg/s  " + "  ".join(f"{used[b]:5.2f}" for b in pids))
            rates.append(args.messages / seconds)
            for b in pids:
                cpu[b].append(used[b])
    finally:
        cluster.stop()
    followers = [statistics.median(cpu[b]) for b in pids if b != leader]
    figures = {
        "throughput (median round)": (statistics.median(rates), "msg/s"),
        "leader CPU": (statistics.median(cpu[leader]), "CPU-s per 1M msgs"),
        "follower CPU (mean of the two)": (statistics.mean(followers), "CPU-s per 1M msgs"),
    }
    record_if_asked(args, "replication", figures, argv)


if __name__ == "__main__":
    main()
