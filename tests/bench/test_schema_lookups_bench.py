"""python -m strom.bench.schema_lookups looks schemas up by id from several processes through
confluent-kafka's own client and prints the rate, p50, p99 and the broker's CPU."""

import re

from strom.bench.schema_lookups import main


def test_the_benchmark_prints_the_lookup_rate_and_latencies(capsys):
    assert main(["--processes", "2", "--seconds", "1", "--schemas", "5"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^5 schemas, 2 processes of confluent-kafka's SchemaRegistryClient$", out, re.M), out
    found = re.search(r"^lookups by id: ([\d,]+)/s  p50 [\d.]+ ms  p99 [\d.]+ ms  \((\d+) lookups\)$", out, re.M)
    assert found and int(found.group(2)) > 0, out
    assert re.search(r"^broker CPU: \d+\.\d\d cores$", out, re.M), out
