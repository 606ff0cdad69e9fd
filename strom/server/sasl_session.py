"""SASL sessions with a lifetime (KIP-368, ``connections.max.reauth.ms``).

A client that logged in on a listener whose mechanism has a session lifetime gets this dispatcher
instead of the listener's own. It differs in two ways, as Kafka's SocketServer does:

- a SaslHandshake starts a re-authentication on the live connection: the connection's SaslGate
  takes over again until SaslAuthenticate completes, and the new login must be the same
  principal with the same mechanism (otherwise the connection is closed);
- any other request after the session has expired closes the connection instead of being served.

Connections on listeners without a lifetime never see this class, so they pay nothing for it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from strom.protocol.api import ApiKey
from strom.protocol.frame import parse_request_header
from strom.server.dispatcher import Dispatcher

if TYPE_CHECKING:
    from strom.protocol.frame import RequestHeader


class SessionConnection(Protocol):
    """What a session asks of its connection (strom.server.secure_connection.SecureConnection)."""

    def reauthenticate(self, frame: Any, peer: str) -> Any: ...
    def refuse(self, reason: str) -> None: ...


class SessionDispatcher(Dispatcher):
    def __init__(self, inner: Dispatcher, connection: SessionConnection, expires_at: float):
        super().__init__(inner.broker, inner.handlers, inner.listener, inner.principal)
        self._response_header_versions = inner._response_header_versions
        self.connection = connection
        self.expires_at = expires_at  # time.monotonic() seconds

    def handle_frame(self, frame, peer: str) -> tuple[RequestHeader, Any]:
        if len(frame) >= 2 and (frame[0] << 8 | frame[1]) == ApiKey.SASL_HANDSHAKE:
            return self.connection.reauthenticate(frame, peer)
        if time.monotonic() >= self.expires_at:
            header, _ = parse_request_header(frame)
            self.connection.refuse(
                f"SASL session of {self.principal} expired without re-authentication on listener {self.listener}"
            )
            return header, None
        return super().handle_frame(frame, peer)
