import fcntl
import os
import time
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess

# an application's own test project, run as a separate pytest session by tests/test_pytest_plugin.py
collect_ignore = ["plugin_project"]


@pytest.fixture
def broker(tmp_path):
    """A fresh single broker process on 127.0.0.1:<random port>."""
    with BrokerProcess(tmp_path / "data") as process:
        yield process


# tests that run Spark: the session's SparkSession, spark-submit, a standalone Spark cluster, the demo
SPARK_TEST_FILES = ("tests/spark/", "tests/test_demo.py", "tests/cli/test_demo_terminal.py")


def pytest_collection_modifyitems(config, items):
    """Run every Spark test on the same xdist worker, one after the other.

    scripts/test.sh runs the suite in two workers (``--dist loadgroup``). Spread over both, each
    worker would start its own SparkSession, and two Spark JVMs at once on a 2-core machine starve
    each other's Python workers ("Python worker failed to connect back"); one at a time, the other
    worker meanwhile runs the rest of the suite.
    """
    for item in items:
        if item.nodeid.startswith(SPARK_TEST_FILES):
            item.add_marker(pytest.mark.xdist_group("spark"))
        if item.nodeid.startswith(ALONE_TESTS):
            item.add_marker(pytest.mark.alone)
            if item.get_closest_marker("timeout") is None:  # its wait for the lock counts too
                item.add_marker(pytest.mark.timeout(ALONE_WAIT_S + 300))


# tests whose figures need the machine's CPU to themselves (see the ``alone`` marker below)
ALONE_TESTS = (
    "tests/cluster/test_chaos",  # faults timed against the 6 s session and replica.lag.time.max.ms
    "tests/security/test_quotas.py::test_producer_is_held_to_its_byte_rate",  # within 10% over 20 s
)
ALONE_WAIT_S = 900  # the longest test of the other worker, under load, with room to spare


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "alone: a test whose figures depend on having the machine's CPU (a rate held over 20 s, faults "
        "timed against session timeouts): under xdist it waits until the other worker's test has "
        "finished, and the other worker starts nothing new until it is done",
    )


def _flock(handle, mode: int, deadline: float) -> None:
    """flock with a deadline: past it the test goes on without the lock rather than hang."""
    while True:
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)


@pytest.fixture(autouse=True)
def _one_alone_test_at_a_time(request, tmp_path_factory):
    """A readers-writer lock between xdist workers: every test holds it shared, an ``alone`` test
    exclusively. The turnstile is taken first by both, so a waiting ``alone`` test keeps new shared
    holders out instead of waiting for a gap between the other worker's tests that may never come."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    shared_dir = Path(tmp_path_factory.getbasetemp()).parent  # pytest-N/, above each worker's popen-gwK/
    alone = request.node.get_closest_marker("alone") is not None
    deadline = time.monotonic() + ALONE_WAIT_S
    with open(shared_dir / "turnstile.lock", "a+") as turnstile, open(shared_dir / "alone.lock", "a+") as lock:
        _flock(turnstile, fcntl.LOCK_EX, deadline)
        _flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, deadline)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
