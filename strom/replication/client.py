"""An inter-broker Kafka client connection: one request at a time, encoded and decoded with kio.

Followers use it to fetch from leaders (Fetch, OffsetForLeaderEpoch, ListOffsets). Responses
are bounded in size before anything is read, and every wait has a timeout. With ``security``
(the inter-broker listener's TLS and SASL settings) every new connection is encrypted and logs
in before its first request.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from strom.protocol import api
from strom.protocol.codec import decode_response, encode
from strom.protocol.entities import build
from strom.protocol.errors import DecodeError
from strom.protocol.frame import request_frame, response_body_offset
from strom.security.client import ClientSecurity
from strom.security.scram import AuthenticationFailed

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class BrokerConnectionError(Exception):
    pass


class BrokerClient:
    def __init__(
        self, host: str, port: int, client_id: str, timeout_s: float = 30.0, security: ClientSecurity | None = None
    ):
        self.host = host
        self.port = port
        self.security = security
        self.client_id = client_id.encode()
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        context = self.security.ssl_context if self.security is not None else None
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host, self.port, ssl=context, server_hostname=self.host if context is not None else None
                ),
                self.timeout_s,
            )
        except (TimeoutError, OSError) as exc:
            raise BrokerConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        if self.security is not None:
            try:
                await self.security.login(self._exchange)
            except AuthenticationFailed as exc:
                self.close()
                raise BrokerConnectionError(f"cannot log in to {self.host}:{self.port}: {exc}") from None

    async def request(self, api_key: int, version: int, values: dict[str, Any], timeout_s: float | None = None) -> Any:
        """Send one request built from ``values`` and return the decoded response."""
        if not self.connected:
            await self.connect()
        return await self._exchange(api_key, version, values, timeout_s)

    async def request_encoded(
        self,
        api_key: int,
        version: int,
        body: bytes,
        decode: Callable[[memoryview, int], Any],
        timeout_s: float | None = None,
    ) -> Any:
        """As ``request``, with a body the caller encoded and a decoder of the response body
        (the follower's hot Fetch)."""
        if not self.connected:
            await self.connect()
        return await self._send(api_key, version, body, timeout_s, decode)

    async def _exchange(
        self, api_key: int, version: int, values: dict[str, Any], timeout_s: float | None = None
    ) -> Any:
        cls = api.request_class(api_key, version)
        assert cls is not None, f"kio has no request schema for api {api_key} v{version}"  # callers fix versions
        return await self._send(api_key, version, encode(build(cls, values)), timeout_s)

    async def _send(
        self,
        api_key: int,
        version: int,
        body: bytes,
        timeout_s: float | None,
        decode: Callable[[memoryview, int], Any] | None = None,
    ) -> Any:
        if self._writer is None or self._reader is None:  # set and cleared together
            raise BrokerConnectionError(f"connection to {self.host}:{self.port} is closed")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        try:
            self._writer.write(request_frame(api_key, version, self._correlation, self.client_id, body))
            await self._writer.drain()
            # one deadline for the whole response, without a task per read (asyncio.wait_for's)
            async with asyncio.timeout(timeout_s or self.timeout_s):
                raw = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(raw)
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise BrokerConnectionError(f"response of {size} bytes from {self.host}:{self.port}")
                data = await self._reader.readexactly(size)
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            self.close()
            raise BrokerConnectionError(f"request to {self.host}:{self.port} failed: {exc!r}") from None
        try:
            offset = response_body_offset(api_key, version, data, self._correlation)
        except DecodeError as exc:
            self.close()
            raise BrokerConnectionError(f"from {self.host}:{self.port}: {exc}") from None
        if decode is not None:
            try:
                return decode(memoryview(data), offset)
            except DecodeError as exc:
                self.close()
                raise BrokerConnectionError(f"from {self.host}:{self.port}: {exc}") from None
        return decode_response(api_key, version, memoryview(data), offset)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self._reader = None
