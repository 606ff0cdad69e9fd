"""The fields that both kinds of __consumer_offsets records are made of (strom.group.records for
the classic ones, strom.group.consumer_records for KIP-848's): Kafka's classic strings (int16
length, -1 for null), bytes (int32 length) and big-endian integers, read with bounds checked."""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

MAX_STRING_BYTES = 32767  # an int16 length: the longest group id, topic or member id a record can hold


class RecordFormatError(ValueError):
    pass


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record runs past its end")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self) -> str | None:
        length = self.i16()
        return None if length < 0 else self._take(length).decode("utf-8", "replace")

    def blob(self) -> bytes:
        length = self.i32()
        return b"" if length < 0 else self._take(length)


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    data = value.encode()
    if len(data) > MAX_STRING_BYTES:
        raise RecordFormatError(f"string longer than {MAX_STRING_BYTES} bytes")
    return _I16.pack(len(data)) + data
