"""What a new partition's inodes cost this machine's kernel, without a broker.

    python scripts/inode_create_cost.py [--dir /tmp] [--partitions 512] [--deleted 0 5000 20000]

Makes what strom makes on disk for each new partition (a directory, an empty ``.log`` and a
``leader-epoch-checkpoint``), ``--partitions`` of them, and prints the system and user CPU that
took. Before each round it creates and deletes ``--deleted`` files in the same directory and
waits 1.5 s, as a machine that runs tests or benchmarks does all the time.

Why it exists: ``../shared/bench/compare.sh`` with ``PARTITIONS=512`` charges the creation of
each 512-partition topic to the produce that follows it, and on this VM the broker's CPU then was
nearly all system time (0.34-0.63 s per topic, against 0.06-0.11 s with the data on tmpfs).
``perf`` put about 60% of it in ext4's ``recently_deleted``, under ``ext4_create`` and
``ext4_mkdir``. This VM's root filesystem is ext4 without a journal (``/proc/fs/jbd2`` lists no
device), and in that mode ext4 will not hand out an inode freed in the last 60 s (360 s while its
inode-table block is dirty), so each new inode first walks past every such one. A journaled ext4,
what a Kafka host runs, skips that check. The script shows whether the machine does that
without strom: on the VM of the README's figures, 512 partitions cost 0.21-1.39 s of system CPU
under /tmp right after 5,000-50,000 deletions (0.11-0.56 s after none) and 0.01 s under /dev/shm.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

CHECKPOINT_TEXT = "0\n1\n0 0\n"


def make_partitions(root: str, count: int) -> tuple[float, float]:
    """User and system CPU seconds to make ``count`` partition directories under ``root``."""
    before = os.times()
    for number in range(count):
        directory = os.path.join(root, f"topic-{number}")
        os.mkdir(directory)
        with open(os.path.join(directory, "00000000000000000000.log"), "wb"):
            pass
        with open(os.path.join(directory, "leader-epoch-checkpoint"), "w") as checkpoint:
            checkpoint.write(CHECKPOINT_TEXT)
    after = os.times()
    return after.user - before.user, after.system - before.system


def delete_files(root: str, count: int) -> None:
    """Create and delete ``count`` files; ext4's deletion time has a resolution of one second,
    and an inode freed in the current second is not yet 'recent', hence the wait."""
    if not count:
        return
    junk = os.path.join(root, f"deleted-{count}")
    os.mkdir(junk)
    for number in range(count):
        with open(os.path.join(junk, str(number)), "wb"):
            pass
    shutil.rmtree(junk)
    time.sleep(1.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="/tmp", help="where to make them (default /tmp)")
    parser.add_argument("--partitions", type=int, default=512)
    parser.add_argument(
        "--deleted", type=int, nargs="+", default=[0, 5000, 20000], help="files deleted before each round"
    )
    args = parser.parse_args()
    journaled = sorted(os.listdir("/proc/fs/jbd2")) if os.path.isdir("/proc/fs/jbd2") else []
    print(f"journaled filesystems (/proc/fs/jbd2): {', '.join(journaled) or 'none'}")
    root = tempfile.mkdtemp(prefix="inode-create-cost-", dir=args.dir)
    try:
        for deleted in args.deleted:
            delete_files(root, deleted)
            round_dir = os.path.join(root, f"after-{deleted}")
            os.mkdir(round_dir)
            user, system = make_partitions(round_dir, args.partitions)
            print(
                f"{args.partitions} partitions in {args.dir} after deleting {deleted:6d} files: "
                f"system {system:.2f} s, user {user:.2f} s"
            )
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
