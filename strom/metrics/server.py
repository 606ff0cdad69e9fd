"""The broker's ``/metrics`` endpoint (``metrics.listener=http://host:port``) and its event-loop lag probe.

Served by prometheus_client's own WSGI server on its own daemon threads rather than by an
asyncio handler on the broker's loop: HTTP parsing, gzip and formatting thousands of samples then
happen off the loop, which only runs the short snapshot callback (``collector.take_snapshot``).
A scrape therefore costs the request path next to nothing, and a scrape still answers (with the
loop lag showing) when the loop is busy.

Each broker has its own ``CollectorRegistry``: several brokers in one process (tests,
``strom.testing``'s in-process mode) each serve their own numbers. The process families
(``process_cpu_seconds_total``, ``process_resident_memory_bytes``, ``process_open_fds``, the
Python GC and platform info) come from prometheus_client's collectors and describe the whole
process, so in-process brokers report the same values there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import deque
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from strom.metrics.collector import BrokerCollector, Sources, register_process_collectors

log = logging.getLogger("strom.metrics")

METRICS_URL_FILE = "strom.metrics"  # in the first log dir: the bound URL, for tools and tests
LAG_INTERVAL_S = 0.25
LAG_WINDOW = 40


def parse_listener(key: str, raw: str) -> tuple[str, int]:
    """``http://host:port`` (port 0 picks a free one) -> (host, port); errors name the key."""
    from strom.storage.log_config import ConfigError

    parts = urlsplit(raw.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/", "/metrics"):
        raise ConfigError(key, f"{raw!r} is not http://host:port")
    return parts.hostname, port


class LoopLag:
    """How late the loop runs a timer: a blocked loop delays every request by as much."""

    def __init__(self) -> None:
        self.last_s = 0.0
        self._recent: deque[float] = deque(maxlen=LAG_WINDOW)

    @property
    def max_s(self) -> float:
        return max(self._recent, default=0.0)

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            planned = loop.time() + LAG_INTERVAL_S
            await asyncio.sleep(LAG_INTERVAL_S)
            self.last_s = max(0.0, loop.time() - planned)
            self._recent.append(self.last_s)


class MetricsEndpoint:
    """Serves ``/metrics`` from ``sources`` on host:port, and writes its URL into ``url_dir``."""

    def __init__(self, sources: Sources, host: str, port: int, *, broker_id: int, url_dir: str):
        self.sources = sources
        self.broker_id = broker_id
        self.url_dir = url_dir  # the broker's first log dir
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self, loop: asyncio.AbstractEventLoop) -> str:
        register_process_collectors(self.registry)
        self.registry.register(BrokerCollector(self.sources, loop))
        try:
            server, self._thread = start_http_server(self.port, self.host, registry=self.registry)
        except OSError as exc:  # a port in use: one line naming the key, as for the listeners
            from strom.startup import bind_failure

            raise bind_failure("metrics.listener", self.host, self.port, exc) from exc
        self._server = server
        bound_port = int(server.socket.getsockname()[1])
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{bound_port}/metrics"
        path = os.path.join(self.url_dir, METRICS_URL_FILE)
        with open(path + ".tmp", "w") as handle:
            handle.write(self.url + "\n")
        os.replace(path + ".tmp", path)
        log.info("broker %d serves metrics on %s", self.broker_id, self.url)
        return self.url

    def stop(self) -> None:
        """Blocks until the server thread has left its loop (at most its 0.5 s poll interval)."""
        server, self._server = self._server, None
        if server is not None:
            started = time.monotonic()
            server.shutdown()
            server.server_close()
            log.debug("metrics endpoint stopped in %.2fs", time.monotonic() - started)
