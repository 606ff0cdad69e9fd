"""Where the kept fuzzing inputs live: tests/fuzz/corpus/<target>/seeds and .../regressions, plus
the request seeds that every request target shares (captured by ``python -m strom.fuzz capture``)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fuzz" / "corpus"


def corpus_dirs(target: str) -> list[Path]:
    """The kept inputs of a target: its seeds (plus the request seeds every request target shares)
    and its regressions."""
    base = CORPUS / target
    dirs = [base / "seeds", base / "regressions"]
    if target in ("frame", "decode", "broker"):
        dirs.append(CORPUS / "requests")
    return [d for d in dirs if d.is_dir()]


def corpus_files(target: str) -> list[Path]:
    return sorted(p for d in corpus_dirs(target) for p in d.iterdir() if p.is_file())
