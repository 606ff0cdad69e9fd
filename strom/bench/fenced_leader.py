"""How long writes stop when a leader is cut off from ZooKeeper or its peers but not from its clients.

    python -m strom.bench.fenced_leader [--shapes zookeeper,controller] [--cut 20] [--runs 1]

Each run starts ZooKeeper and three brokers in network namespaces of their own
(strom.chaos.netns), cuts one shape of strom.chaos.fenced_leader for ``--cut`` seconds under an
idempotent acks=all producer that bootstraps from the leader alone, heals, and reads everything
back. Prints one line per run (the longest time without an acknowledgement during the cut, how
soon the first came after the heal, lost and duplicated records) and the load average, and
asserts nothing (these machines are shared and noisy). Needs root and nftables.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from strom.chaos import fenced_leader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(fenced_leader.SHAPES), help="comma-separated")
    parser.add_argument("--cut", type=float, default=20.0, help="seconds each cut lasts (the issue's: 20)")
    parser.add_argument("--runs", type=int, default=1, help="runs of every shape")
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in fenced_leader.SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown} (shapes: {', '.join(fenced_leader.SHAPES)})")
    print(f"3 brokers in network namespaces, RF=3, min.insync.replicas=2, cut {args.cut:.0f} s, {args.runs} run(s)")
    for _ in range(args.runs):
        for shape in shapes:
            with tempfile.TemporaryDirectory(prefix="strom-fenced-") as directory:
                print(fenced_leader.run(Path(directory), shape, args.cut).summary(), flush=True)
    one, five, fifteen = os.getloadavg()
    print(f"load average {one:.2f} {five:.2f} {fifteen:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
