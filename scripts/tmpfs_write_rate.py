"""How fast this machine writes into new tmpfs pages, as the memory in use grows.

    python scripts/tmpfs_write_rate.py [--gib 14] [--dir /dev/shm]

Appends ``--gib`` GiB to one file in ``--dir`` in 1 MiB writes (what a segment's appends do,
without a broker), and prints the rate of each 256 MiB with the machine's memory in use
(MemTotal - MemAvailable) when it ended. Removes the file at the end.

Why it exists: ``python -m strom.bench.replication --dir /dev/shm/brep`` slows down by about
three times after some rounds, with the brokers' time in the kernel's copy into new tmpfs pages.
This shows whether the machine does that without strom. On the 24 GiB VM of the figures in the
README, the rate fell from about 3.3 GB/s to 0.38 GB/s once about 8-13 GB were in use.
"""

from __future__ import annotations

import argparse
import os
import time

STEP = 256 << 20
WRITE = 1 << 20


def memory_in_use_gb() -> float:
    fields = {}
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0]) * 1024
    return (fields["MemTotal"] - fields["MemAvailable"]) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=14.0, help="how much to write")
    parser.add_argument("--dir", default="/dev/shm", help="a tmpfs directory")
    args = parser.parse_args()
    path = os.path.join(args.dir, f"tmpfs-write-rate-{os.getpid()}")
    data = os.urandom(WRITE)
    total = int(args.gib * (1 << 30)) // STEP * STEP
    print(f"appending {total / (1 << 30):.2f} GiB to {path} in {WRITE >> 20} MiB writes")
    print("   written    rate   in use")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    try:
        written = 0
        while written < total:
            began = time.perf_counter()
            for _ in range(STEP // WRITE):
                os.write(fd, data)
            written += STEP
            rate = STEP / (time.perf_counter() - began) / 1e6
            print(f"  {written / (1 << 30):6.2f} GiB  {rate:5.0f} MB/s  {memory_in_use_gb():5.1f} GB", flush=True)
    finally:
        os.close(fd)
        os.remove(path)


if __name__ == "__main__":
    main()
