"""Retrying a startup step while ZooKeeper does not answer, within zookeeper.connection.timeout.ms.

Kafka's broker waits out a ZooKeeper that drops its connection during startup (a restart, a
pause, a leader election in the ensemble): its client re-sends once the session is back, and only
a ZooKeeper away for longer than zookeeper.connection.timeout.ms stops the broker. strom's store
calls fail at once instead (they run on the event loop and must never hang it), so the broker's
startup retries each step here. Nothing is served yet, so a blocking sleep between tries holds
up no client. Only StoreUnavailableError is retried: the other store errors are answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from strom.cluster.store import StoreUnavailableError

log = logging.getLogger("strom.zookeeper")

T = TypeVar("T")

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 2.0


class StartupTimeoutError(StoreUnavailableError):
    """ZooKeeper stayed away for zookeeper.connection.timeout.ms during startup: the broker gives up."""


def retry_unavailable(
    step: Callable[[], T],
    what: str,
    timeout_ms: int,
    connect: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``step()``, tried again while it raises StoreUnavailableError, with a backoff doubling from
    FIRST_BACKOFF_S to MAX_BACKOFF_S; each retry is logged. A step failing for ``timeout_ms`` since
    its first failure raises StartupTimeoutError naming zookeeper.connection.timeout.ms.

    A step may be tried again after it took effect without its answer arriving (the connection
    dropped after ZooKeeper did the write), so each step must accept finding its own work done.
    """
    deadline: float | None = None
    backoff = FIRST_BACKOFF_S
    tries = 0
    while True:
        try:
            return step()
        except StartupTimeoutError:  # a step inside this one gave up already: waiting again would double it
            raise
        except StoreUnavailableError as exc:
            now = time.monotonic()
            if deadline is None:
                deadline = now + timeout_ms / 1000
            tries += 1
            if now >= deadline:
                raise StartupTimeoutError(
                    f"ZooKeeper at {connect} (zookeeper.connect) did not answer {what} for {timeout_ms} ms "
                    f"(zookeeper.connection.timeout.ms); last error: {exc}"
                ) from None
            wait = min(backoff, deadline - now)
            log.warning(
                "ZooKeeper unavailable %s (%s); retry %d in %.1fs (giving up after zookeeper.connection.timeout.ms=%d)",
                what,
                exc,
                tries,
                wait,
                timeout_ms,
            )
            sleep(wait)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
