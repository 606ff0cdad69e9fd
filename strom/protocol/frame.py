"""Size-prefixed frames and the request/response headers inside them.

Frame: >i size, then `size` bytes. Request header: >h api_key, >h api_version,
>i correlation_id, then from v1 a nullable int16-length client_id (never the
compact form, even in v2, so that any broker can read who sent a request it
does not understand), then in v2 tagged fields. Response header: >i
correlation_id, then in v1 tagged fields (always empty here).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import NamedTuple

from .api import request_class, request_header_version, response_header_version
from .codec import skip_tagged_fields
from .errors import DecodeError

_SIZE = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")
_HEADER_WITH_CLIENT_ID_LENGTH = struct.Struct(">hhih")
_INT16 = struct.Struct(">h")
_RESPONSE_V0 = struct.Struct(">ii")

Buffer = bytes | bytearray | memoryview


class FrameError(ValueError):
    """The byte stream cannot be split into frames; the connection must be closed."""


_NO_FRAME = memoryview(b"")


class FrameDecoder:
    """Splits a byte stream into frames without trusting the size prefixes.

    A size is checked the moment its four bytes arrive, before any buffer for
    the body exists, so a hostile prefix costs nothing. Frames lying wholly
    inside a `bytes` chunk are returned as memoryview slices of it (no copy);
    a frame spread over chunks is gathered into a bytearray that grows with the
    bytes received (an announced size reserves nothing), which is then handed
    over and never touched again. Either way the
    returned buffer is immutable from here on, so slices of it (Produce
    records) stay valid for as long as someone holds them.

    Memory held between calls is the received part of one frame (at most
    max_frame_bytes) plus the complete frames not yet taken with `next_frame`.
    After a FrameError the decoder is dead: every later call raises it again.
    """

    __slots__ = ("max_frame_bytes", "_frames", "_taken", "_head", "_body", "_expected", "_error")

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < 0:
            raise ValueError(f"max_frame_bytes must be >= 0, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        # A list, emptied once every frame in it is taken: an idle connection's decoder then holds
        # an empty list (56 bytes) where a deque keeps a 512-byte block (a third of what a
        # connection costs the broker; measured with strom.bench.connections).
        self._frames: list[memoryview] = []
        self._taken = 0  # frames before this index have been handed out
        self._head = bytearray()  # a size prefix split across chunks (< 4 bytes)
        self._body: bytearray | None = None  # the frame being filled
        self._expected = 0  # the full size of the frame being filled
        self._error: FrameError | None = None

    def feed(self, chunk: Buffer) -> None:
        """Add bytes from the stream; raises FrameError on a bad size prefix."""
        if self._error is not None:
            raise self._error
        view = chunk if isinstance(chunk, memoryview) and chunk.format == "B" else memoryview(chunk).cast("B")
        # Only an immutable chunk may be sliced into frames: a bytearray could be reused by the caller.
        zero_copy = isinstance(view.obj, bytes)
        pos, end = 0, len(view)
        while pos < end:
            body = self._body
            if body is not None:  # continue a frame started in an earlier chunk
                # The buffer grows with the bytes that actually arrive: a size prefix alone
                # (announced, never sent) must not reserve its memory.
                take = min(self._expected - len(body), end - pos)
                body += view[pos : pos + take]
                pos += take
                if len(body) == self._expected:
                    self._frames.append(memoryview(body))
                    self._body = None
                continue
            if self._head or end - pos < 4:  # the size prefix itself is split
                take = min(4 - len(self._head), end - pos)
                self._head += view[pos : pos + take]
                pos += take
                if len(self._head) < 4:
                    return
                (size,) = _SIZE.unpack(self._head)
                self._head.clear()
            else:
                (size,) = _SIZE.unpack_from(view, pos)
                pos += 4
            self._check(size)
            if zero_copy and end - pos >= size:
                self._frames.append(view[pos : pos + size])
                pos += size
            elif size == 0:
                self._frames.append(memoryview(b""))
            else:
                self._body = bytearray()
                self._expected = size  # the size the body will have once complete

    def next_frame(self) -> memoryview | None:
        """The next complete frame (without its size prefix), or None until more bytes arrive."""
        if self._error is not None:
            raise self._error
        frames = self._frames
        taken = self._taken
        if taken == len(frames):
            return None
        frame = frames[taken]
        if taken + 1 == len(frames):
            frames.clear()
            self._taken = 0
        else:
            frames[taken] = _NO_FRAME  # held by whoever took it, no longer by the decoder
            self._taken = taken + 1
        return frame

    @property
    def buffered_bytes(self) -> int:
        """Bytes held: complete frames not yet taken plus the partial one (as received so far)."""
        partial = len(self._body) if self._body is not None else len(self._head)
        return partial + sum(len(f) for f in self._frames[self._taken :])

    def _check(self, size: int) -> None:
        if size < 0 or size > self.max_frame_bytes:
            self._frames.clear()
            self._taken = 0
            self._error = FrameError(
                f"frame size {size} is outside [0, {self.max_frame_bytes}] (socket.request.max.bytes)"
            )
            raise self._error


class RequestHeader(NamedTuple):
    """A parsed request header. `header_version` is the one the body was framed with.

    A NamedTuple rather than a frozen dataclass: one is built per request, and tuple
    construction is several times cheaper.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def parse_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Parse the header at the start of a request frame; returns it and the body offset.

    For an (api_key, api_version) kio does not know, the header is read on a
    best-effort basis and never fails once the correlation id is in hand: the
    server must still be able to answer UNSUPPORTED_VERSION to it. For known
    versions a malformed header raises DecodeError.
    """
    size = len(frame)
    if size < 8:
        raise DecodeError(f"request frame of {size} bytes is shorter than a request header")
    client_id: str | None
    if size >= 10:
        api_key, api_version, correlation_id, length = _HEADER_WITH_CLIENT_ID_LENGTH.unpack_from(frame, 0)
        known = _KNOWN_HEADERS.get((api_key, api_version))
        if known == 1 and 0 <= length <= size - 10:  # the common case, in one unpack
            # Lenient decoding: client_id only labels logs and quotas, and Kafka's Java reader
            # replaces malformed UTF-8 rather than failing.
            client_id = str(frame[10 : 10 + length], "utf-8", "replace")
            return RequestHeader(api_key, api_version, correlation_id, client_id, 1), 10 + length
    else:
        api_key, api_version, correlation_id = _HEADER_START.unpack_from(frame, 0)
        known = _KNOWN_HEADERS.get((api_key, api_version))
    if known is not None:
        client_id, offset = _read_header_rest(frame, known)
        return RequestHeader(api_key, api_version, correlation_id, client_id, known), offset
    version = request_header_version(api_key, api_version)
    if request_class(api_key, api_version) is None:
        try:
            client_id, offset = _read_header_rest(frame, version)
        except DecodeError:
            client_id, offset = None, len(frame)
    else:
        client_id, offset = _read_header_rest(frame, version)
        _KNOWN_HEADERS[(api_key, api_version)] = version  # bounded: only pairs kio knows
    return RequestHeader(api_key, api_version, correlation_id, client_id, version), offset


_KNOWN_HEADERS: dict[tuple[int, int], int] = {}


def _read_header_rest(frame: Buffer, version: int) -> tuple[str | None, int]:
    offset, end = 8, len(frame)
    client_id = None
    if version >= 1:
        if end < 10:
            raise DecodeError("request header truncated before client_id")
        (length,) = _INT16.unpack_from(frame, offset)
        offset += 2
        if length >= 0:
            if offset + length > end:
                raise DecodeError(f"client_id length {length} runs past the end of the frame")
            client_id = str(frame[offset : offset + length], "utf-8", "replace")  # lenient, as above
            offset += length
        elif length != -1:
            raise DecodeError(f"client_id has invalid length {length}")
    if version >= 2:
        try:
            offset = skip_tagged_fields(frame, offset)
        except IndexError:
            raise DecodeError("request header tagged fields run past the end of the frame") from None
    return client_id, offset


def response_header(correlation_id: int, header_version: int, body_size: int) -> bytes:
    """Size prefix plus response header, for bodies sent as separate chunks (or with sendfile)."""
    if header_version == 0:
        return _RESPONSE_V0.pack(body_size + 4, correlation_id)
    if header_version == 1:
        return _RESPONSE_V0.pack(body_size + 5, correlation_id) + b"\x00"
    raise ValueError(f"unknown response header version {header_version}")


def encode_response_frame(correlation_id: int, header_version: int, body_chunks: Iterable[Buffer]) -> list[Buffer]:
    """A complete response frame as chunks for `writelines`; body chunks are not copied."""
    if isinstance(body_chunks, (bytes, bytearray, memoryview)):
        chunks: list[Buffer] = [body_chunks]
    else:
        chunks = list(body_chunks)
    size = 0
    for chunk in chunks:
        size += chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)
    return [response_header(correlation_id, header_version, size), *chunks]


# -- the client side ------------------------------------------------------------------------------


def request_frame(api_key: int, api_version: int, correlation_id: int, client_id: bytes, body: bytes) -> bytes:
    """A whole request frame (size prefix, header of the version the api uses, body), for clients."""
    header = _HEADER_START.pack(api_key, api_version, correlation_id)
    header_version = request_header_version(api_key, api_version)
    if header_version >= 1:
        header += _INT16.pack(len(client_id)) + client_id
    if header_version >= 2:
        header += b"\x00"
    return _SIZE.pack(len(header) + len(body)) + header + body


def response_body_offset(api_key: int, api_version: int, frame: Buffer, correlation_id: int) -> int:
    """Check a response frame's correlation id; returns where its body starts."""
    if len(frame) < 4:
        raise DecodeError(f"response frame of {len(frame)} bytes has no correlation id")
    (received,) = _SIZE.unpack_from(frame, 0)
    if received != correlation_id:
        raise DecodeError(f"response correlation id {received} does not match request {correlation_id}")
    return 4 + (1 if response_header_version(api_key, api_version) >= 1 else 0)
