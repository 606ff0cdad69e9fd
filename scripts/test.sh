#!/usr/bin/env bash
# Sets up everything, then runs the whole test suite (unit, real-process and real-client tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
