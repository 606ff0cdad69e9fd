"""How long a woken thread waits for a CPU that a busy loop holds (the log cleaner's case).

    python scripts/wakeup_behind_busy_loop.py [--rounds 3000]

Two processes ping-pong over pipes: the sender on CPU 0, the receiver on CPU 1. The receiver's
time to wake is measured with nothing else on CPU 1, then beside a busy loop pinned there at
the receiver's own priority (nice 0), at nice 19, at SCHED_IDLE, and at SCHED_IDLE calling
sched_yield every 200 us (through strom.storage.cleaner_process.GiveWay, as a cleaner process does).
Needs 2 CPUs; asserts nothing.

On the 2-CPU VM of the README (Linux 6.18, preempt=none, HZ=250): p50 0.02-0.03 ms alone,
2.3-2.9 ms beside any of the three busy loops, 0.12-0.14 ms beside the yielding one.
"""

from __future__ import annotations

import argparse
import os
import time

from strom.storage.cleaner_process import GiveWay


def busy_loop(mode: str) -> None:
    """The child's whole life: spin on CPU 1 at the given priority until killed; the yielding
    mode calls the cleaner's own GiveWay on every turn."""
    os.sched_setaffinity(0, {1})
    if mode.startswith("sched_idle"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    elif mode == "nice_19":
        os.nice(19)
    give_way = GiveWay() if mode.endswith("yield") else (lambda: None)
    while True:
        give_way()


def measure(mode: str, rounds: int) -> str:
    ping_r, ping_w = os.pipe()
    pong_r, pong_w = os.pipe()
    busy = None
    if mode != "alone":
        busy = os.fork()
        if busy == 0:
            busy_loop(mode)
    receiver = os.fork()
    if receiver == 0:  # the receiver: stamps the time it ran, until the sender closes its end
        os.close(ping_w)
        os.sched_setaffinity(0, {1})
        while os.read(ping_r, 1):
            os.write(pong_w, b"%020d" % time.monotonic_ns())
        os._exit(0)
    os.sched_setaffinity(0, {0})
    waits = []
    for _ in range(rounds):
        sent = time.monotonic_ns()
        os.write(ping_w, b"x")
        waits.append(int(os.read(pong_r, 20)) - sent)
        time.sleep(0.001)
    if busy is not None:  # first: it holds a copy of ping_w, which keeps the receiver reading
        os.kill(busy, 9)
        os.waitpid(busy, 0)
    os.close(ping_w)
    os.waitpid(receiver, 0)
    for fd in (ping_r, pong_r, pong_w):
        os.close(fd)
    waits.sort()
    n = len(waits)
    return (
        f"{mode:18s} p50 {waits[n // 2] / 1e6:6.2f} ms  p99 {waits[int(n * 0.99)] / 1e6:6.2f} ms"
        f"  max {waits[-1] / 1e6:6.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3000)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two CPUs")
    for mode in ("alone", "nice_0", "nice_19", "sched_idle", "sched_idle_yield"):
        print(measure(mode, args.rounds), flush=True)


if __name__ == "__main__":
    main()
