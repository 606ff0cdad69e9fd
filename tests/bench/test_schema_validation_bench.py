"""python -m strom.bench.schema_validation produces to a plain and a validating topic and prints
both rates, their ratio and the broker's CPU a record (every record delivered, or it exits)."""

import re

from strom.bench import results
from strom.bench.schema_validation import main


def test_the_benchmark_prints_both_rates_and_their_ratio_and_records_them(capsys, tmp_path):
    recorded = str(tmp_path / "results.jsonl")
    assert main(["--messages", "3000", "--rounds", "2", "--compression", "lz4", "--record", recorded]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^3000 records of \d+ bytes per round, compression lz4$", out, re.M), out
    assert len(re.findall(r"^round \d: plain [\d,]+/s, validated [\d,]+/s$", out, re.M)) == 2, out
    ratio = re.search(r"^ratio \(on / off\): (\d+\.\d\d)$", out, re.M)
    assert ratio, out
    assert re.search(r"^broker CPU a record \(median\): validation off \d+\.\d\d us, on \d+\.\d\d us$", out, re.M), out
    (run,) = results.load(recorded)
    assert run["bench"] == "schema_validation"
    figures = run["figures"]
    assert (
        abs(figures["on / off"]["value"] - float(ratio.group(1))) <= 0.0051 and figures["on / off"]["unit"] == "ratio"
    )
    assert figures["validation off"]["unit"] == figures["validation on"]["unit"] == "records/s"
    assert figures["validation on"]["value"] > 0
    assert figures["broker CPU a record, validation on"]["unit"] == "µs"
