"""The benchmarks page's plots, drawn with matplotlib from the benchmark commands' own records.

A benchmark run with ``--record`` appends its figures to ``docs/benchmarks/results.jsonl``
(``strom.bench.results``). Here each benchmark becomes one SVG: a panel per unit, a line per
figure over the recorded runs, each run labelled with its date and commit; and one Markdown
section with the plot and the table of its runs (date, commit, command, figures). The hook puts
the section where the benchmarks page says ``<!-- benchmark-plots -->``, and the SVG beside it.
"""

from __future__ import annotations

import io
from typing import Any

from strom.bench.results import RESULTS, benchmarks, load

MARKER = "<!-- benchmark-plots -->"


def by_bench(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for entry in records:
        out.setdefault(entry["bench"], []).append(entry)
    return out


def svg(bench: str, runs: list[dict[str, Any]]) -> str:
    """One benchmark's figures over its runs, as an SVG (text as paths: no font is fetched)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    units: dict[str, list[str]] = {}
    for run in runs:
        for name, figure in run["figures"].items():
            names = units.setdefault(figure["unit"], [])
            if name not in names:
                names.append(name)
    labels = [f"{run['date']}\n{run.get('commit') or ''}" for run in runs]
    figure, axes = plt.subplots(len(units), 1, figsize=(9, 2.4 * len(units)), squeeze=False)
    for axis, (unit, names) in zip(axes[:, 0], units.items()):
        for name in names:
            points = [(i, run["figures"][name]["value"]) for i, run in enumerate(runs) if name in run["figures"]]
            axis.plot([i for i, _ in points], [v for _, v in points], marker="o", label=name)
        axis.set_ylabel(unit)
        axis.set_ylim(bottom=0)
        axis.set_xticks(range(len(runs)), labels, fontsize=8)
        axis.set_xlim(-0.5, len(runs) - 0.5)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    axes[0, 0].set_title(f"python -m strom.bench.{bench}: recorded runs", fontsize=10)
    figure.tight_layout()
    out = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": bench}):
        figure.savefig(out, format="svg", metadata={"Date": None})
    plt.close(figure)
    return out.getvalue()


def _value(figure: dict[str, Any]) -> str:
    value = figure["value"]
    shown = f"{value:.3g}" if isinstance(value, float) else str(value)
    return f"{shown} {figure['unit']}" if figure["unit"] != "ratio" else shown


def section(bench: str, runs: list[dict[str, Any]], image: str) -> str:
    lines = [
        f"### `strom.bench.{bench}`",
        "",
        f"![strom.bench.{bench}: recorded runs]({image})",
        "",
        "| date | commit | command | figures |",
        "| --- | --- | --- | --- |",
    ]
    for run in runs:
        figures = "; ".join(f"{name}: {_value(figure)}" for name, figure in run["figures"].items())
        source = f" (from {run['source']})" if run.get("source") else ""
        commit = run.get("commit") or "–"
        lines.append(f"| {run['date']} | {commit} | `{run['command']}` | {figures}{source} |")
    return "\n".join(lines) + "\n"


def plots(path: str = RESULTS, commands: list[str] | None = None) -> tuple[dict[str, str], str]:
    """({file under docs/: SVG text}, the Markdown that shows them) for every recorded benchmark,
    then the benchmark commands (``commands``: those that take ``--record``) with no run yet."""
    files, sections = {}, []
    recorded = by_bench(load(path))
    for bench, runs in sorted(recorded.items()):
        name = f"benchmarks/{bench}.svg"
        files[name] = svg(bench, runs)
        sections.append(section(bench, runs, name))
    if not sections:
        sections.append("No benchmark has recorded a run yet (`--record`).\n")
    waiting = [bench for bench in (benchmarks() if commands is None else commands) if bench not in recorded]
    if waiting:
        lines = ["### Not recorded yet", "", "These take `--record` and have no recorded run: their plots appear here"]
        lines += ["once run with it.", ""]
        lines += [f"- `python -m strom.bench.{bench} --record`" for bench in waiting]
        sections.append("\n".join(lines) + "\n")
    return files, "\n".join(sections)
