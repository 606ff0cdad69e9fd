"""strom.testing as an application uses it: its own pytest session, fixtures from the entry point.

tests/plugin_project is a small application with its tests and a pytest.ini, and no conftest.py.
It is copied to a temporary directory and run by ``python -m pytest`` in a new session (process
group), which is killed as a whole if it outlives its bound, so no broker or ZooKeeper is left
behind. The outer suite does not collect it (tests/conftest.py: collect_ignore).
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from strom.storage.log_manager import CLEAN_SHUTDOWN_FILE
from strom.testing import Broker
from tests.processes import alive, cmdline, descendants

PROJECT = Path(__file__).parent / "plugin_project"
RUN_TIMEOUT_S = 240


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return project


def run_project(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    project = copy_project(tmp_path)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--setup-show",
        "-rA",
        f"--basetemp={tmp_path / 'basetemp'}",
        *args,
    ]
    process = subprocess.Popen(
        cmd, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        pytest.fail(f"the project's pytest run outlived {RUN_TIMEOUT_S}s:\n{out[-5000:]}")
    return subprocess.CompletedProcess(cmd, process.returncode, out, "")


def test_the_project_has_no_conftest_the_fixtures_come_from_the_entry_point():
    assert not list(PROJECT.rglob("conftest.py"))
    assert "pytest_plugins" not in "".join(p.read_text() for p in PROJECT.glob("*.py"))


def test_an_application_runs_its_tests_on_a_broker_and_a_cluster(tmp_path):
    """Produce, consume, a consumer group, a crash of the single broker (restarted by the test, or
    by the plugin before the next test), and a kill -9 of a partition leader in the 3-broker
    cluster while the application goes on producing (RF 3)."""
    result = run_project(tmp_path)
    assert result.returncode == 0, result.stdout[-8000:]
    assert "7 passed" in result.stdout, result.stdout[-8000:]
    # session scope by default: each fixture is set up once for the whole run
    assert result.stdout.count("SETUP    S strom_broker") == 1
    assert result.stdout.count("SETUP    S strom_cluster") == 1


def test_in_process_broker_with_function_scope(tmp_path):
    result = run_project(
        tmp_path, "-o", "strom_broker_in_process=true", "-o", "strom_broker_scope=function", "test_orders.py"
    )
    assert result.returncode == 0, result.stdout[-8000:]
    assert "6 passed" in result.stdout, result.stdout[-8000:]
    assert result.stdout.count("SETUP    F strom_broker") == 5  # one broker per test that asks for it


def test_an_unknown_scope_is_a_usage_error(tmp_path):
    result = run_project(tmp_path, "-o", "strom_broker_scope=weekly", "--setup-plan")
    assert result.returncode == 4  # pytest's usage error
    assert "strom_broker_scope = 'weekly': expected one of session, package, module, class, function" in result.stdout


def test_helpers_report_what_went_wrong(tmp_path):
    with Broker(tmp_path / "broker", in_process=True) as broker:
        broker.create_topic("events", partitions=2)
        with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
            broker.create_topic("events")
        with pytest.raises(TimeoutError, match="consumed 0 of 1 messages from events"):
            broker.consume("events", 1, timeout=1)
        with pytest.raises(TypeError, match="list of values"):
            broker.produce("events", "not a list")
        with pytest.raises(ValueError, match="no broker 7"):
            broker.kill(7)
        written = broker.produce("events", [("k", "v")], partition=1, headers=[("h", b"1")])
        assert [(r.partition, r.offset, r.key, r.value) for r in written] == [(1, 0, b"k", b"v")]
        [read] = broker.consume("events", 1, timeout=30)
        assert (read.partition, read.offset, read.key, read.value, read.headers) == (1, 0, b"k", b"v", [("h", b"1")])


def test_an_in_process_kill_leaves_a_log_to_recover(tmp_path):
    with Broker(tmp_path / "broker", in_process=True) as broker:
        broker.create_topic("crash")
        broker.produce("crash", [b"a", b"b"])
        broker.kill()
        assert not broker.alive()
        assert not (tmp_path / "broker" / "data" / CLEAN_SHUTDOWN_FILE).exists()
        broker.restart()
        broker.produce("crash", [b"c"])
        records = broker.consume("crash", 3, timeout=30)
        assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_the_start_time_benchmark_prints_its_figures():
    result = subprocess.run(
        [sys.executable, "-m", "strom.bench.fixture", "--runs", "1", "--cluster-runs", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "single broker, child process:  start to ready" in result.stdout
    assert "single broker, in process, later starts: start to ready" in result.stdout


HOLDING_TEST = """
import os
import time
from pathlib import Path


def test_holds_both_fixtures(strom_broker, strom_cluster):
    Path(os.environ["STROM_TEST_READY_FILE"]).write_text("ready")
    time.sleep(600)
"""
GONE_WITHIN_S = 10


def test_a_sigkilled_session_leaves_no_broker_or_zookeeper(tmp_path):
    """The application's pytest process is killed with SIGKILL while a test holds both fixtures:
    nothing of it runs its teardown, yet its brokers and ZooKeeper stop by themselves."""
    project = copy_project(tmp_path)
    (project / "test_holding.py").write_text(HOLDING_TEST)
    ready = tmp_path / "ready"
    with open(tmp_path / "session.out", "wb") as out:
        session = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'basetemp'}"]
            + ["test_holding.py"],
            cwd=project,
            env=dict(os.environ, STROM_TEST_READY_FILE=str(ready)),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert session.poll() is None, (tmp_path / "session.out").read_text()[-5000:]
            assert time.monotonic() < deadline, (tmp_path / "session.out").read_text()[-5000:]
            time.sleep(0.1)
        started = descendants(session.pid)
        brokers = [pid for pid in started if "server-start" in cmdline(pid)]
        zookeepers = [pid for pid in started if "QuorumPeerMain" in cmdline(pid)]
        assert (len(brokers), len(zookeepers)) == (4, 1), [cmdline(pid)[:100] for pid in started]
        session.kill()  # the session's process only: its children are not signalled
        session.wait(10)
        deadline = time.monotonic() + GONE_WITHIN_S
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {pid: cmdline(pid)[:100] for pid in started if alive(pid)}
        assert not left, f"left {GONE_WITHIN_S}s after the session's SIGKILL: {left}"
    finally:
        try:  # whatever is left, still in the session's process group
            os.killpg(session.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        session.wait(10)
