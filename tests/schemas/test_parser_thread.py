"""strom.schemas.parser_thread: jobs run in the thread and hand back their result or failure; stop()
interrupts a pure-Python job in the middle, fails the queued ones without running them, and
refuses new ones. Every wait is bounded."""

from __future__ import annotations

import threading
import time

import pytest

from strom.schemas.parser_thread import ParserThread, ParsingStopped

WAIT_S = 30


def spin(started: threading.Event, seconds: float) -> str:
    """Pure Python for ``seconds`` (far longer than any test waits), as a large parse is."""
    started.set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    return "ran to its end"


def test_jobs_give_their_result_or_their_failure():
    parser = ParserThread()
    assert parser.submit(sum, [1, 2, 3]).result(WAIT_S) == 6
    with pytest.raises(ZeroDivisionError):
        parser.submit(lambda: 1 / 0).result(WAIT_S)
    assert parser.submit(str.upper, "after a failure").result(WAIT_S) == "AFTER A FAILURE"
    assert parser.stop()


def test_stop_interrupts_the_running_job_and_fails_the_queued_ones():
    parser = ParserThread()
    started = threading.Event()
    running = parser.submit(spin, started, 600)
    ran = []
    queued = parser.submit(ran.append, "queued")
    assert started.wait(WAIT_S)
    assert parser.stop()  # the thread ended within the bound
    with pytest.raises(ParsingStopped):
        running.result(WAIT_S)
    with pytest.raises(ParsingStopped):
        queued.result(WAIT_S)
    assert ran == []
    with pytest.raises(ParsingStopped):
        parser.submit(sum, [1]).result(WAIT_S)


def test_stopping_an_idle_or_unused_thread():
    assert ParserThread().stop()  # never started
    parser = ParserThread()
    assert parser.submit(sum, [1]).result(WAIT_S) == 1
    assert parser.stop()
