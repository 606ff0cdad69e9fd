"""Connections on TLS and SASL listeners: the security layer between the socket and the dispatcher.

TLS: asyncio's SSL transport encrypts, and ``sendfile`` would write around it, so Fetch file
slices take Connection's copy path: read with ``pread`` and written through the SSL object. With
``ssl.client.auth`` the client certificate's distinguished name, mapped by
``ssl.principal.mapping.rules``, is the principal; without a certificate it is User:ANONYMOUS.

SASL, as Kafka's SaslServerAuthenticator: until the login completes a ``SaslGate`` stands in for
the dispatcher. It answers ApiVersions, SaslHandshake and SaslAuthenticate (after a v0 handshake,
raw size-prefixed SASL tokens instead, as Kafka does) and closes the connection on any other
request; frames are limited to 512 KiB meanwhile (Kafka's sasl.server.max.receive.size). Once the
login succeeds the connection gets the listener's dispatcher with the principal in it, so later
requests cost what they cost on PLAINTEXT. A failed login is answered SASL_AUTHENTICATION_FAILED,
logged with the peer address and closed 100 ms later (Kafka's connection.failed.authentication.delay.ms).

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` (or its per listener and mechanism
form) SaslAuthenticate v1+ answers the session's lifetime, and the logged-in connection gets a
``SessionDispatcher`` (strom.server.sasl_session): a SaslHandshake on it hands the connection back
to a SaslGate that must log the same principal in with the same mechanism, and any other request
after expiry closes the connection. Without a lifetime sessions last as long as their connection.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import TYPE_CHECKING, Any, Protocol

from strom.protocol.api import ApiKey, response_class_for
from strom.protocol.codec import decode_request
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.protocol.frame import parse_request_header
from strom.security.delegation_tokens import TokenPrincipal
from strom.security.listeners import ListenerSecurity
from strom.security.oauthbearer import OAuthBearerExchange
from strom.security.plain import authenticate_plain
from strom.security.principal import ANONYMOUS, distinguished_name, user
from strom.security.scram import AuthenticationFailed, ScramServerExchange
from strom.server.connection import Connection, ConnectionServices
from strom.server.dispatcher import Dispatcher
from strom.server.sasl_session import SessionDispatcher

if TYPE_CHECKING:
    from strom.security.credentials import CredentialCache
    from strom.security.delegation_tokens import DelegationTokenManager

log = logging.getLogger("strom.security")

SASL_MAX_RECEIVE_BYTES = 524288
FAILED_AUTHENTICATION_DELAY_S = 0.1
RAW_TOKEN = None  # the "header" of a raw SASL token after a v0 handshake: answered without a response header
_SIZE = struct.Struct(">i")
_VERSIONS: dict[int, tuple[int, int]] = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}


class SaslServices(ConnectionServices, Protocol):
    """What a TLS or SASL connection uses of its broker besides a connection's services: the logins'
    credentials (strom.server.broker.Broker is one)."""

    @property
    def credentials(self) -> CredentialCache: ...
    @property
    def delegation_tokens(self) -> DelegationTokenManager | None: ...
    @property
    def sasl_decoy_key(self) -> bytes: ...


class SecureConnection(Connection):
    broker: SaslServices

    def __init__(self, broker: SaslServices, security: ListenerSecurity, dispatcher: Dispatcher):
        super().__init__(broker)
        self.security = security
        self.listener_dispatcher = dispatcher
        self.dispatcher = dispatcher
        self.principal = ANONYMOUS
        self.mechanism: str | None = None  # of the last SASL login
        self.session_expires_at: float | None = None  # monotonic seconds; None: the session never expires

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._closed:  # refused by a connection limit
            return
        if self.security.tls:
            self._socket_fd = -1  # never sendfile: it would bypass TLS and put plaintext on the wire
            if not self.security.sasl:
                self._certificate_principal(transport)
                if self._closed:
                    return
        if self.security.sasl:
            self.decoder.max_frame_bytes = min(self.decoder.max_frame_bytes, SASL_MAX_RECEIVE_BYTES)
            self.dispatcher = SaslGate(self)
        elif self.principal != ANONYMOUS:
            self.dispatcher = self.listener_dispatcher.for_principal(self.principal)

    def _certificate_principal(self, transport: asyncio.BaseTransport) -> None:
        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        if not certificate:  # none asked for (ssl.client.auth=none) or none given (requested)
            return
        dn = distinguished_name(certificate.get("subject", ()))
        try:
            self.principal = self.security.principal_mapper.principal(dn)
        except AuthenticationFailed as exc:
            log.info("Failed authentication with %s (%s)", self.peer, exc)
            self._abort(f"no principal for certificate {dn}")

    # -- called by the SaslGate --------------------------------------------------------------------
    def logged_in(self, principal: str) -> None:
        """The login succeeded: requests may be full size from the next byte on."""
        self.principal = principal
        self.decoder.max_frame_bytes = self.broker.config.socket_request_max_bytes

    def authenticated(self) -> Dispatcher:
        """Hand over from the gate (once the login's last answer has been encoded by it)."""
        dispatcher = self.listener_dispatcher.for_principal(self.principal)
        if self.session_expires_at is not None:
            dispatcher = SessionDispatcher(dispatcher, self, self.session_expires_at)
        self.dispatcher = dispatcher
        return dispatcher

    def reauthenticate(self, frame, peer: str):
        """A SaslHandshake on a logged-in connection (KIP-368): the gate serves it and the login after it."""
        gate = SaslGate(self, reauthenticating=self.principal)
        self.dispatcher = gate
        return gate.handle_frame(frame, peer)

    def refuse(self, reason: str) -> None:
        self._abort(reason)

    def close_soon(self) -> None:
        """Close after what is queued has been written, a little later (slows password guessing)."""
        asyncio.get_running_loop().call_later(FAILED_AUTHENTICATION_DELAY_S, self._close_gracefully)

    def _close_gracefully(self) -> None:
        if not self._closed and self.transport is not None:
            self._closed = True
            self.transport.close()


class SaslGate:
    """The dispatcher of a SASL connection until its login has completed."""

    def __init__(self, connection: SecureConnection, reauthenticating: str | None = None):
        self.connection = connection
        self.reauthenticating = reauthenticating  # the principal the new login must be
        self.security = connection.security
        self.dispatcher = connection.listener_dispatcher
        self.listener = self.dispatcher.listener  # stands in for the listener's Dispatcher on the connection
        self.mechanism: str | None = None
        self.raw = False  # a v0 handshake: tokens come without Kafka headers
        self.principal: str | None = None
        self.failed = False
        self.session_lifetime_ms = 0
        self._exchange: Any = None

    def handle_frame(self, frame, peer: str):
        if self.principal is not None:  # logged in: the listener's dispatcher from here on
            return self.connection.authenticated().handle_frame(frame, peer)
        if self.failed:
            return RAW_TOKEN, None  # closing: nothing more is answered
        if self.raw:
            return RAW_TOKEN, self._raw_token(bytes(frame), peer)
        header, offset = parse_request_header(frame)
        key, version = header.api_key, header.api_version
        if key == ApiKey.API_VERSIONS and self.mechanism is None:
            return self.dispatcher.handle_frame(frame, peer)
        if key in _VERSIONS and not _VERSIONS[key][0] <= version <= _VERSIONS[key][1]:
            return self.dispatcher.handle_frame(frame, peer)  # UNSUPPORTED_VERSION, from the table's ranges
        if key == ApiKey.SASL_HANDSHAKE and self.mechanism is None:
            return header, self._handshake(version, decode_request(key, version, frame, offset), peer)
        if key == ApiKey.SASL_AUTHENTICATE and self.mechanism is not None:
            return header, self._authenticate(version, decode_request(key, version, frame, offset), peer)
        try:
            name = ApiKey(key).name
        except ValueError:
            name = f"api key {key}"
        self.connection.refuse(f"{name} request before SASL authentication completed on listener {self.security.name}")
        return header, None

    def encode(self, header, response: Any) -> list[Any]:
        if header is RAW_TOKEN:
            return [_SIZE.pack(len(response)) + response]
        return self.dispatcher.encode(header, response)

    # -- the exchange ------------------------------------------------------------------------------
    def _handshake(self, version: int, request, peer: str):
        offered = list(self.security.mechanisms)
        cls = response_class_for(ApiKey.SASL_HANDSHAKE, version)
        if request.mechanism not in offered:
            self._fail(peer, f"Unsupported SASL mechanism {request.mechanism}")
            return build(cls, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": offered})
        if self.reauthenticating is not None and (version == 0 or request.mechanism != self.connection.mechanism):
            self._fail(
                peer,
                f"re-authentication must use SaslHandshake v1+ and the session's mechanism "
                f"{self.connection.mechanism}, not v{version} with {request.mechanism}",
            )
            return build(cls, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": offered})
        self.mechanism = request.mechanism
        self.raw = version == 0
        if self.mechanism == "OAUTHBEARER":
            assert self.security.oauthbearer is not None  # listener_security builds one wherever it is offered
            self._exchange = OAuthBearerExchange(self.security.oauthbearer)
        elif self.mechanism != "PLAIN":
            broker, mechanism = self.connection.broker, self.mechanism
            tokens = broker.delegation_tokens
            self._exchange = ScramServerExchange(
                mechanism,
                lambda name: broker.credentials.lookup(name, mechanism),
                broker.sasl_decoy_key,
                token_login=(lambda token_id: tokens.login(token_id, mechanism)) if tokens is not None else None,
            )
        return build(cls, {"error_code": ErrorCode.NONE, "mechanisms": offered})

    def _step(self, token: bytes) -> bytes:
        """The server's answer to ``token``; sets ``principal`` when the login is complete."""
        if self._exchange is None:
            username = authenticate_plain(token, self.security.plain_users)
            reply, done = b"", True
        else:
            reply, done = self._exchange.step(token)
            username = self._exchange.username
        if done:
            owner = getattr(self._exchange, "token_owner", None)  # a SCRAM delegation-token login
            # a token login acts as the token's owner (Kafka: the owner's name as a User principal)
            principal = user(username) if owner is None else TokenPrincipal(user(owner.partition(":")[2]), username)
            if self.reauthenticating is not None and principal != self.reauthenticating:
                raise AuthenticationFailed(
                    f"Cannot change principals during re-authentication from {self.reauthenticating}: {principal}"
                )
            lifetime_ms = self.security.max_reauth_ms.get(self.mechanism or "", 0)
            token_expires_ms = getattr(self._exchange, "credential_expires_ms", None)
            if token_expires_ms is not None:  # OAUTHBEARER: the session ends with its token (KIP-368), >= 1 ms
                remaining_ms = max(1, token_expires_ms - int(time.time() * 1000))
                lifetime_ms = min(lifetime_ms, remaining_ms) if lifetime_ms else remaining_ms
            self.session_lifetime_ms = lifetime_ms
            self.connection.mechanism = self.mechanism
            self.connection.session_expires_at = time.monotonic() + lifetime_ms / 1000 if lifetime_ms else None
            self.principal = principal
            self.connection.logged_in(self.principal)
            log.debug(
                "%s authenticated as %s with %s on listener %s",
                self.connection.peer,
                self.principal,
                self.mechanism,
                self.security.name,
            )
        return reply

    def _authenticate(self, version: int, request, peer: str):
        cls = response_class_for(ApiKey.SASL_AUTHENTICATE, version)
        try:
            reply = self._step(bytes(request.auth_bytes))
        except AuthenticationFailed as exc:
            self._fail(peer, str(exc))
            return build(
                cls, {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(exc), "auth_bytes": b""}
            )
        return build(
            cls,
            {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "auth_bytes": reply,
                "session_lifetime": self.session_lifetime_ms if self.principal is not None else 0,
            },
        )

    def _raw_token(self, token: bytes, peer: str) -> bytes | None:
        try:
            return self._step(token)
        except AuthenticationFailed as exc:
            self._fail(peer, str(exc))
            return None

    def _fail(self, peer: str, reason: str) -> None:
        log.info("Failed authentication with %s (%s) on listener %s", peer, reason, self.security.name)
        self.failed = True
        self.connection.close_soon()
