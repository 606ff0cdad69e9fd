"""Operating-system resources a broker can run out of, and how it says so.

A broker holds a descriptor per segment (its .log; the indexes are mapped without one), so the
default soft limit of 1,024 open files is reached at a few hundred partitions while the hard
limit is usually far higher. Kafka's documentation tells operators to raise the limit by hand;
strom raises the soft limit to the hard one at startup and logs both, so the common case needs
no tuning. When the limit is still too low, the errors name it instead of taking a log dir offline
(running out of descriptors is not a broken disk).

Memory is the other resource it tunes at startup: glibc's allocator is told to keep megabyte-sized
buffers in its heap rather than map and unmap each one (``keep_large_buffers_in_heap``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import resource

log = logging.getLogger("strom.resources")

# errnos that mean "the process or the system ran out of something", not "the disk is broken"
EXHAUSTION_ERRNOS = {errno.EMFILE: "open files", errno.ENFILE: "open files (system-wide)", errno.ENOMEM: "memory"}
# What a new partition replica holds open: its .log (the indexes are mapped without a
# descriptor, see storage/file_mapping.py). Each later segment holds one more, as in Kafka.
DESCRIPTORS_PER_PARTITION = 1
# Descriptors kept free for connections, ZooKeeper, checkpoints and the files a roll opens.
DESCRIPTOR_RESERVE = 256


def raise_open_files_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit; returns (soft, hard) now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            log.info("open files limit: soft %d raised to %s (hard limit %s)", soft, wanted, _show(hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning(
                "open files limit: soft %d, hard %s; could not raise the soft limit: %s", soft, _show(hard), exc
            )
    else:
        log.info("open files limit: soft %s, hard %s", _show(soft), _show(hard))
    return soft, hard


# glibc's mallopt parameters, and the values a broker sets. Its request buffers (a produce
# request, a follower's fetch response, the copy a leader patches) are each about a megabyte.
# Left to itself glibc gives each block that large its own mmap, or trims the heap once a few
# are freed, so every new buffer faulted its pages in afresh and every freed one was unmapped:
# on one RF=3 partition under kcat, that was half of the leader's CPU per message and more than
# half of each follower's (README, "Benchmarks").
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MALLOC_MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
MALLOC_TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024  # free memory the heap keeps at its top, at most


def keep_large_buffers_in_heap() -> bool:
    """Have glibc serve allocations up to 16 MiB from its heap and keep up to 32 MiB free there.

    Returns whether it did: not where the C library has no mallopt that takes the settings (musl
    ignores them), nor where the operator set glibc's own MALLOC_MMAP_THRESHOLD_ or
    MALLOC_TRIM_THRESHOLD_ variables (theirs win)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        log.info("malloc: MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ is set; leaving glibc's settings to it")
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    if mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES) != 1:
        return False
    mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES)
    log.info(
        "malloc: blocks up to %d MiB come from the heap, which keeps up to %d MiB free",
        MALLOC_MMAP_THRESHOLD_BYTES >> 20,
        MALLOC_TRIM_THRESHOLD_BYTES >> 20,
    )
    return True


def _show(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


def open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return 0


def descriptor_shortfall(new_partitions: int) -> str | None:
    """None when ``new_partitions`` more replicas fit under the open files limit, else why not."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or new_partitions <= 0:
        return None
    in_use = open_descriptors()
    needed = new_partitions * DESCRIPTORS_PER_PARTITION
    if in_use + needed + DESCRIPTOR_RESERVE <= soft:
        return None
    return (
        f"not enough file descriptors: {new_partitions} more partition replicas need about {needed} "
        f"open files, and {in_use} of the broker's limit of {soft} (ulimit -n) are in use; raise the "
        f"limit (LimitNOFILE= for systemd, ulimit -Hn for a shell) and retry"
    )


def exhaustion(exc: BaseException) -> str | None:
    """The resource an OSError says ran out ("open files", "memory"), or None for other errors."""
    if isinstance(exc, OSError):
        return EXHAUSTION_ERRNOS.get(exc.errno or 0)
    if isinstance(exc, MemoryError):
        return "memory"
    return None


def describe_exhaustion(exc: OSError, doing: str) -> str:
    what = exhaustion(exc) or "a resource"
    detail = ""
    if exc.errno == errno.EMFILE:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        detail = f" (the broker's limit is {_show(soft)}, ulimit -n)"
    return f"{doing} failed: the broker ran out of {what}{detail}"
