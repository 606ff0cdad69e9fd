"""python -m strom.bench.iceberg_read times read_topic, spark.read.parquet over the table's files and
the strom source on the same topic, checking every run's rows and bytes, and prints the ratios
(here at a tiny size, in the suite's Spark session: it checks the command, not its timings)."""

import json
import re

from strom.bench.iceberg_read import main


def test_the_benchmark_reads_every_record_three_ways_and_prints_the_ratios(spark, capsys, tmp_path):
    results = tmp_path / "results.jsonl"
    argv = ["--records", "3000", "--tail", "200", "--partitions", "2", "--repeat", "1", "--target-lag-ms", "300"]
    assert main([*argv, "--record", str(results)], spark=spark) == 0
    out = capsys.readouterr().out
    assert "produced 2,800 records of 100 B" in out, out
    assert re.search(r"3,000 records x 100 B in 2 partitions, 2,800 in the table \(\d+ data files", out), out
    assert "200 only in the log" in out
    for name, rows in (("read_topic", "3,000"), ("parquet", "2,800"), ("strom source", "3,000")):
        assert re.search(rf"^  {name} +{rows} rows  best +[\d.]+ s  median +[\d.]+ s +[\d,]+ rows/s$", out, re.M), out
    assert re.search(r"^ratio read_topic/parquet \(rows/s\): [\d.]+   goal >= 0.9$", out, re.M), out
    assert re.search(r"^ratio read_topic/strom source \(rows/s\): [\d.]+   goal >= 3$", out, re.M), out
    [entry] = [json.loads(line) for line in results.read_text().splitlines()]
    assert entry["bench"] == "iceberg_read" and "ratio read_topic/parquet" in entry["figures"]
    assert spark.range(3).count() == 3  # the suite's session still runs
