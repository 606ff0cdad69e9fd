"""The broker's connection keys: socket buffers and request size, idle connections, connection
limits (``max.connections*``, ``max.connection.creation.rate``; the broker enforces them in
``strom.server.connection_limits``) and the client quotas' sampling (``quota.window.*``).

``listener.name.<listener>.max.connections`` and ``...max.connection.creation.rate`` limit one
listener (LISTENER_LIMIT_KEYS); BrokerConfig (``strom.server.config``) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.server.config_keys import config_key, csv_list, int_range, long_range
from strom.storage.log_config import INT_MAX, ConfigError

# listener.name.<listener>.<key> for these limits a listener's connections (strom.server.connection_limits)
LISTENER_LIMIT_KEYS = ("max.connections", "max.connection.creation.rate")


def parse_per_ip_overrides(key: str, raw: str) -> tuple[tuple[str, int], ...]:
    """``host-or-ip:count,...`` (an IPv6 address keeps its colons: the count is after the last)."""
    overrides: list[tuple[str, int]] = []
    if not str(raw).strip():
        return ()
    for item in csv_list(key, raw):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip():
            raise ConfigError(key, f"{item!r} is not host:count")
        overrides.append((host.strip().strip("[]"), int_range(0)(key, count.strip())))
    return tuple(overrides)


@dataclass(frozen=True)
class ConnectionKeys:
    """Sockets, connection limits and quota sampling."""

    # --- client quotas (producer_byte_rate, consumer_byte_rate, request_percentage under /config/users, /config/clients)
    quota_window_num: int = config_key(
        "quota.window.num", 11, int_range(1), "Number of samples a client's quota rate is measured over."
    )
    quota_window_size_seconds: int = config_key(
        "quota.window.size.seconds", 1, int_range(1), "Length of each quota sample, in seconds."
    )
    # --- network
    socket_request_max_bytes: int = config_key(
        "socket.request.max.bytes",
        104857600,
        int_range(1),
        "Largest request frame accepted; larger frames close the connection.",
    )
    socket_send_buffer_bytes: int = config_key(
        "socket.send.buffer.bytes", 102400, int_range(-1), "SO_SNDBUF of client sockets; -1: the OS default."
    )
    socket_receive_buffer_bytes: int = config_key(
        "socket.receive.buffer.bytes", 102400, int_range(-1), "SO_RCVBUF of client sockets; -1: the OS default."
    )
    connections_max_idle_ms: int = config_key(
        "connections.max.idle.ms",
        600000,
        long_range(),
        "A connection that sent nothing for this long and awaits no response is closed (0: never).",
    )
    max_connections: int = config_key(
        "max.connections",
        INT_MAX,
        int_range(0),
        "Most client connections the broker holds (the inter-broker listener is exempt; "
        "listener.name.L.max.connections limits one listener); one over it is closed at once.",
    )
    max_connections_per_ip: int = config_key(
        "max.connections.per.ip",
        INT_MAX,
        int_range(0),
        "Most connections one address may hold; one over it is closed at once.",
    )
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = config_key(
        "max.connections.per.ip.overrides",
        (),
        parse_per_ip_overrides,
        "Per-address exceptions to max.connections.per.ip: host-or-ip:count, comma-separated.",
    )
    max_connection_creation_rate: int = config_key(
        "max.connection.creation.rate",
        INT_MAX,
        int_range(0),
        "New connections per second the broker accepts (the inter-broker listener is exempt; "
        "listener.name.L.max.connection.creation.rate limits one listener); past it, new connections "
        "are served after the throttle time.",
    )
    num_network_threads: int = config_key(
        "num.network.threads", 3, int_range(1), "Accepted for compatibility, ignored: strom is one asyncio process."
    )
    num_io_threads: int = config_key(
        "num.io.threads", 8, int_range(1), "Accepted for compatibility, ignored: strom is one asyncio process."
    )
    background_threads: int = config_key(
        "background.threads", 10, int_range(1), "Accepted for compatibility, ignored: strom is one asyncio process."
    )
