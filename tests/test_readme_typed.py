"""The README's typed quickstart, run as written: its shell lines against a real broker with a
Schema Registry (the addresses 127.0.0.1:9092 and :8081 swapped for the test broker's free
ports), then its Spark snippet, whose printed table must be the one the README shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import registry_url

ROOT = Path(__file__).resolve().parent.parent
HEADING = "### Typed records"
BOOTSTRAP = "127.0.0.1:9092"
REGISTRY = "http://127.0.0.1:8081"


def section_blocks() -> dict[str, str]:
    """The fenced blocks of the README's typed quickstart, by language (bash, python, text)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(HEADING)
    end = text.find("\n#", start + len(HEADING))
    blocks = re.findall(r"```(\w+)\n(.*?)```", text[start : end if end >= 0 else None], re.S)
    found = dict(blocks)
    assert set(found) == {"bash", "python", "text"}, [lang for lang, _ in blocks]
    return found


@pytest.mark.timeout(300)
def test_the_readmes_typed_quickstart_runs_as_written(tmp_path):
    blocks = section_blocks()
    start, *commands = blocks["bash"].replace("\\\n", " ").strip().splitlines()
    # the broker the README starts: its overrides, on free ports instead of 9092 and 8081
    assert start.startswith(".venv/bin/strom server-start ")
    overrides = dict(re.findall(r"--override (\S+)=(\S+)", start))
    assert overrides == {"schema.registry.listeners": REGISTRY}
    overrides["schema.registry.listeners"] = "http://127.0.0.1:0"
    with BrokerProcess(tmp_path / "broker", overrides) as broker:
        url = registry_url(broker)

        def here(text: str) -> str:
            return text.replace(REGISTRY, url).replace(BOOTSTRAP, broker.bootstrap)

        for command in commands:
            done = subprocess.run(["bash", "-c", here(command)], cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            if " register " in command:  # value.schema.id=1 below relies on the first id
                assert '"id": 1' in done.stdout, done.stdout

        script = tmp_path / "clicks.py"
        script.write_text(here(blocks["python"]))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}  # use_this_python's job
        done = subprocess.run(
            [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=240, env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert blocks["text"].strip() in done.stdout, done.stdout
