"""Encoding helpers for the responses strom writes by hand (Produce, Fetch).

Kafka has two encodings of arrays and strings: classic (int32/int16 lengths, -1 for null) and
flexible (unsigned varint of length + 1, 0 for null, plus tagged-field sections). These are
plain functions returning bytes, because the hot path joins a handful of small pieces.
"""

from __future__ import annotations

import struct
from functools import lru_cache

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SMALL_UVARINTS = [bytes([n]) for n in range(128)]
NO_TAGS = b"\x00"


def uvarint(value: int) -> bytes:
    if value < 128:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def array_length(count: int | None, flexible: bool) -> bytes:
    if flexible:
        return uvarint(0 if count is None else count + 1)
    return _INT32.pack(-1 if count is None else count)


@lru_cache(maxsize=4096)
def string(text: str, flexible: bool) -> bytes:
    """Topic names repeat in every response, so their encodings are cached."""
    data = text.encode()
    return (uvarint(len(data) + 1) if flexible else _INT16.pack(len(data))) + data


def nullable_string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(text, flexible)


def bytes_length(length: int | None, flexible: bool) -> bytes:
    """The length prefix of a bytes/records field whose content is sent separately."""
    if flexible:
        return uvarint(0 if length is None else length + 1)
    return _INT32.pack(-1 if length is None else length)
