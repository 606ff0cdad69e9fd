"""One strom broker for tests: a child process, or a thread of this process with its own event loop.

A process is what production runs and the only thing ``kill -9`` can hit. A thread starts in a
few milliseconds once strom is imported (no interpreter to start, no imports to repeat), but
shares the GIL with the test and cannot be killed: its ``kill`` stops the event loop as a crash
would leave things (no controlled shutdown, no flush, no checkpoints, no clean-shutdown marker).

Both listen on a fixed loopback port picked below the kernel's ephemeral range
(``zookeeper_server.free_port``), so a restarted broker comes back at the address clients already
know: a port from a bind on port 0 could become some connection's source port while the broker is
down. A port given in the overrides is kept the same way, port 0 included. Readiness is the
``strom.port`` file the broker writes once it accepts connections (a thread reports it directly).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from strom.cluster.zookeeper_server import free_port

if TYPE_CHECKING:  # asyncio is imported when a thread node starts: the plugin loads in every pytest run
    import asyncio

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
PORT_FILE = "strom.port"


def base_overrides(broker_id: int, data_dir: Path) -> dict[str, str]:
    """What every test broker needs: loopback, a free port, its own data dir, groups that form at
    once, and internal topics of 3 partitions rather than 50 (their first use creates them all)."""
    return {
        "broker.id": str(broker_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(data_dir),
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
    }


class ProcessNode:
    """``strom server-start`` as a child process; output in ``<data dir>.log``."""

    def __init__(self, broker_id: int, data_dir: Path, overrides: dict[str, str]):
        self.broker_id = broker_id
        self.data_dir = Path(data_dir)
        self.overrides = {**base_overrides(broker_id, self.data_dir), **overrides}
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.env: dict[str, str] = {}  # added to this process's environment (strom.clock's offset file, say)
        self.prefix: list[str] = []  # before the command line: ``ip netns exec NS`` (strom.chaos.netns)
        self.host = "127.0.0.1"  # the listener's address, kept across restarts with its port

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def spawn(self) -> None:
        """Start the process without waiting for it (a cluster starts its brokers side by side)."""
        if self.alive:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / PORT_FILE).unlink(missing_ok=True)
        # stops by itself if this process dies without stopping it (strom.server.parent_watch)
        cmd = [*self.prefix, sys.executable, "-m", "strom.cli.main", "server-start", "--parent-pid", str(os.getpid())]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env} if self.env else None,
            )

    def poll_ready(self) -> bool:
        """True once the broker serves; raises if it exited."""
        assert self.process is not None, "spawn() first"
        if self.process.poll() is not None:
            raise RuntimeError(f"broker {self.broker_id} exited with {self.process.returncode}:\n{self.log_tail()}")
        try:
            text = (self.data_dir / PORT_FILE).read_text().strip()
        except FileNotFoundError:
            return False
        if not text:
            return False
        self.port = int(text)
        # come back on the same port after a kill or a restart
        name = self.overrides["listeners"].split("://", 1)[0]  # the listener's name (SASL_SSL, say) is kept
        self.overrides["listeners"] = f"{name}://{self.host}:{self.port}"
        return True

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        self.spawn()
        wait_ready([self], timeout)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (controlled shutdown), SIGKILL if it does not end within ``timeout``."""
        process = self.process
        if process is None or process.poll() is not None:  # not alive
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """kill -9: what a crash leaves behind."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:  # alive
            process.kill()
        process.wait(STOP_TIMEOUT_S)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


def wait_ready(nodes: list[ProcessNode], timeout: float) -> None:
    """Wait until every node serves; kill them all and raise when one exits or time runs out."""
    deadline = time.monotonic() + timeout
    waiting = list(nodes)
    try:
        while waiting:
            waiting = [node for node in waiting if not node.poll_ready()]
            if waiting and time.monotonic() >= deadline:
                raise RuntimeError(
                    f"broker {waiting[0].broker_id} did not start within {timeout}s:\n{waiting[0].log_tail()}"
                )
            if waiting:
                time.sleep(0.005)
    except BaseException:
        for node in nodes:
            node.kill()
        raise


def _import_server():
    """Import the broker for a thread node.

    kio registers hypothesis strategies when hypothesis is importable, which adds about 0.2 s to
    the first import (`strom server-start` skips it the same way). The application's own use of
    hypothesis is untouched: the block is lifted right after, and skipped if it already imported
    hypothesis.
    """
    blocked = "hypothesis" not in sys.modules
    if blocked:
        sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        from strom.server.broker import Broker
        from strom.server.config import BrokerConfig
    finally:
        if blocked and sys.modules.get("hypothesis", 0) is None:
            del sys.modules["hypothesis"]
    return Broker, BrokerConfig


def _loop_factory():
    import asyncio

    try:
        import uvloop

        return uvloop.new_event_loop
    except ImportError:
        return asyncio.new_event_loop


class ThreadNode:
    """A broker on its own thread and event loop in this process."""

    def __init__(self, broker_id: int, data_dir: Path, overrides: dict[str, str]):
        self.broker_id = broker_id
        self.data_dir = Path(data_dir)
        self.overrides = {**base_overrides(broker_id, self.data_dir), **overrides}
        self.log_path = None  # its log records go to this process's logging ("strom.*" loggers)
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._crash = False
        self._error: BaseException | None = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        if self.alive:
            raise RuntimeError(f"broker {self.broker_id} is already running")
        broker_class, config_class = _import_server()
        config = config_class.from_properties(None, self.overrides)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ready = threading.Event()
        self._error, self._crash = None, False
        self._thread = threading.Thread(
            target=self._run, args=(broker_class, config, ready), name=f"strom-broker-{self.broker_id}", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout):
            self.kill()
            raise RuntimeError(f"in-process broker {self.broker_id} did not start within {timeout}s")
        if self._error is not None:
            self._thread.join(STOP_TIMEOUT_S)
            raise RuntimeError(f"in-process broker {self.broker_id} failed to start: {self._error}") from self._error
        self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"

    def _run(self, broker_class, config, ready: threading.Event) -> None:
        import asyncio

        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(self._serve(broker_class, config, ready))

    async def _serve(self, broker_class, config, ready: threading.Event) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        broker = broker_class(config)
        try:
            await broker.start()
        except BaseException as exc:
            self._error = exc
            try:
                await broker.shutdown()  # release what the partial start holds (port, files, store)
            finally:
                ready.set()
            return
        self.port = broker.port
        ready.set()
        await self._wake.wait()
        if self._crash:
            await broker.shutdown(crash=True)
        else:
            await broker.shutdown()

    def _signal(self, crash: bool) -> None:
        if not self.alive or self._loop is None:
            return
        assert self._thread is not None and self._wake is not None  # alive, and its loop runs
        self._crash = crash
        try:
            self._loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop closed meanwhile
            pass
        self._thread.join(STOP_TIMEOUT_S)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        self._signal(crash=False)

    def kill(self) -> None:
        self._signal(crash=True)

    def log_tail(self, chars: int = 4000) -> str:
        return "(in-process broker: its log records went to the 'strom' loggers of this process)"
