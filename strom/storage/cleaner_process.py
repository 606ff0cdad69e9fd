"""The first code a cleaner process runs: lower its CPU priority before it imports anything heavy.

A spawned cleaner process imports the storage modules (about 0.08 s of CPU here) in its
initializer; with the priority lowered first, that start-up runs at the cleaner's priority. Kept
free of strom imports for that reason. (A low priority alone does not make the kernel run a woken
broker thread at once, see below, which is why the processes start with the broker and not
with the first round: CompactionRounds.start_processes in strom.storage.compaction_rounds.)

Why SCHED_IDLE and not only a nice value: the cleaner decodes records in Python and keeps a CPU
busy for the whole round (about 40 MB/s here). At nice 10 it gets a small *share* of a contended
CPU, but the kernel's fair scheduler (EEVDF) may still let it finish its protected slice before a
woken broker or client thread runs, so a wake-up that lands on its CPU can wait. A SCHED_IDLE
thread is meant to be preempted at once by any woken normal thread (not everywhere: see below),
and a CPU running only it counts as idle when the kernel places a waking thread. It can also be
starved outright on a saturated machine, so a guard (``IdlePriority``) watches how long
the cleaner waits for a CPU and gives it back its normal (nice 10) priority for a while when it
waits most of the time, longer each time it starves again: on a saturated machine compaction
keeps nearly the pace nice 10 gave it before.

Why it also gives way (``GiveWay``): neither policy makes the kernel preempt the cleaner at once
everywhere. On the 2-CPU VM these figures come from (Linux 6.18, preempt=none, HZ=250), a task
woken onto the CPU where a busy loop ran waited 2.9 ms at the median for it, the same under
SCHED_IDLE and under nice 19. In a trace of a compaction, the broker's event loop waited 4 ms
that way behind the cleaner while the other CPU sat idle: the kernel counts a CPU that runs only
SCHED_IDLE work as idle, so it places wake-ups there. When the busy loop called sched_yield
every 200 us, the wait was 0.12-0.14 ms at the median (``scripts/wakeup_behind_busy_loop.py``
measures it). A yield costs a system call; at one per 200 us of work that is well under 1% of
the cleaner's time.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable

# Background work: on a busy machine the broker's event loop runs first.
CLEANER_NICENESS = 10
# The guard looks at most this often (its cost: reading one /proc file).
GUARD_CHECK_S = 1.0
# Starved: over a check interval, the thread had a CPU for less than this share of the time it
# wanted one (run time / (run time + run-queue wait); sleeps, as the I/O throttle's, count in neither)...
GUARD_MIN_RUN_SHARE = 0.5
# ...then it runs at nice CLEANER_NICENESS (SCHED_OTHER) this long before trying SCHED_IDLE again,
# twice as long after each starved try, up to the maximum: on a saturated machine the cleaner
# spends nearly all its time at nice 10, as it did before SCHED_IDLE, and keeps its pace.
GUARD_NORMAL_S = 2.0
GUARD_NORMAL_MAX_S = 32.0
SCHEDSTAT = "/proc/thread-self/schedstat"  # run ns, run-queue wait ns, timeslices (this thread)
# The cleaner yields its CPU after this much work (see "Why it also gives way" above).
GIVE_WAY_AFTER_NS = 200_000


def _run_and_wait_ns() -> tuple[int, int]:
    with open(SCHEDSTAT, "rb") as handle:
        fields = handle.read().split()
    return int(fields[0]), int(fields[1])


def _can_leave_sched_idle() -> bool:
    """Whether a thread of this process may go back from SCHED_IDLE to SCHED_OTHER at its nice
    value: unprivileged, Linux allows it only within RLIMIT_NICE. Tried on a throwaway thread
    (the policy is per thread), never on the one that does the work."""
    if not hasattr(os, "SCHED_IDLE"):
        return False
    try:
        _run_and_wait_ns()
    except (OSError, ValueError, IndexError):
        return False  # no schedstat (CONFIG_SCHED_INFO off): the guard could not see starvation
    allowed: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            allowed.append(True)
        except OSError:
            allowed.append(False)

    thread = threading.Thread(target=probe, name="sched-idle-probe")
    thread.start()
    thread.join()
    return allowed == [True]


class IdlePriority:
    """SCHED_IDLE for the cleaner's thread, with a starvation guard (see the module docstring).

    ``check`` is called by the cleaner between chunks of a round. SCHED_IDLE while the thread gets
    a CPU when it wants one; once it had one for less than GUARD_MIN_RUN_SHARE of a check
    interval, SCHED_OTHER at its nice value for GUARD_NORMAL_S, doubled after each consecutive
    starved try. A starved thread only checks when it runs, which SCHED_IDLE still lets it do now
    and then (the kernel gives it a small weight, not none).
    """

    def __init__(
        self,
        run_and_wait_ns: Callable[[], tuple[int, int]] = _run_and_wait_ns,
        set_idle: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._run_and_wait_ns = run_and_wait_ns
        self._set_idle = set_idle or _set_sched_idle
        self._clock = clock
        self.idle = False
        self.guard_engaged = 0  # times the guard gave the cleaner its normal priority back (tests)
        self.normal_s = GUARD_NORMAL_S  # the next stretch at normal priority
        self._window_start = clock()
        self._window = run_and_wait_ns()
        self._normal_until = 0.0

    def start(self) -> None:
        self._set_idle(True)
        self.idle = True
        self._reset_window(self._clock())

    def _reset_window(self, now: float) -> None:
        self._window_start = now
        self._window = self._run_and_wait_ns()

    def check(self) -> None:
        try:
            self._check()
        except OSError:  # a policy change refused after all: a round must not fail for its priority
            self.check = lambda: None  # type: ignore[method-assign]

    def _check(self) -> None:
        now = self._clock()
        if now - self._window_start < GUARD_CHECK_S:
            return
        if not self.idle:
            if now >= self._normal_until:
                self._set_idle(True)
                self.idle = True
                self._reset_window(now)
            return
        run_ns, wait_ns = self._run_and_wait_ns()
        ran, waited = run_ns - self._window[0], wait_ns - self._window[1]
        if ran + waited > 0 and ran < GUARD_MIN_RUN_SHARE * (ran + waited):
            self._set_idle(False)
            self.idle = False
            self.guard_engaged += 1
            self._normal_until = now + self.normal_s
            self.normal_s = min(self.normal_s * 2, GUARD_NORMAL_MAX_S)
        else:
            self.normal_s = GUARD_NORMAL_S  # SCHED_IDLE was enough this time
        self._reset_window(now)


class GiveWay:
    """Called every few records: yields the CPU when GIVE_WAY_AFTER_NS passed since the last yield,
    so that a woken broker or client thread queued behind the cleaner runs within about that long.
    ``sched_yield`` returns at once when nothing else waits for the CPU."""

    def __init__(self, clock_ns: Callable[[], int] = time.monotonic_ns, yield_cpu: Callable[[], None] = os.sched_yield):
        self._clock_ns = clock_ns
        self._yield_cpu = yield_cpu
        self._last = clock_ns()

    def __call__(self) -> None:
        now = self._clock_ns()
        if now - self._last >= GIVE_WAY_AFTER_NS:
            self._yield_cpu()
            self._last = self._clock_ns()


def _set_sched_idle(idle: bool) -> None:
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    os.sched_setscheduler(0, policy, os.sched_param(0))


def lower_priority() -> IdlePriority | None:
    """nice CLEANER_NICENESS, then SCHED_IDLE with its guard where the guard can undo it."""
    try:
        os.nice(CLEANER_NICENESS)
    except OSError:
        pass  # not permitted here: the cleaner runs at the broker's priority
    if not _can_leave_sched_idle():
        return None  # stay at the nice value: SCHED_IDLE without a way back could starve compaction
    guard = IdlePriority()
    try:
        guard.start()
    except OSError:
        return None
    return guard


def exit_with_the_broker() -> None:
    """End this process when the broker's does, even while it waits for work.

    An idle pool worker blocks reading its job queue, whose write end it holds too, so a broker
    killed with -9 would leave it waiting for ever, an orphan of about 30 MB. The parent's
    sentinel (a pipe end that closes when the broker dies) wakes this thread instead. Work in
    progress is dropped: the broker's next start removes the .cleaned files it leaves.
    """
    broker = multiprocessing.parent_process()
    if broker is None:
        return  # not a spawned process: nothing to watch

    def wait_then_exit() -> None:
        broker.join()
        os._exit(0)

    threading.Thread(target=wait_then_exit, name="exit-with-the-broker", daemon=True).start()


def init(stop: threading.Event, bytes_per_second: float) -> None:
    """The pool's initializer: an exit with the broker, the priority lowered, then the cleaner's
    per-process state (stop flag, I/O throttle, and every few records the priority guard and
    yielding the CPU)."""
    exit_with_the_broker()  # before the priority is lowered, which its thread would inherit
    guard = lower_priority()
    yield_cpu = GiveWay()
    from strom.storage import cleaner

    if guard is None:
        cleaner.worker_init(stop, bytes_per_second, yield_cpu)
        return

    def give_way() -> None:
        guard.check()
        yield_cpu()

    cleaner.worker_init(stop, bytes_per_second, give_way)
