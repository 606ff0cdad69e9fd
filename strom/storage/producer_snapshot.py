"""``<offset>.snapshot``: the producer state of a partition as of an offset, in Kafka's format.

Without it, opening a log replays every batch header of every segment to learn each producer's
last sequence and open transaction. With it, opening reads the newest snapshot and replays only
the batches after its offset. Kafka's layout (ProducerStateManager, version 1, big-endian)::

    >h version (1)   >I crc (CRC-32C of everything after this field)   >i entry count
    entry: >q producer_id  >h epoch  >i last_sequence  >q last_offset  >i offset_delta
           >q timestamp    >i coordinator_epoch        >q current_txn_first_offset

Only each producer's last batch is kept, as Kafka keeps it: after a restart a retry of that
batch is still recognised, while an older in-flight batch gets OUT_OF_ORDER_SEQUENCE_NUMBER and
the producer resends (what Kafka's clients already handle).
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

import crc32c

SNAPSHOT_SUFFIX = ".snapshot"
VERSION = 1
_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
KEEP = 2  # snapshots kept per partition: the newest, and one before it in case it is torn


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class CorruptSnapshotError(ValueError):
    pass


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def snapshot_offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, oldest first."""
    return sorted(
        int(name[:20])
        for name in os.listdir(directory)
        if name.endswith(SNAPSHOT_SUFFIX) and name[:20].isdigit() and len(name) == 20 + len(SNAPSHOT_SUFFIX)
    )


def write_snapshot(directory: str, offset: int, entries: list[SnapshotEntry]) -> None:
    """Write atomically (temp file, fsync, rename) and keep only the newest KEEP snapshots."""
    body = struct.pack(">i", len(entries)) + b"".join(_ENTRY.pack(*e) for e in entries)
    data = struct.pack(">hI", VERSION, crc32c.crc32c(body)) + body
    path = snapshot_path(directory, offset)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    for old in snapshot_offsets(directory)[:-KEEP]:
        delete_snapshot(directory, old)


def read_snapshot(path: str) -> list[SnapshotEntry]:
    with open(path, "rb") as handle:
        data = handle.read()
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"{path}: {len(data)} bytes is shorter than the header")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise CorruptSnapshotError(f"{path}: snapshot version {version}, expected {VERSION}")
    if crc32c.crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshotError(f"{path}: CRC mismatch")
    if count < 0 or _HEADER.size + count * _ENTRY.size != len(data):
        raise CorruptSnapshotError(f"{path}: {count} entries do not fill {len(data)} bytes")
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)) for i in range(count)]


def delete_snapshot(directory: str, offset: int) -> None:
    try:
        os.unlink(snapshot_path(directory, offset))
    except FileNotFoundError:
        pass


def delete_snapshots_after(directory: str, offset: int) -> None:
    """Truncation: a snapshot past the new log end describes history that is gone."""
    for found in snapshot_offsets(directory):
        if found > offset:
            delete_snapshot(directory, found)
