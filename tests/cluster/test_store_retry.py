"""The startup retry: transient store failures retried with a growing backoff, answers passed through."""

from __future__ import annotations

import pytest

from strom.cluster.store import NodeExistsError, StoreUnavailableError
from strom.cluster.store_retry import StartupTimeoutError, retry_unavailable


def test_transient_failures_are_retried_with_a_doubling_backoff():
    failures = [StoreUnavailableError("ConnectionLoss from ZooKeeper")] * 3
    slept: list[float] = []

    def step() -> str:
        if failures:
            raise failures.pop()
        return "registered"

    assert retry_unavailable(step, "registering broker 1", 60_000, "127.0.0.1:2181", slept.append) == "registered"
    assert slept == [0.1, 0.2, 0.4]


def test_an_answer_is_not_retried():
    slept: list[float] = []

    def step() -> None:
        raise NodeExistsError("/brokers/ids/1")

    with pytest.raises(NodeExistsError):
        retry_unavailable(step, "registering broker 1", 60_000, "127.0.0.1:2181", slept.append)
    assert slept == []


def test_past_the_timeout_the_error_names_the_key():
    def step() -> None:
        raise StoreUnavailableError("not connected to ZooKeeper")

    with pytest.raises(StartupTimeoutError) as raised:
        retry_unavailable(step, "electing the controller", 0, "127.0.0.1:2181/strom", lambda _: None)
    assert str(raised.value) == (
        "ZooKeeper at 127.0.0.1:2181/strom (zookeeper.connect) did not answer electing the controller for 0 ms "
        "(zookeeper.connection.timeout.ms); last error: not connected to ZooKeeper"
    )
