#!/usr/bin/env bash
# The main job: set everything up, run the seeds' single-node quickstart on an embedded broker,
# then the demo pipeline: access logs -> strom -> Spark Structured Streaming -> topic + Parquet,
# with a live table. Ctrl-C stops it cleanly; run it again and it continues from its checkpoint.
# STROM_DEMO_SECONDS=N stops the demo after N seconds (for scripts).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/quickstart.sh
export PATH="$PWD/.venv/bin:$PATH"
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
echo
echo "== the demo pipeline (data in ./strom-demo; Ctrl-C to stop)"
args=()
if [ -n "${STROM_DEMO_SECONDS:-}" ]; then
    args+=(--duration "$STROM_DEMO_SECONDS")
fi
exec strom demo "${args[@]}" "$@"
