"""Storage benchmark: strom's log against plain file I/O on the same disk, in the same run.

    python -m strom.bench.storage [--size-mb 1024] [--batch-kb 16] [--dir DIR] [--record]

Writes SIZE with plain ``os.write`` and appends the same batches through ``Log.append_as_leader``
(validation, CRC-32C, offset assignment, index maintenance and rolling included); both end with
an fsync. Then reads both back sequentially in 1 MiB reads, alternating plain ``os.pread`` and
``Log.read`` for --rounds passes, and keeps each side's best pass. Prints MB/s and the ratios; asserts
nothing about time (these machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from strom.bench.results import add_record_argument, record
from strom.protocol.records import NewRecord, build_batch, complete_batches_end
from strom.storage.log import Log
from strom.storage.log_config import LogConfig

FETCH_BYTES = 1024 * 1024


def make_batch(batch_bytes: int) -> bytes:
    record_size = 1000
    count = max(1, batch_bytes // (record_size + 20))
    return build_batch([NewRecord(os.urandom(record_size // 2).hex().encode(), key=b"k%d" % i) for i in range(count)])


def strom_append(directory: str, batch: bytes, count: int) -> tuple[Log, float]:
    log = Log(os.path.join(directory, "bench-0"), LogConfig())
    started = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0)
    log.flush()
    elapsed = time.perf_counter() - started
    log.update_high_watermark(log.log_end_offset)
    return log, elapsed


def strom_read(log: Log) -> tuple[float, int]:
    """Sequential consumption through Log.read: locate, slice, read the bytes, find the next offset."""
    started = time.perf_counter()
    offset = 0
    total = 0
    while offset < log.log_end_offset:
        data = log.read(offset, FETCH_BYTES, log.high_watermark)
        chunk = os.pread(data.slices[0].fd, data.slices[0].length, data.slices[0].position)
        total += len(chunk)
        offset = complete_batches_end(chunk)[1]
    return time.perf_counter() - started, total


def plain_write(path: str, batch: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    started = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    os.fsync(fd)
    elapsed = time.perf_counter() - started
    os.close(fd)
    return elapsed


def plain_read(path: str) -> tuple[float, int]:
    fd = os.open(path, os.O_RDONLY)
    started = time.perf_counter()
    position = 0
    while True:
        chunk = os.pread(fd, FETCH_BYTES, position)
        if not chunk:
            break
        position += len(chunk)
    elapsed = time.perf_counter() - started
    os.close(fd)
    return elapsed, position


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="read passes over each file (best counts)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temp dir, removed afterwards)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    batch = make_batch(args.batch_kb * 1024)
    count = args.size_mb * 1024 * 1024 // len(batch)
    directory = tempfile.mkdtemp(prefix="strom-bench-", dir=args.dir)
    plain_path = os.path.join(directory, "plain.bin")
    try:
        # Alternate the two so that machine noise and page-cache state hit both; keep the best
        # of --rounds for each (the figure least disturbed by other work on a shared machine).
        plain_w = plain_write(plain_path, batch, count)
        log, strom_w = strom_append(directory, batch, count)
        plain_reads, strom_reads = [], []
        for _ in range(args.rounds):
            plain_reads.append(plain_read(plain_path))
            strom_reads.append(strom_read(log))
        plain_r, plain_bytes = min(plain_reads)
        strom_r, strom_bytes = min(strom_reads)
        log.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    mb = count * len(batch) / 1e6
    print(f"storage benchmark: {count} batches of {len(batch)} bytes = {mb:.0f} MB in {directory}")
    print(f"{'':12}{'plain MB/s':>12}{'strom MB/s':>12}{'ratio':>8}")
    print(f"{'append':12}{mb / plain_w:12.0f}{mb / strom_w:12.0f}{plain_w / strom_w:8.2f}")
    print(f"{'read':12}{plain_bytes / 1e6 / plain_r:12.0f}{strom_bytes / 1e6 / strom_r:12.0f}{plain_r / strom_r:8.2f}")
    print(f"strom batches/s appended: {count / strom_w:.0f}")
    if args.record:
        figures = {
            "append, strom / plain write": (plain_w / strom_w, "ratio"),
            "read, strom / plain pread": (plain_r / strom_r, "ratio"),
            "append, strom": (mb / strom_w, "MB/s"),
            "read, strom": (strom_bytes / 1e6 / strom_r, "MB/s"),
        }
        record(args.record, "storage", figures, argv)


if __name__ == "__main__":
    main()
