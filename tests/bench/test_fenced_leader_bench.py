"""python -m strom.bench.fenced_leader cuts a leader off in network namespaces and prints how long
writes stopped, per shape, with the load average."""

import re

from strom.bench import results
from strom.bench.fenced_leader import main


def test_the_benchmark_prints_how_long_writes_stopped_and_records_it(capsys, tmp_path):
    recorded = str(tmp_path / "results.jsonl")
    assert main(["--shapes", "zookeeper", "--cut", "10", "--record", recorded]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^3 brokers in network namespaces, RF=3, min.insync.replicas=2, cut 10 s, 1 run\(s\)$", out, re.M)
    found = re.search(
        r"^zookeeper: broker \d cut for 10 s; writes stopped for at most ([\d.]+) s \(\d+ acknowledged during the cut, "
        r"leader then -?\d\); after the heal the first ack came in [\d.]+ s; (\d+) acknowledged, 0 lost, 0 duplicated",
        out,
        re.M,
    )
    assert found and int(found.group(2)) > 0, out
    assert re.search(r"^load average \d+\.\d\d \d+\.\d\d \d+\.\d\d$", out, re.M), out
    (run,) = results.load(recorded)  # the worst run of the shape, as printed
    figures = run["figures"]
    assert run["bench"] == "fenced_leader"
    silence = figures["zookeeper: longest silence during the cut"]
    assert silence["unit"] == "s" and abs(silence["value"] - float(found.group(1))) <= 0.051
    assert figures["zookeeper: acknowledged records lost"] == {"value": 0, "unit": "records"}
