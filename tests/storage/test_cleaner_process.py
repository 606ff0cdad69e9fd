"""The cleaner process's priority: SCHED_IDLE at nice 10, and the guard that ends a starvation.

Scheduling policy and nice value are per thread on Linux, so each case runs on a thread of its
own and the test process keeps its priority. The guard is driven with a run-queue wait the test
chooses (the kernel's figure cannot be made to starve on demand) but changes the real policy.
"""

from __future__ import annotations

import os
import threading

from strom.storage import cleaner_process
from strom.storage.cleaner_process import (
    CLEANER_NICENESS,
    GIVE_WAY_AFTER_NS,
    GUARD_CHECK_S,
    GUARD_NORMAL_S,
    GiveWay,
    IdlePriority,
    lower_priority,
)


def _on_a_thread(work):
    result: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    if errors:
        raise errors[0]
    return result[0]


def test_the_cleaner_thread_runs_sched_idle_at_nice_10_where_it_may_come_back():
    def work():
        before = os.getpriority(os.PRIO_PROCESS, 0)
        guard = lower_priority()
        return before, guard, os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)

    before, guard, policy, nice = _on_a_thread(work)
    assert nice == min(19, before + CLEANER_NICENESS)
    if cleaner_process._can_leave_sched_idle():
        assert guard is not None and policy == os.SCHED_IDLE
    else:  # unprivileged beyond RLIMIT_NICE: SCHED_IDLE could not be undone, so it is not used
        assert guard is None and policy == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test's own thread is untouched


def test_a_starved_cleaner_gets_its_normal_priority_back_longer_each_time_then_goes_idle_again():
    assert cleaner_process._can_leave_sched_idle(), "tests run as root here: a thread may leave SCHED_IDLE"

    def work():
        now = [0.0]
        run_ns, wait_ns = [0], [0]
        guard = IdlePriority(run_and_wait_ns=lambda: (run_ns[0], wait_ns[0]), clock=lambda: now[0])
        guard.start()
        seen = [os.sched_getscheduler(0)]

        def interval(seconds: float, run_share: float) -> None:
            now[0] += seconds
            run_ns[0] += int(seconds * run_share * 1e9)
            wait_ns[0] += int(seconds * (1 - run_share) * 1e9)
            guard.check()
            seen.append(os.sched_getscheduler(0))

        interval(GUARD_CHECK_S, 0.9)  # the CPU came when asked: stays idle
        interval(GUARD_CHECK_S, 0.1)  # had a CPU 10% of the time it wanted one: starved
        interval(GUARD_CHECK_S, 0.1)  # normal priority lasts GUARD_NORMAL_S, whatever the wait
        interval(GUARD_NORMAL_S, 0.9)  # then idle again
        interval(GUARD_CHECK_S, 0.1)  # starved again: normal for twice as long
        interval(GUARD_NORMAL_S, 0.9)
        interval(GUARD_NORMAL_S, 0.9)
        interval(GUARD_CHECK_S, 0.9)  # idle was enough: the next stretch is short again
        return seen, guard.guard_engaged, guard.normal_s

    seen, engaged, normal_s = _on_a_thread(work)
    idle, other = os.SCHED_IDLE, os.SCHED_OTHER
    assert seen == [idle, idle, other, other, idle, other, other, idle, idle]
    assert engaged == 2
    assert normal_s == GUARD_NORMAL_S


def test_a_refused_policy_change_never_fails_the_round():
    calls: list[bool] = []

    def refuse(idle: bool) -> None:
        calls.append(idle)
        if not idle:
            raise PermissionError(1, "Operation not permitted")

    now = [0.0]
    waited = [0]
    guard = IdlePriority(run_and_wait_ns=lambda: (0, waited[0]), set_idle=refuse, clock=lambda: now[0])
    guard.start()
    now[0] += GUARD_CHECK_S
    waited[0] += int(GUARD_CHECK_S * 1e9)
    guard.check()  # starved, and the way back is refused: no exception
    now[0] += GUARD_CHECK_S * 10
    waited[0] += int(GUARD_CHECK_S * 10 * 1e9)
    guard.check()  # and the guard has stopped trying
    assert calls == [True, False]


def test_the_cleaner_yields_its_cpu_once_it_worked_give_way_after_ns_since_the_last_yield():
    now = [0]
    yielded: list[int] = []
    give_way = GiveWay(clock_ns=lambda: now[0], yield_cpu=lambda: yielded.append(now[0]))
    for step in (GIVE_WAY_AFTER_NS // 2, GIVE_WAY_AFTER_NS // 2 - 1):
        now[0] += step
        give_way()
    assert yielded == []  # not yet: 1 ns short
    now[0] += 1
    give_way()
    assert yielded == [GIVE_WAY_AFTER_NS]
    now[0] += GIVE_WAY_AFTER_NS - 1  # counted from the last yield
    give_way()
    now[0] += 1
    give_way()
    assert yielded == [GIVE_WAY_AFTER_NS, 2 * GIVE_WAY_AFTER_NS]
