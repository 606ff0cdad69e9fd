"""How long writes stop when a leader is cut off from ZooKeeper or its peers but not from its clients.

    python -m strom.bench.fenced_leader [--shapes zookeeper,controller] [--cut 20] [--runs 1] [--record]

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

from strom.bench.results import add_record_argument, record_if_asked
from strom.chaos import fenced_leader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(fenced_leader.SHAPES), help="comma-separated")
    parser.add_argument("--cut", type=float, default=20.0, help="seconds each cut lasts (the issue's: 20)")
    parser.add_argument("--runs", type=int, default=1, help="runs of every shape")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in fenced_leader.SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown} (shapes: {', '.join(fenced_leader.SHAPES)})")
    print(f"3 brokers in network namespaces, RF=3, min.insync.replicas=2, cut {args.cut:.0f} s, {args.runs} run(s)")
    outcomes: dict[str, list[fenced_leader.Outcome]] = {shape: [] for shape in shapes}
    for _ in range(args.runs):
        for shape in shapes:
            with tempfile.TemporaryDirectory(prefix="strom-fenced-") as directory:
                outcome = fenced_leader.run(Path(directory), shape, args.cut)
                outcomes[shape].append(outcome)
                print(outcome.summary(), flush=True)
    one, five, fifteen = os.getloadavg()
    print(f"load average {one:.2f} {five:.2f} {fifteen:.2f}")
    figures: dict[str, tuple[float, str]] = {}
    for shape, runs in outcomes.items():  # the worst run of each shape
        figures[f"{shape}: longest silence during the cut"] = (max(o.longest_silence_s for o in runs), "s")
        resumed = [o.resumed_after_heal_s for o in runs if o.resumed_after_heal_s is not None]
        if resumed:
            figures[f"{shape}: first acknowledgement after the heal"] = (max(resumed), "s")
        figures[f"{shape}: acknowledged records lost"] = (sum(len(o.lost) for o in runs), "records")
    record_if_asked(args, "fenced_leader", figures, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
