"""The benchmarks page's plots: an SVG per recorded benchmark, and its runs' table."""

from strom.bench import results
from strom.docs import plots


def test_each_recorded_benchmark_gets_an_svg_and_a_table_of_its_runs(tmp_path):
    path = str(tmp_path / "results.jsonl")
    results.record(path, "storage", {"append, strom": (700.0, "MB/s"), "read / plain": (1.07, "ratio")}, [])
    results.record(path, "storage", {"append, strom": (650.0, "MB/s"), "read / plain": (1.02, "ratio")}, ["-x"])
    results.record(path, "fixture", {"broker process, start to ready": (0.41, "s")}, [])
    files, markdown = plots.plots(path)
    assert sorted(files) == ["benchmarks/fixture.svg", "benchmarks/storage.svg"]
    svg = files["benchmarks/storage.svg"]
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    # nothing fetched when viewed: text drawn as paths, no fonts, images or stylesheets linked
    assert "<text" not in svg and "@font-face" not in svg and "<image" not in svg and "@import" not in svg
    assert "![strom.bench.storage: recorded runs](benchmarks/storage.svg)" in markdown
    assert "| `python -m strom.bench.storage -x` | append, strom: 650 MB/s; read / plain: 1.02 |" in markdown
    assert markdown.index("strom.bench.fixture") < markdown.index("strom.bench.storage")


def test_without_records_the_page_says_so(tmp_path):
    assert plots.plots(str(tmp_path / "none.jsonl"), []) == ({}, "No benchmark has recorded a run yet (`--record`).\n")


def test_benchmarks_without_a_run_are_listed_with_their_command(tmp_path):
    path = str(tmp_path / "results.jsonl")
    results.record(path, "storage", {"append, strom": (700.0, "MB/s")}, [])
    files, markdown = plots.plots(path, ["requests", "storage", "tls"])
    assert sorted(files) == ["benchmarks/storage.svg"]
    waiting = markdown[markdown.index("### Not recorded yet") :]
    assert "- `python -m strom.bench.requests --record`\n- `python -m strom.bench.tls --record`\n" in waiting
    assert "strom.bench.storage" not in waiting
    # by default: every benchmark command that takes --record
    assert "- `python -m strom.bench.tls --record`" in plots.plots(str(tmp_path / "none.jsonl"))[1]
