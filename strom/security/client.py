"""The client side of a secured connection, for brokers talking to brokers (replication, markers).

TLS is the SSL context given to ``asyncio.open_connection``; SASL is Kafka's exchange right after
connecting: SaslHandshake v1 naming the mechanism, then SaslAuthenticate rounds until the server
has accepted the login (and, for SCRAM, proved that it knows the credential too).
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.security.scram import AuthenticationFailed, ScramClientExchange

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2

# (api_key, version, values) -> decoded response
Send = Callable[[int, int, dict[str, Any]], Awaitable[Any]]


@dataclass
class ClientSecurity:
    """Shared by every client a broker makes towards the others; ``take`` replaces it in place when
    the dynamic broker configs change it, so each holder's next connection uses the new one."""

    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    def take(self, other: ClientSecurity) -> None:
        for name in ("ssl_context", "mechanism", "username", "password"):
            setattr(self, name, getattr(other, name))

    def __repr__(self) -> str:  # never the password, not even in a traceback
        return f"ClientSecurity(tls={self.ssl_context is not None}, mechanism={self.mechanism}, user={self.username})"

    async def login(self, send: Send) -> None:
        """Authenticate a fresh connection; AuthenticationFailed with the server's reason."""
        if self.mechanism is None:
            return
        response = await send(ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, {"mechanism": self.mechanism})
        if response.error_code != ErrorCode.NONE:
            raise AuthenticationFailed(
                f"SaslHandshake for {self.mechanism} failed with error "
                f"{int(response.error_code)}; the server offers {list(response.mechanisms)}"
            )
        if self.mechanism == "PLAIN":
            token: bytes | None = b"\0" + self.username.encode() + b"\0" + self.password.encode()
            exchange = None
        else:
            exchange = ScramClientExchange(self.mechanism, self.username, self.password)
            token = exchange.first()
        while token is not None:
            response = await send(ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION, {"auth_bytes": token})
            if response.error_code != ErrorCode.NONE:
                raise AuthenticationFailed(
                    f"{self.mechanism} login as {self.username} refused: "
                    f"{response.error_message or int(response.error_code)}"
                )
            token = exchange.respond(bytes(response.auth_bytes)) if exchange is not None else None
