"""The broker's listeners built from their collaborators alone, no broker: real sockets on 127.0.0.1
port 0, real TLS contexts from certificates made at test time, and connections that echo what they
are sent (the broker's connection is one more protocol made by ``connect``)."""

from __future__ import annotations

import asyncio
import socket
import ssl

import pytest

from strom.security.listeners import listener_security
from strom.server.config import BrokerConfig
from strom.server.listener_servers import ListenerServers
from strom.startup import StartupError
from tests.tls_certs import make_certificates

WAIT_S = 10


class Echo(asyncio.Protocol):
    """A connection: answers what it is sent, and knows its listener and the security it was given."""

    def __init__(self, listener: str, security, open_connections: set):
        self.listener, self.security, self._open = listener, security, open_connections
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._open.add(self)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def connection_lost(self, exc) -> None:
        self._open.discard(self)


class Parts:
    """ListenerServers and what it was given: the open connections, the background work, what it published."""

    def __init__(self, config: BrokerConfig):
        self.connections: set[Echo] = set()
        self.accepted: list[Echo] = []
        self.background: list = []
        self.published: list = []
        self.stop = asyncio.Event()

        def connect(security, dispatcher) -> Echo:
            connection = Echo(dispatcher, security, self.connections)  # the dispatcher here: its listener's name
            self.accepted.append(connection)
            return connection

        self.servers = ListenerServers(
            config.listeners,
            lambda name: name,
            connect,
            self.connections,
            self.background.append,
            self.stop,
            lambda endpoints, protocols: self.published.append((endpoints, protocols)),
        )


async def serving(config: BrokerConfig) -> Parts:
    """Parts whose listeners serve, made in the broker's startup order."""
    parts = Parts(config)
    parts.servers.secure(config)
    parts.servers.bind(config)
    await parts.servers.serve()
    return parts


async def echoed(port: int, payload: bytes, tls: ssl.SSLContext | None = None) -> bytes:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1" if tls else None), WAIT_S
    )
    writer.write(payload)
    try:
        return await asyncio.wait_for(reader.readexactly(len(payload)), WAIT_S)
    finally:
        writer.close()


def tls_config(tmp_path, **more: str) -> tuple[BrokerConfig, ssl.SSLContext]:
    certs = make_certificates(tmp_path / "certs")
    config = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
            "ssl.keystore.location": str(certs.broker),
            **more,
        }
    )
    return config, ssl.create_default_context(cafile=str(certs.ca))


def test_plain_and_tls_listeners_serve_their_connections_on_the_ports_bound(tmp_path):
    config, client_tls = tls_config(tmp_path)

    async def scenario() -> None:
        parts = Parts(config)
        servers = parts.servers
        assert servers.dispatchers == {"PLAINTEXT": "PLAINTEXT", "SECURE": "SECURE"}
        servers.secure(config)
        assert servers.security["SECURE"].ssl_context is not None and servers.security["PLAINTEXT"].ssl_context is None
        servers.bind(config)
        ports = {name: port for name, (_, port) in servers.bound.items()}
        assert set(ports) == {"PLAINTEXT", "SECURE"} and all(port > 0 for port in ports.values())
        # advertised.listeners defaults to the listeners: published with the ports bound
        assert servers.endpoints(config) == [
            ("PLAINTEXT", "127.0.0.1", ports["PLAINTEXT"]),
            ("SECURE", "127.0.0.1", ports["SECURE"]),
        ]
        await servers.serve()
        try:
            assert await echoed(ports["PLAINTEXT"], b"plain") == b"plain"
            assert await echoed(ports["SECURE"], b"secret", client_tls) == b"secret"
            with pytest.raises(ssl.SSLError):  # the TLS listener speaks nothing else
                await echoed(ports["SECURE"], b"x", ssl.create_default_context())
            assert [(c.listener, c.security.protocol) for c in parts.accepted[:2]] == [
                ("PLAINTEXT", "PLAINTEXT"),
                ("SECURE", "SSL"),
            ]
        finally:
            servers.close()
        with pytest.raises(OSError):  # closed: accepts nothing more
            await echoed(ports["PLAINTEXT"], b"late")

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_port_in_use_stops_startup_naming_listeners_and_frees_the_others(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    with socket.socket() as probe:  # a free port for the first listener, bound by it and released again
        probe.bind(("127.0.0.1", 0))
        first = probe.getsockname()[1]
    config = BrokerConfig.from_mapping(
        {
            "listeners": f"FIRST://127.0.0.1:{first},SECOND://127.0.0.1:{port}",
            "listener.security.protocol.map": "FIRST:PLAINTEXT,SECOND:PLAINTEXT",
        }
    )
    try:
        servers = Parts(config).servers
        with pytest.raises(StartupError) as refused:
            servers.bind(config)
        assert refused.value.key == "listeners" and str(port) in str(refused.value)
        with socket.socket() as again:  # the first listener's socket was closed
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", first))
    finally:
        taken.close()


def test_listeners_added_and_removed_at_run_time_are_served_closed_and_published(tmp_path):
    old = BrokerConfig.from_mapping({"listeners": "PLAINTEXT://127.0.0.1:0"})
    new = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
        }
    )

    async def scenario() -> None:
        parts = await serving(old)
        servers = parts.servers
        plain = servers.bound["PLAINTEXT"][1]
        try:
            await servers.change(old, new)
            extra = servers.bound["EXTRA"][1]
            assert servers.dispatchers["EXTRA"] == "EXTRA" and servers.security["EXTRA"].protocol == "PLAINTEXT"
            assert await echoed(extra, b"through extra") == b"through extra"
            assert parts.published == [
                (
                    (("PLAINTEXT", "127.0.0.1", plain), ("EXTRA", "127.0.0.1", extra)),
                    (("PLAINTEXT", "PLAINTEXT"), ("EXTRA", "PLAINTEXT")),
                )
            ]

            reader, writer = await asyncio.open_connection("127.0.0.1", extra)
            writer.write(b"held")
            assert await asyncio.wait_for(reader.readexactly(4), WAIT_S) == b"held"
            await servers.change(new, old)
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # its connection was closed
            writer.close()
            with pytest.raises(OSError):
                await echoed(extra, b"late")
            assert "EXTRA" not in servers.bound
            assert parts.published[-1] == ((("PLAINTEXT", "127.0.0.1", plain),), (("PLAINTEXT", "PLAINTEXT"),))
            assert await echoed(plain, b"still") == b"still"  # the listener that stays serves on
        finally:
            servers.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_tls_listeners_new_settings_serve_new_connections(tmp_path):
    """Certificate rotation: the security replaced in ``security`` is the one a new connection gets,
    and its context is the one its handshake uses, though the server started with the first."""
    config, client_tls = tls_config(tmp_path)
    renewed, renewed_tls = tls_config(tmp_path / "renewed")

    async def scenario() -> None:
        parts = await serving(config)
        servers = parts.servers
        port = servers.bound["SECURE"][1]
        try:
            assert await echoed(port, b"first", client_tls) == b"first"
            servers.security["SECURE"] = listener_security(renewed, "SECURE")
            with pytest.raises(ssl.SSLError):  # the certificate served now is the renewed one's
                await echoed(port, b"x", client_tls)
            assert await echoed(port, b"second", renewed_tls) == b"second"
            assert parts.accepted[-1].security is servers.security["SECURE"]
        finally:
            servers.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
