"""Binding a broker's HTTP listeners beside the Kafka ones (``schema.registry.listeners``,
``iceberg.rest.catalog.listeners``): ``http://host:port`` or ``https://host:port``, port 0 picking
a free one. A port in use stops startup naming the key; the URL published for a wildcard host
names the broker's advertised host, since clients cannot connect to 0.0.0.0.
"""

from __future__ import annotations

import socket

from strom.server.dynamic_listeners import LISTEN_BACKLOG
from strom.startup import bind_failure


def bind_http_listener(key: str, listener: str, advertised_host: str) -> tuple[socket.socket, str]:
    """(the bound, listening socket, blocking; the URL it is reached at)."""
    from strom.server.schema_registry_http import parse_listener

    scheme, host, port = parse_listener(key, listener)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise bind_failure(key, host, port, exc) from exc
    shown_host = advertised_host if host in ("0.0.0.0", "::") else host
    shown = f"[{shown_host}]" if ":" in shown_host else shown_host
    return sock, f"{scheme}://{shown}:{sock.getsockname()[1]}"
