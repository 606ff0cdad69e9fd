"""python -m strom.bench.iceberg runs a real translation round and prints its figures."""

import json
import re

from strom.bench.iceberg import main


def test_the_benchmark_translates_every_record_and_prints_its_rate(capsys):
    main(["--records", "2000"])
    out = capsys.readouterr().out
    assert re.search(r"translated 2,000 records \(.* MB of segments\) in .* s: [\d,]+ records/s", out), out
    assert "a round with nothing new:" in out and "(0 rows)" in out


def test_the_avro_benchmark_translates_typed_records_and_prints_its_rate(capsys):
    main(["--records", "2000", "--avro"])
    out = capsys.readouterr().out
    assert re.search(r"translated 2,000 10-field Avro records \(.* MB of segments\) in .* s: [\d,]+ records/s", out)
    assert "(0 rows)" in out


def test_record_appends_the_rates_for_the_plots(capsys, tmp_path):
    results = tmp_path / "results.jsonl"
    main(["--records", "2000", "--record", str(results)])
    [entry] = [json.loads(line) for line in results.read_text().splitlines()]
    assert entry["bench"] == "iceberg" and entry["command"].startswith("python -m strom.bench.iceberg --records 2000")
    assert entry["figures"]["100-byte records/s"]["unit"] == "records/s"
    assert entry["figures"]["100-byte records/s"]["value"] > 0
    assert set(entry["figures"]) == {
        "100-byte records/s",
        "100-byte records per CPU second",
        "a round with nothing new (100-byte records)",
    }
