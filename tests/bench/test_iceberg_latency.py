"""python -m strom.bench.iceberg_latency times produce() to delivery on a topic with translation and
one without, on a real broker, and prints p50/p99 of each and their p99 ratio."""

import json
import re

from strom.bench.iceberg_latency import main


def test_the_benchmark_prints_both_phases_and_the_ratio_and_records_them(capsys, tmp_path):
    results = tmp_path / "results.jsonl"
    assert main(["--rounds", "1", "--seconds", "1", "--rate", "500", "--record", str(results)]) == 0
    out = capsys.readouterr().out
    for phase in ("without", "with"):
        assert re.search(rf"^round 1 +{phase} translation: 500 messages, p50 [\d.]+ ms, p99 [\d.]+ ms", out, re.M), out
        assert re.search(
            rf"^produce latency {phase} translation: p50 [\d.]+ ms, p99 [\d.]+ ms \(500 messages\)$", out, re.M
        )
    assert re.search(r"table caught up [\d.]+ s after the phase", out), out
    assert re.search(r"^ratio p99 with/without: [\d.]+   goal <= 1.2$", out, re.M), out
    [entry] = [json.loads(line) for line in results.read_text().splitlines()]
    assert entry["bench"] == "iceberg_latency"
    assert set(entry["figures"]) == {
        "p50 without translation",
        "p50 with translation",
        "p99 without translation",
        "p99 with translation",
        "p99 ratio with/without",
        "median of the rounds' p99 ratios",
    }
