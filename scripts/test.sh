#!/usr/bin/env bash
# Sets up everything, checks the code (ruff lint and format, mypy: strict for strom/protocol and
# strom/storage, checked for the rest; lint-imports: DESIGN.md's layers and no import cycles, as
# pyproject.toml's [tool.importlinter] states them; mkdocs build --strict: the documentation site), then runs the whole test suite (unit,
# real-process and real-client tests). Extra arguments go to pytest; STROM_SKIP_LINT=1 skips the checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${STROM_SKIP_LINT:-0}" != 1 ]; then
    .venv/bin/ruff check strom tests scripts
    .venv/bin/ruff format --check strom tests scripts
    .venv/bin/mypy strom
    .venv/bin/lint-imports --no-cache
    # the documentation site (mkdocs.yml): a broken link or anchor, a page missing from the nav or a
    # reference page the code cannot generate fails here; built into a temporary dir, then removed
    site=$(mktemp -d "${TMPDIR:-/tmp}/strom-site.XXXXXX")
    # (not --quiet: it hides the warnings, and --strict then has none to fail on)
    NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict -d "$site" || { rm -rf "$site"; exit 1; }
    rm -rf "$site"
fi
# Two workers: most real-process tests spend their time waiting (sessions, timeouts, Spark batches),
# so two in parallel roughly halve the wall time on a 2-core machine. STROM_TEST_WORKERS=0 runs serially.
exec .venv/bin/python -m pytest -q --durations=25 -n "${STROM_TEST_WORKERS:-2}" --dist loadgroup "$@"
