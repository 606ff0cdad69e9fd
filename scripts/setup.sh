#!/usr/bin/env bash
# Installs everything strom needs on a fresh Debian machine (Java is already there):
# Debian packages (ZooKeeper for clusters, kcat as a real client, chromium for the console's browser tests, nftables for network faults) and a virtualenv in .venv
# with strom and its test dependencies. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
# strom console's browser tests: Playwright (PyPI) drives Debian's chromium; no browser download
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# Burrow (sarama, old API versions: ListOffsets v0, Fetch v2) reads consumer lag from strom in a test
command -v Burrow >/dev/null 2>&1 || need_apt+=(burrow)
# nft cuts links between brokers in network namespaces (strom.chaos.netns, the fenced-leader tests)
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The interpreter: STROM_PYTHON if set, else Debian's python3.11 when present, else python3.
# Debian builds CPython with profile-guided optimisation and a statically linked libpython; a
# plain source build (pyenv's, say) runs strom's request path about 40% slower on this machine
# (python -m strom.bench.requests: ~30k against ~42k requests per broker CPU-second).
python=${STROM_PYTHON:-}
if [ -z "$python" ]; then
    python=python3
    if [ -x /usr/bin/python3.11 ] && /usr/bin/python3.11 -c "import ensurepip, venv" 2>/dev/null; then
        python=/usr/bin/python3.11
    fi
fi
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $python ($("$python" --version 2>&1))"
    "$python" -m venv .venv
fi
stamp=.venv/.strom-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    # the test extra: real clients and codecs, pyspark, atheris (python -m strom.fuzz)
    echo "setup: installing strom and its dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e ".[test]"
    touch "$stamp"
fi
