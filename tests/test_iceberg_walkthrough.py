"""The Iceberg guide's walkthrough, run as written: its shell lines against a real broker (the
address 127.0.0.1:9092 and the catalog ./strom-data/iceberg-catalog.db swapped for the test
broker's), the console's topic page as the walkthrough shows it, then its pyiceberg + DuckDB and
Spark snippets, whose printed output must be the one the guide shows. The README's short version
is made of the walkthrough's own lines."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess
from tests.console.conftest import ConsoleProcess

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guides" / "iceberg.md"
HEADING = "## Walkthrough"
README_HEADING = "### Topics as Iceberg tables"
BOOTSTRAP = "127.0.0.1:9092"
CATALOG = "sqlite:///strom-data/iceberg-catalog.db"
WAIT_S = 60


def blocks_under(path: Path, heading: str) -> list[tuple[str, str]]:
    """The fenced blocks of the section that starts at ``heading``, as (language, text)."""
    text = path.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return re.findall(r"```(\w+)\n(.*?)```", text[start : end if end >= 0 else None], re.S)


def section_blocks() -> list[tuple[str, str]]:
    """The fenced blocks of the walkthrough, in order, as (language, text)."""
    blocks = blocks_under(GUIDE, HEADING)
    languages = [lang for lang, _ in blocks]
    assert languages == ["bash", "bash", "text", "bash", "text", "python", "text", "bash", "python", "text"], languages
    return blocks


def console_section(page: str) -> str:
    """The "Iceberg table" part of a topic page, as text: the table line, then the lag table's rows."""
    part = page[page.index("<h2>Iceberg table</h2>") : page.index("<h2>Configs</h2>")]
    lines = []
    for paragraph, row in re.findall(r'<p[^>]*id="iceberg-table"[^>]*>(.*?)</p>|<tr[^>]*>(.*?)</tr>', part, re.S):
        if paragraph:
            lines.append(html.unescape(re.sub(r"<[^>]+>", "", paragraph)).strip())
        else:
            cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
            lines.append(" | ".join(html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells))
    return "\n".join(lines)


def without_run_details(text: str) -> str:
    """A snapshot id, the warehouse's directory and the topic's id (in the table's location)
    differ from run to run."""
    text = re.sub(r"snapshot \d+", "snapshot N", text)
    text = re.sub(r"(iceberg-warehouse/\S+)/[0-9a-f]{32}\b", r"\1/TOPIC-ID", text)
    return re.sub(r"file://\S*/iceberg-warehouse/", "file://.../iceberg-warehouse/", text)


@pytest.mark.timeout(600)
def test_the_iceberg_walkthrough_runs_as_written(tmp_path):
    blocks = [body for _, body in section_blocks()]
    (start,), (create, produce, pause, status), (console,), (produce_more,) = (
        blocks[i].strip().splitlines() for i in (0, 1, 3, 7)
    )
    shown_status, shown_page, tables_py, shown_tables, spark_py, shown_spark = (blocks[i] for i in (2, 4, 5, 6, 8, 9))
    assert start.startswith(".venv/bin/strom server-start ")
    overrides = dict(re.findall(r"--override (\S+)=(\S+)", start))
    assert overrides == {"iceberg.enabled": "true", "iceberg.target.lag.ms": "1000"}
    assert pause == "sleep 3" and console == f".venv/bin/strom console --bootstrap-server {BOOTSTRAP}"
    data = tmp_path / "strom-data"
    with BrokerProcess(data, overrides) as broker:

        def here(text: str) -> str:
            return text.replace(BOOTSTRAP, broker.bootstrap).replace(CATALOG, f"sqlite:///{data}/iceberg-catalog.db")

        def shell(command: str) -> str:
            done = subprocess.run(["bash", "-c", here(command)], cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
            return done.stdout

        def python(source: str, name: str, timeout_s: float) -> str:
            script = tmp_path / name
            script.write_text(here(source))
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}  # use_this_python's job
            env["PYTHONIOENCODING"] = "utf-8"  # DuckDB draws its table with box characters
            done = subprocess.run(
                [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, env=env
            )
            assert done.returncode == 0, done.stderr[-3000:]
            return done.stdout

        shell(create)
        shell(produce)
        # "sleep 3" is the walkthrough's wait for a round (every second); on a loaded machine: bounded, longer
        deadline = time.monotonic() + WAIT_S
        while (printed := shell(status)).strip() != shown_status.strip():
            assert time.monotonic() < deadline, f"status after {WAIT_S}s:\n{printed}"
            time.sleep(0.5)

        process = ConsoleProcess(broker.bootstrap, tmp_path / "console.log").start()
        try:
            with urllib.request.urlopen(f"{process.url}/topics/orders", timeout=30) as response:
                page = console_section(response.read().decode())
        finally:
            process.stop()
        assert without_run_details(page) == without_run_details(shown_page.strip())

        assert python(tables_py, "tables.py", 120).strip() == shown_tables.strip()

        shell(produce_more)
        printed = python(spark_py, "spark.py", 300)
        assert shown_spark.strip() in printed, printed


def test_the_readmes_iceberg_lines_are_the_walkthroughs():
    guide = {line.strip() for lang, body in section_blocks() if lang != "text" for line in body.splitlines()}
    readme = [
        line.strip() for _, body in blocks_under(ROOT / "README.md", README_HEADING) for line in body.splitlines()
    ]
    assert len(readme) > 10
    assert [line for line in readme if line and line not in guide] == []
