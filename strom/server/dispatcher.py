"""From a request frame to a response: header, version check, decode, handler, encode.

Handlers are small functions keyed by API in ``strom.server.handlers.HANDLERS``. A handler
returns its response directly, or an awaitable when it has to wait (long-poll Fetch, acks=all),
or None when no response is sent (acks=0). Most requests never wait, so the common path makes
no coroutine at all. Exceptions become error codes here, in one place.

The dispatcher hands each handler the broker whose services it serves with (``ctx.broker``)
without using it itself, so it does not import the broker: the broker is typed ``Any`` here
(``Services``), as handlers take their context untyped.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strom.protocol import api
from strom.protocol.codec import decode_request, encode
from strom.protocol.errors import DecodeError, ErrorCode, KafkaError
from strom.protocol.frame import RequestHeader, parse_request_header, response_header
from strom.storage.segment import FileSlice

log = logging.getLogger("strom.server")

# the broker (strom.server.broker.Broker) whose services the handlers use; only handed on here
Services = Any


class RawResponse:
    """A hand-encoded body: bytes chunks and file slices (sent with sendfile where possible).

    ``revise`` is set on responses that acknowledge appends still in the write-behind buffer:
    if a log dir fails before they are sent, the connection calls it for the response to send
    instead (KAFKA_STORAGE_ERROR where the append may not have reached its file), or None.
    """

    __slots__ = ("chunks", "size", "revise")

    def __init__(self, chunks: list[Any], size: int | None = None):
        self.chunks = chunks
        self.size = size if size is not None else sum(c.length if isinstance(c, FileSlice) else len(c) for c in chunks)
        self.revise: Callable[[], RawResponse | None] | None = None


class Replicating:
    """An acks=all produce whose appends are done and whose answer waits for the in-sync replicas.

    Nothing the connection's later requests do can change what it appended, so the connection
    goes on to them while this one waits (its answer still goes out first): a producer's
    in-flight requests wait for replication together instead of one after another.
    """

    __slots__ = ("_awaitable",)

    def __init__(self, awaitable: Any):
        self._awaitable = awaitable

    def __await__(self) -> Any:
        return self._awaitable.__await__()


class RequestContext:
    """What a handler knows about its request besides the body. Built per request, so kept slotted.

    ``listener`` is the name of the listener the request came in on (Metadata answers with that
    listener's endpoints); ``principal`` is who the connection authenticated as ("User:ANONYMOUS"
    on PLAINTEXT listeners).
    """

    __slots__ = ("broker", "header", "peer", "api_version", "listener", "principal")

    def __init__(
        self,
        broker: Services,
        header: RequestHeader,
        peer: str,
        listener: str = "PLAINTEXT",
        principal: str = "User:ANONYMOUS",
    ):
        self.broker = broker
        self.header = header
        self.peer = peer
        self.api_version = header.api_version
        self.listener = listener
        self.principal = principal


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    handle: Callable[[RequestContext, Any], Any]
    # hot APIs decode by hand: (frame, body offset, version) -> request
    decode: Callable[[Any, int, int], Any] | None = None


class CloseConnection(Exception):
    """The request cannot be answered meaningfully; the connection is closed (Kafka does the same)."""


_INT16 = struct.Struct(">h")


def unsupported_version_body(header: RequestHeader, handlers: dict[int, HandlerSpec]) -> list[bytes]:
    """ApiVersions v0 answer with UNSUPPORTED_VERSION and our ranges, so a client can pick a version."""
    chunks = [_INT16.pack(ErrorCode.UNSUPPORTED_VERSION), struct.pack(">i", len(handlers))]
    for spec in sorted(handlers.values(), key=lambda s: s.api_key):
        chunks.append(struct.pack(">hhh", spec.api_key, spec.min_version, spec.max_version))
    return chunks


class Dispatcher:
    """One per listener; a connection that authenticated gets its own copy carrying its principal."""

    def __init__(
        self,
        broker: Services,
        handlers: dict[int, HandlerSpec],
        listener: str = "PLAINTEXT",
        principal: str = "User:ANONYMOUS",
    ):
        self.broker = broker
        self.handlers = handlers
        self.listener = listener
        self.principal = principal
        self._response_header_versions: dict[tuple[int, int], int] = {}

    def for_principal(self, principal: str) -> Dispatcher:
        copy = Dispatcher(self.broker, self.handlers, self.listener, principal)
        copy._response_header_versions = self._response_header_versions
        return copy

    def handle_frame(self, frame, peer: str) -> tuple[RequestHeader, Any]:
        """Returns (header, result); result is a response, an awaitable of one, or None."""
        header, offset = parse_request_header(frame)
        spec = self.handlers.get(header.api_key)
        if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key == api.ApiKey.API_VERSIONS:
                return header, RawResponse(unsupported_version_body(header, self.handlers))
            log.info(
                "unsupported api_key %d version %d from %s (client %s)",
                header.api_key,
                header.api_version,
                peer,
                header.client_id,
            )
            # No body schema can be trusted here; an error code alone tells the client what happened.
            return header, RawResponse([_INT16.pack(ErrorCode.UNSUPPORTED_VERSION)])
        if spec.decode is not None:
            request = spec.decode(frame, offset, header.api_version)
        else:
            request = decode_request(header.api_key, header.api_version, frame, offset)
        context = RequestContext(self.broker, header, peer, self.listener, self.principal)
        return header, spec.handle(context, request)

    def encode(self, header: RequestHeader, response: Any) -> list[Any]:
        """Size prefix + response header + body chunks (file slices stay slices)."""
        key = (header.api_key, header.api_version)
        header_version = self._response_header_versions.get(key)
        if header_version is None:  # only served (api, version) pairs get here, so the dict is bounded
            header_version = (
                0
                if header.api_key == api.ApiKey.API_VERSIONS
                else api.response_header_version(header.api_key, header.api_version)
            )
            self._response_header_versions[key] = header_version
        if type(response) is RawResponse:
            chunks = response.chunks
            if len(chunks) == 1 and type(chunks[0]) is bytes:  # the common small response: one write
                return [response_header(header.correlation_id, header_version, response.size) + chunks[0]]
            return [response_header(header.correlation_id, header_version, response.size), *chunks]
        body = encode(response)
        return [response_header(header.correlation_id, header_version, len(body)), body]


def error_from_exception(exc: BaseException) -> tuple[int, str]:
    """The Kafka error code and message for an exception raised while serving a partition."""
    if isinstance(exc, KafkaError):
        return int(exc.error_code), str(exc)
    if isinstance(exc, DecodeError):
        return int(ErrorCode.CORRUPT_MESSAGE), str(exc)
    log.exception("unexpected error", exc_info=exc)
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}"
