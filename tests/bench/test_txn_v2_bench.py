"""python -m strom.bench.txn_v2 runs transactions in both protocols with raw requests against a
broker it starts, and prints each one's p50, p99 and rate (every transaction committed, or it fails)."""

import re

from strom.bench.txn_v2 import main


def test_the_benchmark_prints_both_protocols(capsys):
    assert main(["--transactions", "5", "--rounds", "1", "--partitions", "2"]) == 0
    out = capsys.readouterr().out
    assert "5 transactions a run, each 10 x 100 B to each of 2 partitions" in out, out
    for label in ("v1: AddPartitionsToTxn + Produce v11 + EndTxn v4", "v2: Produce v12 + EndTxn v5"):
        assert re.search(rf"^{re.escape(label)} +[\d.]+ +[\d.]+ +\d+$", out, re.M), out
