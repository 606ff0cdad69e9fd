"""Adding and removing listeners at run time (KIP-226's DynamicListenerConfig).

``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map`` are per-broker
dynamic configs. As in Kafka, listeners are matched by name: a name that is new is bound and
served, a name that is gone stops accepting and its open connections are closed, and the broker's
registration (/brokers/ids/<id>) is written again when its advertised endpoints change, so clients
and the other brokers learn them from their next metadata. A listener that keeps its name keeps
its socket: a new host or port for it takes effect when the broker next starts, as in Kafka.

Kafka's checks on such a change, made before it is accepted (``check``): a listener that stays
keeps its security protocol, and the inter-broker listener stays (BrokerConfig checks that it is
advertised, and that every listener has a protocol).
"""

from __future__ import annotations

import socket

from strom.server.config import BrokerConfig
from strom.server.config_listeners import Listener
from strom.storage.log_config import ConfigError

# accept queue: a burst of clients connecting at once (thousands after a restart) must not
# overflow it, or the kernel drops their handshakes (a retry a second later) or resets them
LISTEN_BACKLOG = 512


def check(old: BrokerConfig, new: BrokerConfig) -> None:
    """Kafka's DynamicListenerConfig.validateReconfiguration; ConfigError names the key."""
    kept = {listener.name for listener in old.listeners} & {listener.name for listener in new.listeners}
    for name in sorted(kept):
        if old.protocol_of(name) != new.protocol_of(name):
            raise ConfigError(
                "listener.security.protocol.map", f"Security protocol cannot be updated for existing listener {name}"
            )


def differ(old: BrokerConfig, new: BrokerConfig) -> bool:
    """Whether ``new`` adds or removes a listener or advertises them otherwise: the listeners change."""
    names = lambda config: [listener.name for listener in config.listeners]  # noqa: E731
    return names(old) != names(new) or old.advertised_listeners != new.advertised_listeners


def added(old: BrokerConfig, new: BrokerConfig) -> list[Listener]:
    names = {listener.name for listener in old.listeners}
    return [listener for listener in new.listeners if listener.name not in names]


def removed(old: BrokerConfig, new: BrokerConfig) -> list[str]:
    names = {listener.name for listener in new.listeners}
    return [listener.name for listener in old.listeners if listener.name not in names]


def bind(listener: Listener) -> socket.socket:
    """A listening, non-blocking socket for ``listener`` (port 0: a free one); OSError when it cannot be bound."""
    sock = socket.socket(socket.AF_INET6 if ":" in listener.host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listener.host or "0.0.0.0", listener.port))
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def endpoints(config: BrokerConfig, bound: dict[str, tuple[str, int]]) -> list[tuple[str, str, int]]:
    """(listener, host, port) as published: advertised.listeners, with the bound ports where they say 0."""
    found = []
    for advertised in config.advertised_listeners:
        if advertised.name not in bound:
            continue  # a listener that could not be bound is not published
        bound_host, bound_port = bound[advertised.name]
        found.append(
            (advertised.name, advertised.host or bound_host or socket.gethostname(), advertised.port or bound_port)
        )
    return found
