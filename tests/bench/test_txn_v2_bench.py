"""python -m strom.bench.txn_v2 runs transactions in both protocols with raw requests against a
broker it starts, and prints each one's p50, p99 and rate (every transaction committed, or it fails)."""

import re

from strom.bench import results
from strom.bench.txn_v2 import main


def test_the_benchmark_prints_both_protocols_and_records_them(capsys, tmp_path):
    recorded = str(tmp_path / "results.jsonl")
    assert main(["--transactions", "5", "--rounds", "1", "--partitions", "2", "--record", recorded]) == 0
    out = capsys.readouterr().out
    assert "5 transactions a run, each 10 x 100 B to each of 2 partitions" in out, out
    printed = {}
    for protocol, label in (
        (1, "v1: AddPartitionsToTxn + Produce v11 + EndTxn v4"),
        (2, "v2: Produce v12 + EndTxn v5"),
    ):
        found = re.search(rf"^{re.escape(label)} +([\d.]+) +([\d.]+) +(\d+)$", out, re.M)
        assert found, out
        printed[protocol] = found.groups()
    (run,) = results.load(recorded)  # the figures printed, with their units
    assert run["bench"] == "txn_v2" and run["command"].endswith(f"--partitions 2 --record {recorded}")
    for protocol, (p50, p99, rate) in printed.items():
        figures = run["figures"]
        assert abs(figures[f"v{protocol} transaction p50"]["value"] - float(p50)) <= 0.0051
        assert abs(figures[f"v{protocol} transaction p99"]["value"] - float(p99)) <= 0.0051
        assert abs(figures[f"v{protocol} transactions per second"]["value"] - float(rate)) <= 0.51
        assert figures[f"v{protocol} transaction p50"]["unit"] == "ms"
        assert figures[f"v{protocol} transactions per second"]["unit"] == "txn/s"
