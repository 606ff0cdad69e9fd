"""A tiny writer for the responses strom encodes by hand (Produce, Fetch).

It knows the two encodings of Kafka's arrays and strings: classic (int32/int16 lengths) and
flexible (unsigned varint length + 1, with tagged-field sections).
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class WireWriter:
    __slots__ = ("flexible", "_parts")

    def __init__(self, flexible: bool):
        self.flexible = flexible
        self._parts: list[bytes] = []

    def raw(self, data: bytes) -> None:
        self._parts.append(data)

    def int16(self, value: int) -> None:
        self._parts.append(_INT16.pack(value))

    def int32(self, value: int) -> None:
        self._parts.append(_INT32.pack(value))

    def int64(self, value: int) -> None:
        self._parts.append(_INT64.pack(value))

    def array_length(self, count: int | None) -> None:
        if self.flexible:
            self._parts.append(uvarint(0 if count is None else count + 1))
        else:
            self._parts.append(_INT32.pack(-1 if count is None else count))

    def string(self, text: str) -> None:
        data = text.encode()
        self._parts.append((uvarint(len(data) + 1) if self.flexible else _INT16.pack(len(data))) + data)

    def nullable_string(self, text: str | None) -> None:
        if text is None:
            self._parts.append(b"\x00" if self.flexible else _INT16.pack(-1))
        else:
            self.string(text)

    def bytes_length(self, length: int | None) -> None:
        """The length prefix of a bytes/records field whose content is sent separately."""
        if self.flexible:
            self._parts.append(uvarint(0 if length is None else length + 1))
        else:
            self._parts.append(_INT32.pack(-1 if length is None else length))

    def tagged_fields(self) -> None:
        if self.flexible:
            self._parts.append(b"\x00")

    def getvalue(self) -> bytes:
        return b"".join(self._parts)

    def take(self) -> bytes:
        """The bytes so far, leaving the writer empty (to interleave with file slices)."""
        data = b"".join(self._parts)
        self._parts = []
        return data
