#!/usr/bin/env bash
# Sets up everything, checks the code (ruff lint and format, mypy: strict for strom/protocol and
# strom/storage, checked for the rest), then runs the whole test suite (unit, real-process and
# real-client tests). Extra arguments go to pytest; STROM_SKIP_LINT=1 skips the checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${STROM_SKIP_LINT:-0}" != 1 ]; then
    .venv/bin/ruff check strom tests scripts
    .venv/bin/ruff format --check strom tests scripts
    .venv/bin/mypy strom
fi
exec .venv/bin/python -m pytest -q --durations=25 "$@"
