"""The broker's identity, listeners and metadata store keys: ``broker.id``, ``listeners``,
``advertised.listeners``, ``listener.security.protocol.map``, the inter-broker listener and
``zookeeper.*``, with the Listener they parse to.

A listener's TLS and SASL keys are in ``config_security``; its connection limits in
``config_connections``. Keys Kafka derives from others here (``advertised.listeners`` from
``listeners``, the inter-broker listener, ``zookeeper.connection.timeout.ms``) are resolved by
BrokerConfig (``strom.server.config``) once every key is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from strom.server.config_keys import config_key, csv_list, int_range, optional_text, upper_text
from strom.storage.log_config import ConfigError, parse_choice

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class Listener(NamedTuple):
    name: str
    host: str  # "" binds every interface, as in Kafka
    port: int  # 0 picks a free port (tests)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def parse_listeners(key: str, raw: str) -> tuple[Listener, ...]:
    listeners: list[Listener] = []
    for item in csv_list(key, raw):
        match = _LISTENER.match(item)
        if not match:
            raise ConfigError(key, f"{item!r} is not NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise ConfigError(key, f"port {port} in {item!r} is above 65535")
        if any(other.name == name for other in listeners):
            raise ConfigError(key, f"listener name {name} appears twice")
        listeners.append(Listener(name, host, port))
    return tuple(listeners)


def parse_protocol_map(key: str, raw: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in csv_list(key, raw):
        name, sep, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not sep or not name.strip() or protocol not in SECURITY_PROTOCOLS:
            choices = ", ".join(SECURITY_PROTOCOLS)
            raise ConfigError(key, f"{item!r} is not NAME:PROTOCOL with PROTOCOL one of {choices}")
        pairs.append((name.strip().upper(), protocol))
    return tuple(pairs)


def parse_protocol(key: str, raw: str) -> str:
    return parse_choice(key, str(raw).strip().upper(), SECURITY_PROTOCOLS)


DEFAULT_LISTENERS = (Listener("PLAINTEXT", "127.0.0.1", 9092),)
DEFAULT_PROTOCOL_MAP = tuple((protocol, protocol) for protocol in SECURITY_PROTOCOLS)


@dataclass(frozen=True)
class ListenerKeys:
    """Who this broker is, where it listens and which metadata store it joins."""

    broker_id: int = config_key("broker.id", 0, int_range(0), "Id of this broker, unique in the cluster (>= 0).")
    broker_rack: str | None = config_key(
        "broker.rack", None, optional_text, "Rack of this broker, used for rack-aware replica placement."
    )
    listeners: tuple[Listener, ...] = config_key(
        "listeners",
        DEFAULT_LISTENERS,
        parse_listeners,
        "Comma list of NAME://host:port to listen on; empty host binds every interface, port 0 picks a free port.",
    )
    advertised_listeners: tuple[Listener, ...] = config_key(
        "advertised.listeners",
        None,
        parse_listeners,
        "Listeners published to clients and other brokers; null: same as listeners.",
    )
    listener_security_protocol_map: tuple[tuple[str, str], ...] = config_key(
        "listener.security.protocol.map",
        DEFAULT_PROTOCOL_MAP,
        parse_protocol_map,
        "NAME:PROTOCOL for each listener name (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL).",
    )
    inter_broker_listener_name: str = config_key(
        "inter.broker.listener.name",
        None,
        upper_text,
        "Listener brokers use to reach each other; null: security.inter.broker.protocol's listener if set, else PLAINTEXT if advertised, else the first one.",
    )
    security_inter_broker_protocol: str | None = config_key(
        "security.inter.broker.protocol",
        None,
        parse_protocol,
        "Protocol brokers use to reach each other: the listener of that name (set this or inter.broker.listener.name, not both).",
    )
    zookeeper_connect: str | None = config_key(
        "zookeeper.connect",
        None,
        optional_text,
        "ZooKeeper connect string host:port[,host:port][/chroot]; null: the embedded single-node metadata store.",
    )
    zookeeper_session_timeout_ms: int = config_key(
        "zookeeper.session.timeout.ms",
        18000,
        int_range(1),
        "ZooKeeper session timeout; a broker silent this long loses its registration.",
    )
    zookeeper_connection_timeout_ms: int = config_key(
        "zookeeper.connection.timeout.ms",
        None,
        int_range(1),
        "Time a starting broker waits for ZooKeeper: for its session, and for each startup step while "
        "ZooKeeper drops its connection; null: zookeeper.session.timeout.ms.",
    )

    def advertised_listener(self, name: str) -> Listener | None:
        return next((listener for listener in self.advertised_listeners if listener.name == name), None)

    def protocol_of(self, listener_name: str) -> str:
        """The security protocol of a listener (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)."""
        return dict(self.listener_security_protocol_map)[listener_name]
