"""A real broker in this process, driven one request frame at a time, as its connections drive it.

The broker runs on an event loop owned by the fuzzing thread: ``request(frame)`` does what
``Connection._drain`` does with one frame (dispatch, await a deferred answer, encode), then
lets the loop run the callbacks the request scheduled. No socket is involved, so a fuzzer
executes thousands of requests a second and gets the exception itself, not a closed socket.

Outcomes follow the connection's rules: DecodeError and CloseConnection close the connection;
an answer is a list of byte chunks (file slices read back); anything else escaping the
dispatcher is what the connection would log as "internal error", and the caller decides.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strom.server.dispatcher import CloseConnection, RawResponse
from strom.storage.segment import FileSlice
from strom.testing.nodes import base_overrides

if TYPE_CHECKING:
    from strom.server.broker import Broker
    from strom.storage.log_manager import LogManager

# What a fuzzed request may make the broker wait for: the long polls and waits a client can ask
# for. Each is cut at WAIT_CAP_S by the harness (a fuzzer cannot wait out a 24-day max_wait_ms).
WAIT_CAP_S = 0.3


class ErrorLog(logging.Handler):
    """Keeps the ERROR records strom logs: a request that makes strom log an error is a finding."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        records, self.records = self.records, []
        return records


class Outcome:
    """What a client would see: response bytes, a closed connection, or an error to judge."""

    __slots__ = ("response", "closed", "error", "waited")

    def __init__(
        self,
        response: bytes | None = None,
        closed: str | None = None,
        error: BaseException | None = None,
        waited: float = 0.0,
    ):
        self.response = response
        self.closed = closed
        self.error = error
        self.waited = waited


class InProcessBroker:
    """A Broker on its own event loop with a fresh temporary data directory."""

    def __init__(self, overrides: dict[str, str] | None = None, root: str | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="strom-fuzz-", dir=root))
        self.overrides = overrides or {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.broker: Broker | None = None
        self.generation = 0

    def start(self) -> InProcessBroker:
        from strom.server.broker import Broker
        from strom.server.config import BrokerConfig

        self.generation += 1
        data_dir = self.root / f"data-{self.generation}"
        overrides = {**base_overrides(0, data_dir), "log.cleaner.backoff.ms": "100", **self.overrides}
        self.loop = loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.broker = broker = Broker(BrokerConfig.from_properties(None, overrides))
        loop.run_until_complete(broker.start())
        return self

    def stop(self) -> None:
        if self.loop is None:
            return
        try:
            assert self.broker is not None  # start() made it right after the loop
            self.loop.run_until_complete(self.broker.shutdown())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
            self.loop = None
            asyncio.set_event_loop(None)
            shutil.rmtree(self.root / f"data-{self.generation}", ignore_errors=True)

    def restart(self) -> None:
        """A fresh broker and data dir: keeps a long run's state (topics, groups, files) bounded."""
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _running(self) -> tuple[asyncio.AbstractEventLoop, Broker, LogManager]:
        assert self.loop is not None and self.broker is not None, "start() first"
        assert self.broker.log_manager is not None  # made by Broker.start()
        return self.loop, self.broker, self.broker.log_manager

    @property
    def partitions(self) -> int:
        return len(self._running()[2].logs)

    def request(self, frame: bytes | bytearray) -> tuple[Any, Outcome]:
        """One request frame (no size prefix) through the dispatcher; returns (header, outcome)."""
        loop, broker, log_manager = self._running()
        dispatcher = broker.dispatcher
        view = memoryview(frame)
        try:
            header, result = dispatcher.handle_frame(view, "127.0.0.1:1")
        except (CloseConnection,) as exc:
            return None, Outcome(closed=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # DecodeError is judged by the caller, like every other exception
            return None, Outcome(error=exc)
        waited = 0.0
        if result is not None and type(result) is not RawResponse and hasattr(result, "__await__"):
            started = time.monotonic()
            task = loop.create_task(_awaited(result))
            done, _ = loop.run_until_complete(asyncio.wait([task], timeout=WAIT_CAP_S))
            waited = time.monotonic() - started
            if not done:
                task.cancel()
                loop.run_until_complete(asyncio.wait([task]))
                self.settle()
                return header, Outcome(waited=waited, closed="cut by the harness after waiting")
            try:
                result = task.result()
            except Exception as exc:
                return header, Outcome(error=exc, waited=waited)
        self.settle()
        if result is None:
            return header, Outcome(waited=waited)
        try:
            chunks = dispatcher.encode(header, result)
        except Exception as exc:
            return header, Outcome(error=exc, waited=waited)
        log_manager.write_behind.write_all()
        out = bytearray()
        for chunk in chunks:
            out += chunk.read() if isinstance(chunk, FileSlice) else chunk
        return header, Outcome(response=bytes(out), waited=waited)

    def settle(self, seconds: float = 0.0) -> None:
        """Run what the request scheduled (metadata reloads, purgatory wake-ups, write-behind)."""
        self._running()[0].run_until_complete(asyncio.sleep(seconds))


async def _awaited(awaitable):
    return await awaitable
