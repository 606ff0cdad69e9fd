"""--record: a benchmark's figures appended as one JSON line, with date, commit and command."""

import argparse
import re

from strom.bench import results


def test_record_appends_one_line_per_run_and_load_reads_them_back(tmp_path, capsys):
    path = str(tmp_path / "results.jsonl")
    assert results.load(path) == []
    results.record(path, "storage", {"append, strom": (706.1281171, "MB/s")}, ["--size-mb", "256"])
    results.record(path, "storage", {"append, strom": (700.0, "MB/s"), "ratio": (0.8, "ratio")}, [])
    runs = results.load(path)
    assert [run["bench"] for run in runs] == ["storage", "storage"]
    first = runs[0]
    assert first["command"] == "python -m strom.bench.storage --size-mb 256"
    assert first["figures"] == {"append, strom": {"value": 706.128117, "unit": "MB/s"}}
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", first["date"])
    assert first["commit"] is None or re.fullmatch(r"[0-9a-f]{7,40}\+?", first["commit"])
    assert capsys.readouterr().out == f"recorded in {path}\n" * 2


def test_the_record_flag_defaults_to_the_file_the_site_plots():
    parser = argparse.ArgumentParser()
    results.add_record_argument(parser)
    assert parser.parse_args([]).record is None
    assert parser.parse_args(["--record"]).record == results.RESULTS
    assert parser.parse_args(["--record", "x.jsonl"]).record == "x.jsonl"
    assert results.RESULTS.endswith("docs/benchmarks/results.jsonl")
