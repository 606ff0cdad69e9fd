"""What the KIP-848 tests (tests/integration/test_kip848.py, tests/group/test_migration.py) share: a
broker whose consumer-group heartbeat interval and session timeout are short enough for
reconciliation and expiry to happen within a test's time budget, one such broker for a whole
module, consumers that the tests' wait loops poll, and ``strom consumer-groups`` as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.broker_process import BrokerProcess

KIP848_BROKER = {
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.session.timeout.ms": "6000",
    "offsets.topic.replication.factor": "1",
}


def module_broker(name: str, settings: dict[str, str]) -> Callable[..., Any]:
    """A module-scoped ``broker`` fixture: one broker with ``settings`` for every test of the module
    that asks for ``broker`` (they use unique topic and group names); assign it to ``broker``."""

    @pytest.fixture(scope="module", name="broker")
    def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
        with BrokerProcess(tmp_path_factory.mktemp(name) / "data", settings) as process:
            yield process

    return broker


class PolledConsumer:
    """A confluent-kafka consumer that a test's wait loop polls: it keeps the values it received, and
    closing it twice is harmless (tests close in ``finally`` what they may have closed already)."""

    consumer: Any
    values: list[bytes]
    closed: bool

    def poll(self) -> None:
        if not self.closed:
            msg = self.consumer.poll(0.02)
            if msg is not None and msg.error() is None:
                self.values.append(msg.value())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def consumer_groups(bootstrap: str, *args: str) -> str:
    """The stdout of ``strom consumer-groups --bootstrap-server <bootstrap> <args>``, which must succeed."""
    result = subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "consumer-groups", "--bootstrap-server", bootstrap, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
