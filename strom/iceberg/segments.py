"""Reading a partition's committed records from its segment files, in a worker process.

The broker hands over only what it knows in memory: the directory, the range [start, upper) with
``upper`` the last stable offset (the high watermark when no transaction is open), and the aborted
transactions overlapping the range. Batches are read straight from the ``.log`` files (closed
segments and the active one: everything below the high watermark is in the file, the broker
writes its buffered appends before it hands the range over). Control batches and the batches of
aborted transactions are left out, as a read_committed consumer leaves them out.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from strom.protocol.records import BATCH_HEADER_SIZE, BatchHeader, Record, iter_batch_records


class Aborted(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


def segment_files(directory: str) -> list[tuple[int, str]]:
    """(base offset, path) of every .log segment, oldest first."""
    found = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if suffix == "log" and dot and stem.isdigit():
            found.append((int(stem), os.path.join(directory, name)))
    return sorted(found)


def _aborted(header: BatchHeader, aborted: list[Aborted]) -> bool:
    if not header.is_transactional:
        return False
    return any(
        a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset for a in aborted
    )


class Batches:
    """Whole batches in [start, upper), at most about ``max_bytes`` of them; ``resume`` is where the
    next read starts once they are consumed: ``upper`` when the range was read to its end."""

    def __init__(self, directory: str, start: int, upper: int, max_bytes: int):
        self.directory, self.start, self.upper, self.max_bytes = directory, start, upper, max_bytes
        self.resume = start

    def __iter__(self) -> Iterator[tuple[BatchHeader, bytes]]:
        start, upper = self.start, self.upper
        files = segment_files(self.directory)
        read = 0
        for i, (base, path) in enumerate(files):
            if i + 1 < len(files) and files[i + 1][0] <= start:
                continue  # every offset of this segment is below start
            if base >= upper:
                break
            with open(path, "rb") as handle:
                position = 0
                while True:
                    handle.seek(position)
                    raw = handle.read(BATCH_HEADER_SIZE)
                    if len(raw) < BATCH_HEADER_SIZE:
                        break  # the end of this segment
                    header = BatchHeader.parse(raw)
                    if header.base_offset >= upper:
                        self.resume = upper
                        return
                    if header.last_offset >= upper:
                        return  # a batch reaching past upper waits for the next round
                    if header.last_offset >= start:
                        handle.seek(position)
                        batch = handle.read(header.size)
                        if len(batch) < header.size:
                            return  # still being written: not below the high watermark yet
                        self.resume = header.next_offset
                        yield header, batch
                        read += header.size
                        if read >= self.max_bytes:
                            return
                    position += header.size
        self.resume = max(self.resume, upper)  # every segment read to its end: the range is done


def committed_records(
    directory: str, start: int, upper: int, aborted: list[Aborted], max_bytes: int
) -> tuple[list[tuple[BatchHeader, Record]], int]:
    """The committed data records in [start, upper) and the offset to resume from after them."""
    out: list[tuple[BatchHeader, Record]] = []
    batches = Batches(directory, start, upper, max_bytes)
    for header, batch in batches:
        if header.is_control or _aborted(header, aborted):
            continue
        header.position = 0
        for record in iter_batch_records(batch, header):
            if start <= record.offset < upper:
                out.append((header, record))
    return out, batches.resume
