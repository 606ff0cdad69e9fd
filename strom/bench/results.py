"""A benchmark's figures, appended to the file the documentation site draws its plots from.

``--record`` on a benchmark command appends one JSON line to ``docs/benchmarks/results.jsonl``
(or the file given): the benchmark's name, the UTC date, the commit it ran at, the command line
and its figures, each with its unit. ``strom.docs.plots`` draws every benchmark's figures over
its recorded runs with matplotlib when the site is built, and the benchmarks page shows the
plots with their commands and dates. A record is a measurement made on some machine at some
time, so nothing recomputes or checks it; the file only grows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pkgutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "docs", "benchmarks", "results.jsonl")


def add_record_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--record",
        nargs="?",
        const=RESULTS,
        metavar="FILE",
        help="append this run's figures to FILE (default docs/benchmarks/results.jsonl), "
        "which the documentation site plots",
    )


def commit() -> str | None:
    """The checkout's commit, with ``+`` when the work tree has changes; None outside git."""
    try:
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "strom"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def record(path: str, bench: str, figures: dict[str, tuple[float, str]], argv: list[str] | None = None) -> None:
    """Append one run: ``figures`` maps a figure's name to (value, unit). A figure the run could not
    measure (NaN or infinite: a rate over no time) is left out, and said so: JSON has no such value."""
    unmeasured = sorted(name for name, (value, _) in figures.items() if not math.isfinite(value))
    figures = {name: figure for name, figure in figures.items() if name not in unmeasured}
    entry: dict[str, Any] = {
        "bench": bench,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "commit": commit(),
        "command": " ".join(["python -m", f"strom.bench.{bench}", *(sys.argv[1:] if argv is None else argv)]),
        "figures": {name: {"value": round(value, 6), "unit": unit} for name, (value, unit) in figures.items()},
    }
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")
    print(f"recorded in {path}" + (f" (not measured, left out: {', '.join(unmeasured)})" if unmeasured else ""))


def record_if_asked(
    args: argparse.Namespace, bench: str, figures: Mapping[str, tuple[float, str]], argv: list[str] | None = None
) -> None:
    """The last step of every benchmark command: its headline figures, (value, unit) by name,
    appended when it was run with ``--record`` (``add_record_argument``)."""
    if getattr(args, "record", None):
        record(args.record, bench, dict(figures), argv)


def benchmarks() -> list[str]:
    """The benchmark commands under strom.bench that take ``--record`` (their module names), found
    in their sources without importing them: the benchmarks page lists those with no run yet."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    for module in pkgutil.iter_modules([here]):
        if module.ispkg:
            continue
        with open(os.path.join(here, f"{module.name}.py"), encoding="utf-8") as handle:
            if module.name != "results" and "add_record_argument(parser)" in handle.read():
                found.append(module.name)
    return sorted(found)


def load(path: str = RESULTS) -> list[dict[str, Any]]:
    """Every record in ``path``, oldest first (an empty list when there is no file)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
