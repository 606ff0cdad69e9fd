"""Iceberg translation benchmark: committed records of one partition to an Iceberg table, per core.

    python -m strom.bench.iceberg [--records 500000] [--value-bytes 100] [--dir DIR]

Writes a partition log of ``--records`` records (100-byte values, short keys, a header on every
tenth, 100 records a batch) with strom's Log, then runs one translation round in this process as a
broker's worker process runs it (strom.iceberg.worker.translate_topic: read the segment files,
decode the records, build the Arrow table, write Parquet through pyiceberg and commit to a SQLite
SQL catalog), and prints records per second of that one core. Then a second round with nothing new,
the cost of a round that finds the table caught up. Asserts nothing (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from strom.iceberg.table import CatalogSettings
from strom.iceberg.worker import PartitionJob, TopicJob, translate_topic
from strom.protocol.records import NewRecord, build_batch
from strom.storage.log import Log
from strom.storage.log_config import LogConfig

PER_BATCH = 100


def write_log(directory: str, records: int, value_bytes: int) -> Log:
    log = Log(os.path.join(directory, "bench-0"), LogConfig())
    now = int(time.time() * 1000)
    value = b"v" * value_bytes
    for start in range(0, records, PER_BATCH):
        batch = [
            NewRecord(value, key=b"key-%d" % (i % 1000), headers=[("h", b"x")] if i % 10 == 0 else [], timestamp=now)
            for i in range(start, min(records, start + PER_BATCH))
        ]
        log.append_as_leader(build_batch(batch), leader_epoch=0)
    log.flush()
    log.update_high_watermark(log.log_end_offset)
    return log


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="strom-bench-iceberg-", dir=args.dir)
    try:
        log = write_log(root, args.records, args.value_bytes)
        catalog = CatalogSettings("sqlite:///" + os.path.join(root, "catalog.db"), "file://" + os.path.join(root, "wh"))
        job = TopicJob(
            "bench",
            catalog,
            (PartitionJob(0, log.directory, 0, log.last_stable_offset, 0, ()),),
        )
        import pyiceberg.catalog.sql  # noqa: F401  (a worker process imports these once, at its first round)
        import pyiceberg.io.pyarrow  # noqa: F401

        started, cpu = time.perf_counter(), time.process_time()
        result = translate_topic(job)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert result.rows == args.records, result
        size = log.size_in_bytes
        print(
            f"translated {result.rows:,} records ({size / 1e6:.1f} MB of segments) in {elapsed:.2f} s: "
            f"{result.rows / elapsed:,.0f} records/s, {result.rows / cpu:,.0f} records per CPU second"
        )
        started = time.perf_counter()
        again = translate_topic(job)
        print(f"a round with nothing new: {(time.perf_counter() - started) * 1000:.0f} ms ({again.rows} rows)")
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
