"""--record: a benchmark's figures appended as one JSON line, with date, commit and command."""

import argparse
import importlib
import pkgutil
import re

import strom.bench
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


def test_a_figure_the_run_could_not_measure_is_left_out(tmp_path, capsys):
    path = str(tmp_path / "results.jsonl")
    figures = {"rate": (float("nan"), "MB/s"), "p99": (12.5, "ms"), "ratio": (float("inf"), "ratio")}
    results.record(path, "reassign", figures, [])
    with open(path) as handle:
        line = handle.read()
    assert "NaN" not in line and "Infinity" not in line  # the file stays JSON
    assert results.load(path)[0]["figures"] == {"p99": {"value": 12.5, "unit": "ms"}}
    assert capsys.readouterr().out == f"recorded in {path} (not measured, left out: rate, ratio)\n"


def test_the_record_flag_defaults_to_the_file_the_site_plots():
    parser = argparse.ArgumentParser()
    results.add_record_argument(parser)
    assert parser.parse_args([]).record is None
    assert parser.parse_args(["--record"]).record == results.RESULTS
    assert parser.parse_args(["--record", "x.jsonl"]).record == "x.jsonl"
    assert results.RESULTS.endswith("docs/benchmarks/results.jsonl")


def test_a_run_records_its_figures_only_when_asked(tmp_path):
    parser = argparse.ArgumentParser()
    results.add_record_argument(parser)
    path = str(tmp_path / "results.jsonl")
    results.record_if_asked(parser.parse_args([]), "requests", {"requests per second": (1.0, "requests/s")}, [])
    assert results.load(path) == []
    args = parser.parse_args(["--record", path])
    results.record_if_asked(args, "requests", {"requests per second": (12345.678, "requests/s")}, ["--record", path])
    (run,) = results.load(path)
    assert run["bench"] == "requests" and run["command"] == f"python -m strom.bench.requests --record {path}"
    assert run["figures"] == {"requests per second": {"value": 12345.678, "unit": "requests/s"}}


def test_every_benchmark_command_takes_record(capsys):
    """Each module under strom.bench with a main() is a benchmark command: its --help offers
    --record, and results.benchmarks() (what the benchmarks page lists) finds it."""
    commands = []
    for module in pkgutil.iter_modules(strom.bench.__path__):
        loaded = importlib.import_module(f"strom.bench.{module.name}")
        if not callable(getattr(loaded, "main", None)):
            continue
        commands.append(module.name)
        try:
            loaded.main(["--help"])
        except SystemExit as exc:
            assert exc.code == 0, module.name
        assert "--record" in capsys.readouterr().out, f"strom.bench.{module.name} does not take --record"
    assert len(commands) >= 20 and results.benchmarks() == sorted(commands)
