"""Batch builders shared by storage tests."""

from __future__ import annotations

import time

from strom.protocol.records import NewRecord, build_batch


def make_batch(
    count: int = 1,
    *,
    value_size: int = 10,
    timestamp: int | None = None,
    key: bytes | None = None,
    prefix: bytes = b"v",
    compression: int = 0,
) -> bytes:
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    records = [
        NewRecord((prefix + str(i).encode()).ljust(value_size, b"."), key=key, timestamp=timestamp + i)
        for i in range(count)
    ]
    return build_batch(records, compression=compression)


def keyed_batch(pairs: list[tuple[bytes, bytes | None]], timestamp: int = 1_000_000) -> bytes:
    return build_batch([NewRecord(v, key=k, timestamp=timestamp) for k, v in pairs])
