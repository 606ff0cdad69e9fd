"""One data directory, one broker: a second `strom server-start` on a running broker's log dir
goes away at once, naming the dir and the holder, and the first serves on untouched; a SIGKILLed
broker's .lock never stops the next start."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from strom.testing.client import KafkaHelpers
from tests.broker_process import BrokerProcess

# A refused broker exits at once rather than waiting for the lock; the bound only tells the two
# apart (it took 0.4 s on a quiet machine and 2.4 s under a loaded full run), it times nothing.
REFUSED_WITHIN_S = 20.0


class Clients(KafkaHelpers):
    """strom.testing's confluent-kafka helpers (acks=all produce, consume from the start) for any broker."""

    def __init__(self, bootstrap: str):
        self.bootstrap_servers = bootstrap


def payloads(count: int) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), os.urandom(100 + i)) for i in range(count)]


def start_refused(broker: BrokerProcess) -> tuple[float, subprocess.CompletedProcess]:
    """Run the broker's command to its end (bounded); returns (seconds taken, result)."""
    began = time.monotonic()
    result = subprocess.run(broker.command(), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return time.monotonic() - began, result


def assert_refused(took: float, result: subprocess.CompletedProcess, locked: Path, holder: int) -> None:
    assert result.returncode != 0, result.stdout + result.stderr
    assert took < REFUSED_WITHIN_S, f"refused after {took:.2f}s"
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"strom server-start: cannot start: Failed to acquire lock on file .lock in {locked}. "
        f"A strom broker in another process or thread (pid {holder}) is using this directory."
    ], result.stderr


def test_a_second_broker_on_a_log_dir_is_refused_and_the_first_serves_on(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as first:
        clients = Clients(first.bootstrap)
        clients.create_topic("kept", partitions=2)
        sent = payloads(50)
        clients.produce("kept", sent[:25])

        same = BrokerProcess(data)
        assert_refused(*start_refused(same), data, first.process.pid)

        # log.dirs lists the locked dir second: nothing is written in the first one either
        other = tmp_path / "other"
        second = BrokerProcess(other, {"log.dirs": f"{other},{data}"})
        assert_refused(*start_refused(second), data, first.process.pid)
        assert sorted(os.listdir(other)) == [".lock"]

        assert first.process.poll() is None
        clients.produce("kept", sent[25:])
        read = clients.consume("kept", 50, timeout=30)
        assert sorted((r.key, r.value) for r in read) == sorted(sent)
        clients._close_clients()


def test_a_sigkilled_brokers_lock_file_does_not_stop_the_next_start(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data).start()
    try:
        clients = Clients(broker.bootstrap)
        clients.create_topic("crash")
        sent = payloads(10)
        clients.produce("crash", sent)
        clients._close_clients()
        killed_pid = broker.process.pid
        broker.kill()
        assert (data / ".lock").read_text().strip() == str(killed_pid)  # left behind, still naming the dead

        broker.start()
        assert (data / ".lock").read_text().strip() == str(broker.process.pid)
        clients = Clients(broker.bootstrap)
        read = clients.consume("crash", 10, timeout=30)
        assert [(r.key, r.value) for r in read] == sent
        clients._close_clients()
    finally:
        broker.stop()
