"""The Schema Registry's parsing thread: schemas are parsed beside the event loop, and a broker
that stops does not wait for a parse to finish.

Parsing is pure Python (a 1 MB .proto takes seconds), so it must not run on the loop that serves
produce and fetch; one thread, because the .proto parser's caches are not made for concurrent
use. A thread cannot be killed, and the workers of ``concurrent.futures`` are joined when the
interpreter exits, so with a ThreadPoolExecutor a broker asked to stop during a large parse
waited for it (23 s seen, on a loaded machine). Here the thread is a daemon, and ``stop()``
raises ``ParsingStopped`` inside it with CPython's ``PyThreadState_SetAsyncExc``: the exception
is raised at the thread's next bytecode, which pure-Python parsing reaches at once (a long call
into C code, such as upb building descriptors, ends first). ``stop()`` then waits for the thread
a bounded time; parses queued behind it are failed with ``ParsingStopped`` without running.
"""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

log = logging.getLogger("strom.schemas")

STOP_WAIT_S = 2.0  # how long stop() waits for the thread to end after interrupting it


class ParsingStopped(Exception):
    """The registry stopped (the broker shuts down) before or while this parse ran."""


class ParserThread:
    def __init__(self, name: str = "strom-schema-parse"):
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()  # guards _thread, _running and _stopped
        self._thread: threading.Thread | None = None
        self._running: Future[Any] | None = None  # the job the thread is running, if any
        self._stopped = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` in the thread (started on first use); after stop() the future fails."""
        future: Future[Any] = Future()
        with self._lock:
            if self._stopped:
                future.set_exception(ParsingStopped("the Schema Registry is stopping"))
                return future
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._jobs.put((future, fn, args))
        return future

    def stop(self, wait_s: float = STOP_WAIT_S) -> bool:
        """Fail the queued jobs, interrupt the running one and wait up to ``wait_s`` for the thread
        to end; True when it has (or never started)."""
        with self._lock:
            self._stopped = True
            thread, running = self._thread, self._running
            if running is not None and thread is not None and thread.ident is not None:
                # raised in the thread at its next bytecode; under the lock, so only while the job runs
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(thread.ident), ctypes.py_object(ParsingStopped)
                )
                log.info("stopped the Schema Registry's parsing thread in the middle of a parse")
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                _fail(job[0])
        self._jobs.put(None)  # wakes an idle thread, which then ends
        if thread is None:
            return True
        thread.join(wait_s)
        return not thread.is_alive()

    def _work(self) -> None:
        current: Future[Any] | None = None
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                current, fn, args = job
                with self._lock:
                    if self._stopped:
                        _fail(current)
                        continue
                    if not current.set_running_or_notify_cancel():  # cancelled while queued
                        continue
                    self._running = current
                try:
                    outcome, failed = fn(*args), False
                except BaseException as exc:  # the job's own failure belongs to its caller; ParsingStopped too
                    outcome, failed = exc, True
                with self._lock:
                    self._running = None
                if failed:
                    current.set_exception(outcome)
                    if isinstance(outcome, ParsingStopped):
                        return
                else:
                    current.set_result(outcome)
        except ParsingStopped:  # raised just as a job ended, before its outcome was set
            if current is not None:
                _fail(current)


def _fail(future: Future[Any]) -> None:
    """Fail a job that stop() caught queued or running (a cancelled one stays cancelled)."""
    if future.done() or (not future.running() and not future.set_running_or_notify_cancel()):
        return
    future.set_exception(ParsingStopped("the Schema Registry stopped before this parse ended"))
