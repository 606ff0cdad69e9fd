"""How long strom.testing's fixtures take from the call to a broker (or cluster) that serves.

    python -m strom.bench.fixture [--runs 5] [--cluster-runs 3] [--record]

- single broker as a child process (``Broker()``, what ``strom_broker`` uses by default):
  from ``start()`` to the broker accepting connections;
- single broker in process (``Broker(in_process=True)``): the first start in a fresh
  interpreter, which pays for importing the broker, and later starts in the same interpreter;
- cluster (``Cluster()``, what ``strom_cluster`` uses): ZooKeeper from Debian's package and
  three broker processes, until a client's metadata lists all three brokers and a controller.

Each mode also reports one first round trip after ready: create a topic (RF 3 in the cluster),
produce one message with acks=all, consume it. Goals: under 0.5 s for a single broker, under
5 s for the cluster. Prints figures and asserts nothing (the machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import subprocess
import sys
import time

from strom.bench.results import add_record_argument, record

COLD_SNIPPET = """
import time
began = time.perf_counter()
from strom.testing import Broker
broker = Broker(in_process=True).start()
print(time.perf_counter() - began)
broker.stop()
"""


def summary(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:6.0f} ms  (min {min(values) * 1000:.0f}, "
        f"max {max(values) * 1000:.0f}, {len(values)} runs)"
    )


def round_trip(target, replication_factor: int) -> float:
    began = time.perf_counter()
    target.create_topic("bench", partitions=1, replication_factor=replication_factor)
    target.produce("bench", [b"hello"])
    target.consume("bench", 1, timeout=30)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="starts per single-broker mode (default 5)")
    parser.add_argument("--cluster-runs", type=int, default=3, help="cluster starts (default 3; 0 skips)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    figures: dict[str, tuple[float, str]] = {}
    from strom.testing import Broker, Cluster

    ready, trips = [], []
    for _ in range(args.runs):
        with Broker() as broker:
            ready.append(broker.ready_s)
            trips.append(round_trip(broker, 1))
    figures["broker process, start to ready"] = (statistics.median(ready), "s")
    print(
        f"single broker, child process:  start to ready {summary(ready)}; "
        f"first create+produce+consume {statistics.median(trips) * 1000:.0f} ms",
        flush=True,
    )

    cold = []
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", COLD_SNIPPET], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise SystemExit(f"in-process start failed:\n{out.stderr}")
        cold.append(float(out.stdout.strip().splitlines()[-1]))
    figures["broker in process, first start"] = (statistics.median(cold), "s")
    print(f"single broker, in process, first start in an interpreter (imports included): {summary(cold)}", flush=True)

    warm, trips = [], []
    for _ in range(args.runs + 1):
        with contextlib.redirect_stdout(io.StringIO()):  # the broker announces its port on stdout
            broker = Broker(in_process=True).start()
        try:
            warm.append(broker.ready_s)
            trips.append(round_trip(broker, 1))
        finally:
            broker.stop()
    figures["broker in process, later starts"] = (statistics.median(warm[1:]), "s")
    print(
        f"single broker, in process, later starts: start to ready {summary(warm[1:])}; "
        f"first create+produce+consume {statistics.median(trips[1:]) * 1000:.0f} ms",
        flush=True,
    )

    if args.cluster_runs > 0:
        ready, trips, stops = [], [], []
        for _ in range(args.cluster_runs):
            cluster = Cluster()
            with cluster:
                ready.append(cluster.ready_s)
                trips.append(round_trip(cluster, 3))
                stopping = time.perf_counter()
            stops.append(time.perf_counter() - stopping)
        figures["3-broker cluster, start to ready"] = (statistics.median(ready), "s")
        print(
            f"cluster (ZooKeeper + 3 broker processes): start to ready {summary(ready)}; "
            f"first create (RF 3)+produce+consume {statistics.median(trips) * 1000:.0f} ms; "
            f"stop {statistics.median(stops) * 1000:.0f} ms",
            flush=True,
        )
    if args.record:
        record(args.record, "fixture", figures, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
