"""The Iceberg REST catalog's HTTP server (``iceberg.rest.catalog.listeners=http://host:port``).

The standard library's threading HTTP server, one thread per connection, as the console and the
metrics endpoint do, rather than h11 on the broker's event loop as the Schema Registry does: every
catalog call blocks (SQL, metadata files that can be large), so it would need a thread anyway,
and a slow commit must not stall the loop that serves Produce and Fetch. HTTP/1.1 keep-alive;
a connection idle for ``IDLE_TIMEOUT_S`` is closed; a body over ``MAX_BODY_BYTES`` gets 413 at once;
past ``MAX_CONNECTIONS`` connections (each holding a thread) a new one gets 503 and is closed.
With https the TLS handshake happens on the connection's own thread, not in the accept loop.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from strom.iceberg.rest_catalog import RestCatalogService

log = logging.getLogger("strom.iceberg")

MAX_BODY_BYTES = 64 * 1024 * 1024  # a commit carries schemas and snapshots, not data: far below it
IDLE_TIMEOUT_S = 60.0
URL_FILE = "strom.iceberg-catalog"  # in the broker's first log dir: the catalog's URL, for tools and tests
MAX_CONNECTIONS = 128  # each holds a thread: past it a new connection gets 503 at once
_BUSY_BODY = json.dumps(
    {"error": {"message": "Too many connections to the catalog", "type": "ServiceUnavailableException", "code": 503}}
).encode()
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    service: RestCatalogService
    context: ssl.SSLContext | None
    slots: threading.BoundedSemaphore

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:  # plain HTTP only: a TLS client cannot read it before a handshake, and just sees the close
                if self.context is None:
                    request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.context is not None:  # the handshake on this connection's thread (bounded by the timeout)
            request.settimeout(IDLE_TIMEOUT_S)
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as exc:
                log.info("iceberg rest catalog: TLS handshake with %s failed: %s", client_address, exc)
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke (a client gone mid-answer): one line, not socketserver's traceback on stderr."""
        log.info("iceberg rest catalog: the connection from %s failed: %r", client_address, sys.exc_info()[1])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
        log.debug("iceberg rest catalog: " + format, *args)

    def _respond(self) -> None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():  # every client here sends a length
            self.close_connection = True
            refusal = {"error": {"message": "Send a Content-Length", "type": "BadRequestException", "code": 411}}
            self._write(411, refusal, [])
            return
        length_text = self.headers.get("Content-Length") or "0"
        try:
            length = int(length_text)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            self._write(413 if length > 0 else 400, _error_body(413 if length > 0 else 400, length_text), [])
            return
        body = self.rfile.read(length) if length else b""
        if len(body) < length:  # the client went away mid-body: nothing of it is acted on
            self.close_connection = True
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, payload, extra = self.server.service.handle(self.command, self.path, headers, body)
        self._write(status, payload, extra)

    def _write(self, status: int, payload: Any, extra: list[tuple[str, str]]) -> None:
        data = b"" if payload is None else payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        if payload is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra:
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _respond


def _error_body(status: int, length: str) -> dict[str, Any]:
    message = f"Request body of {length} bytes is over {MAX_BODY_BYTES}" if status == 413 else "Bad Content-Length"
    return {"error": {"message": message, "type": "BadRequestException", "code": status}}


class RestCatalogServer:
    """Serves ``service`` on ``sock`` (bound and listening) on daemon threads until ``close()``."""

    def __init__(self, service: RestCatalogService, sock: socket.socket, context: ssl.SSLContext | None = None):
        self._server = _Server(sock.getsockname()[:2], _Handler, bind_and_activate=False)
        self._server.socket.close()
        self._server.socket = sock
        self._server.service = service
        self._server.context = context
        self._server.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._thread = threading.Thread(target=self._server.serve_forever, name="iceberg-rest-catalog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
