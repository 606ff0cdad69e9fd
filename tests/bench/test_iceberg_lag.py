"""python -m strom.bench.iceberg_lag produces at a steady rate to an Iceberg topic on a real broker,
samples the translation lag each second and prints it, the rate achieved and the catch-up time."""

import re

from strom.bench.iceberg_lag import main


def test_the_benchmark_samples_the_lag_and_the_table_catches_up(capsys):
    assert main(["--rate", "1000", "--seconds", "4", "--partitions", "2", "--catch-up-s", "60"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^\s+\d+ s (load|after): broker-reported lag (-|[\d,]+) records; table [\d,]+ records / ", out, re.M
    ), out
    assert re.search(r"^4,000 messages x 100 B to 2 partitions in [\d.]+ s: [\d,]+ msg/s acknowledged", out, re.M), out
    assert "0 delivery errors" in out
    assert re.search(r"^lag in seconds during the load \(oldest record not in the table\): max [\d.]+ s", out, re.M)
    assert re.search(r"^the table held every acknowledged record [\d.]+ s after the load stopped$", out, re.M), out
