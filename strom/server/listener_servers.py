"""The broker's listeners as served sockets: their TLS and SASL settings, their bound ports, the
server accepting each one's connections, and listeners added and removed at run time (KIP-226).

Startup makes them in three steps, each of which can refuse it naming the key: ``secure`` builds
every listener's ``ListenerSecurity`` (a certificate that does not load stops here), ``bind`` binds
every socket (a port in use stops here, before anything is written), and ``serve`` accepts
connections on them once the broker has read the cluster metadata. A listener's connection takes
its listener's dispatcher and, on a TLS or SASL listener, the listener's security as it is when the
connection is accepted: dynamic configs replace it in ``security`` (strom.server.reconfiguration),
and the SSLContext a server started with hands each handshake to the current one
(``reconfiguration.serve_current_context``). ``change`` binds and serves the listeners a dynamic
config adds, closes those it removes with their connections, then publishes the endpoints
(strom.server.dynamic_listeners says which changes are allowed).

The broker gives this class what it cannot know: how to make a listener's dispatcher, how to make
a connection, the set of open connections, where to run background work and how to publish new
endpoints.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Protocol

from strom.security.listeners import ListenerSecurity, listener_security
from strom.server import dynamic_listeners, reconfiguration
from strom.server.config import BrokerConfig
from strom.server.config_listeners import Listener
from strom.server.dynamic_listeners import LISTEN_BACKLOG
from strom.startup import bind_failure

log = logging.getLogger("strom.broker")


class OpenConnection(Protocol):
    """What closing a removed listener's connections needs of each (strom.server.connection.Connection)."""

    @property
    def listener(self) -> str: ...
    @property
    def transport(self) -> asyncio.BaseTransport | None: ...


Endpoints = tuple[tuple[str, str, int], ...]  # (listener, host, port) as published
Protocols = tuple[tuple[str, str], ...]  # (listener, security protocol)


class ListenerServers:
    def __init__(
        self,
        listeners: Iterable[Listener],
        dispatcher_for: Callable[[str], Any],
        connect: Callable[[ListenerSecurity, Any], asyncio.Protocol],
        connections: Iterable[OpenConnection],
        in_background: Callable[[Coroutine[Any, Any, Any]], None],
        stop: asyncio.Event,
        publish: Callable[[Endpoints, Protocols], None],
    ):
        """``listeners``: those of server.properties, which get their dispatchers now (a request
        is dispatched per listener). ``dispatcher_for(name)``: a new listener's dispatcher.
        ``connect(security, dispatcher)``: a connection accepted on a listener. ``connections``:
        the open ones (a removed listener's are closed). ``in_background``: runs an OAUTHBEARER
        validator's JWKS refresher until ``stop``. ``publish(endpoints, protocols)``: the endpoints
        after a change at run time (the broker's registration)."""
        self._dispatcher_for = dispatcher_for
        self._connect = connect
        self._connections = connections
        self._in_background = in_background
        self._stop = stop
        self._publish = publish
        self.dispatchers = {listener.name: dispatcher_for(listener.name) for listener in listeners}
        # listener name -> its current TLS/SASL settings: replaced in place by dynamic configs
        self.security: dict[str, ListenerSecurity] = {}
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> bound (host, port)
        self._sockets: dict[str, socket.socket] = {}  # bound, not served yet
        self._servers: dict[str, asyncio.AbstractServer] = {}  # listener name -> its server

    def secure(self, config: BrokerConfig) -> None:
        """Every listener's TLS and SASL settings (ConfigError names a key whose file does not
        load); OAUTHBEARER's JWKS is fetched off the event loop from now on."""
        self.security.clear()
        self.security.update({listener.name: listener_security(config, listener.name) for listener in config.listeners})
        self.start_key_refreshers(self.security.values())

    def start_key_refreshers(self, securities: Iterable[ListenerSecurity], serving: Iterable[ListenerSecurity] = ()):
        """Run the JWKS refresher of each OAUTHBEARER validator in ``securities`` not in ``serving``
        (a validator kept from the listener's previous settings refreshes already)."""
        running = [s.oauthbearer for s in serving]
        for security in securities:
            validator = security.oauthbearer
            if validator is not None and validator.keys is not None and not any(v is validator for v in running):
                self._in_background(validator.keys.run(self._stop))

    def bind(self, config: BrokerConfig) -> None:
        """Bind every listener's socket; a port in use or an address not of this host is a
        StartupError naming ``listeners`` (the sockets bound before it are closed)."""
        try:
            for listener in config.listeners:
                try:
                    sock = self._sockets[listener.name] = dynamic_listeners.bind(listener)
                except OSError as exc:  # one line naming the key
                    raise bind_failure("listeners", listener.host, listener.port, exc) from exc
                self.bound[listener.name] = (listener.host, sock.getsockname()[1])
        except BaseException:
            self._close_sockets()
            raise

    def endpoints(self, config: BrokerConfig) -> list[tuple[str, str, int]]:
        """advertised.listeners with the bound ports filled in (a listener not bound is left out)."""
        return dynamic_listeners.endpoints(config, self.bound)

    async def serve(self) -> None:
        """Accept connections on every bound listener."""
        sockets, self._sockets = self._sockets, {}
        for name, sock in sockets.items():
            await self._serve(name, sock)

    async def _serve(self, name: str, sock: socket.socket) -> None:
        # the context served now hands each handshake to the listener's current one (dynamic configs)
        reconfiguration.serve_current_context(self.security, name)
        security = self.security[name]
        self._servers[name] = await asyncio.get_running_loop().create_server(
            # listens again: without backlog= asyncio and uvloop would shrink the queue to 100
            self._factory(name),
            sock=sock,
            ssl=security.ssl_context,
            backlog=LISTEN_BACKLOG,
        )

    def _factory(self, name: str) -> Callable[[], asyncio.Protocol]:
        dispatcher, security = self.dispatchers[name], self.security[name]
        if security.protocol != "PLAINTEXT":  # the listener's current security: dynamic configs may replace it
            return lambda: self._connect(self.security[name], dispatcher)
        return lambda: self._connect(security, dispatcher)

    async def change(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Listeners added and removed at run time, then the endpoints published again."""
        for name in dynamic_listeners.removed(old, new):
            server = self._servers.pop(name, None)
            if server is not None:
                server.close()
            for connection in [c for c in self._connections if c.listener == name]:
                if connection.transport is not None:
                    connection.transport.close()
            self.bound.pop(name, None)
            log.info("listener %s removed: it accepts no connections, and those it had are closed", name)
        for listener in dynamic_listeners.added(old, new):
            try:
                sock = dynamic_listeners.bind(listener)
            except OSError as exc:
                log.error("listener %s could not be added: %s", listener, exc)
                continue
            self.bound[listener.name] = (listener.host, sock.getsockname()[1])
            self.dispatchers[listener.name] = self._dispatcher_for(listener.name)
            self.security[listener.name] = listener_security(new, listener.name)
            await self._serve(listener.name, sock)
            log.info("listener %s added on port %d", listener, self.bound[listener.name][1])
        published = tuple(self.endpoints(new))
        self._publish(published, tuple((name, new.protocol_of(name)) for name, _, _ in published))

    def close(self) -> None:
        """Stop accepting: every server closes, and a socket bound but never served is released."""
        for server in self._servers.values():
            server.close()
        self._close_sockets()

    def _close_sockets(self) -> None:
        sockets, self._sockets = self._sockets, {}
        for sock in sockets.values():
            sock.close()
