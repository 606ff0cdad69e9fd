"""The kept fuzz corpora, replayed through their targets: what once found a bug stays fixed.

tests/fuzz/corpus/<target>/regressions holds every input the fuzzer found a bug with (named
after the bug); seeds (requests captured from the four real clients, logs written by strom) are
replayed too, so a target that starts failing on ordinary input is noticed here, not only in a
long fuzzing run. Each target judges an input as the fuzzer does (strom.fuzz.targets), in a
fresh process, so that the per-input memory bound starts from a small peak RSS.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from strom.fuzz.__main__ import TARGETS
from strom.fuzz.corpus import CORPUS, REPO, corpus_files

REPLAY_TIMEOUT_S = 120


@pytest.mark.parametrize("name", TARGETS)
def test_kept_corpus_replays_without_findings(name, tmp_path):
    files = corpus_files(name)
    assert files, f"no corpus for {name} under {CORPUS}"
    proc = subprocess.run(
        [sys.executable, "-m", "strom.fuzz", "replay", name, "--tmp", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=REPLAY_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-20000:]
    assert f"replayed {len(files)} inputs through {name}: 0 findings" in proc.stdout, proc.stdout


def test_every_regression_is_named_and_replayed():
    """A regression input is named after its bug and belongs to a target that replays it."""
    regressions = sorted(CORPUS.glob("*/regressions/*"))
    assert regressions
    for path in regressions:
        assert path.parent.parent.name in TARGETS, path
        assert not path.name.startswith("crash-"), f"name {path} after the bug it found"
        assert path in corpus_files(path.parent.parent.name)
