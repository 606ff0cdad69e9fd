"""A real broker, ``strom console`` as its own process, and headless Debian chromium driven by Playwright.

One of each per module: the browser tests share them and use their own topics and groups. Every
wait is bounded (the console's URL line, Playwright's timeouts) and each process is stopped for sure.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess

CHROMIUM = "/usr/bin/chromium"
START_TIMEOUT_S = 20
PAGE_TIMEOUT_MS = 15_000


class ConsoleProcess:
    """``strom console --port 0``; the URL is the one it prints."""

    def __init__(self, bootstrap: str, log_path: Path, extra_args: list[str] | None = None):
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.extra_args = extra_args or []  # e.g. --command-config FILE
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> ConsoleProcess:
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "strom.cli.main",
                    "console",
                    "--bootstrap-server",
                    self.bootstrap,
                    "--port",
                    "0",
                    "--sample-interval",
                    "0.5",
                    "--refresh-ms",
                    "400",
                    *self.extra_args,
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
            )
        assert self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
        if not line.startswith(b"strom console: http://"):
            self.stop()
            raise RuntimeError(f"strom console did not start: {line!r}\n{self.log_path.read_text(errors='replace')}")
        self.url = line.split()[2].decode().rstrip("/")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@pytest.fixture(scope="module")
def cluster_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("console") / "data") as process:
        yield process


@pytest.fixture(scope="module")
def console(cluster_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleProcess]:
    process = ConsoleProcess(cluster_broker.bootstrap, tmp_path_factory.mktemp("console-log") / "console.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=PAGE_TIMEOUT_MS)  # a loaded machine: bounded, but not tight

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser, console: ConsoleProcess):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=console.url)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()
