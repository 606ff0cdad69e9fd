"""Real strom broker processes for tests: started on 127.0.0.1 with port 0, stopped for sure.

    with BrokerProcess(tmp_path) as broker:
        Producer({"bootstrap.servers": broker.bootstrap})

The bound port is read from ``<data dir>/strom.port``, which the broker writes once it serves.
Every wait is bounded; ``stop()`` sends SIGTERM and escalates to SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STARTUP_TIMEOUT_S = 20
STOP_TIMEOUT_S = 15


def start_expecting_failure(
    data_dir: Path | str, *overrides: str, args: tuple[str, ...] = (), user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``strom server-start`` on 127.0.0.1:0 with log.dirs=``data_dir`` and ``overrides`` (KEY=VALUE,
    later ones win), run to its end (bounded), as ``user`` when given (the tests run as root)."""
    cmd = [sys.executable, "-m", "strom.cli.main", "server-start", *args]
    for override in ("listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={data_dir}", *overrides):
        cmd += ["--override", override]
    as_user = {"user": user, "group": "nogroup", "extra_groups": []} if user else {}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, **as_user)


class BrokerProcess:
    def __init__(
        self,
        data_dir: Path | str,
        overrides: dict[str, str] | None = None,
        *,
        properties: str | None = None,
        broker_id: int = 0,
        args: list[str] | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.overrides = {
            "broker.id": str(broker_id),
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.properties = properties
        self.args = list(args or [])
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        # a killed test session leaves no broker behind (strom.server.parent_watch)
        cmd = [sys.executable, "-m", "strom.cli.main", "server-start", "--parent-pid", str(os.getpid())]
        if self.properties:
            cmd.append(self.properties)
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd + self.args

    def start(self) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port_file = self.data_dir / "strom.port"
        if port_file.exists():
            port_file.unlink()
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.read_log()}")
            if port_file.exists():
                text = port_file.read_text().strip()
                if text:
                    self.port = int(text)
                    return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"broker did not start within {STARTUP_TIMEOUT_S}s:\n{self.read_log()}")

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except FileNotFoundError:
            return ""

    def stop(self) -> int | None:
        """SIGTERM, wait for the clean shutdown, SIGKILL if it does not come."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(STOP_TIMEOUT_S)

    def kill(self) -> None:
        """kill -9: what a crash leaves behind."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
