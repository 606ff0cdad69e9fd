"""A broker background task that ends with an error is logged when it ends, not dropped.

The broker keeps its background tasks until shutdown, which gathers them with
``return_exceptions=True``: an error that ended one would otherwise never be seen, and what the
task did (retention, flushes, transaction timers) would just stop.
"""

from __future__ import annotations

import asyncio
import logging

from strom.server.periodic import BackgroundTasks, log_if_failed


class Scheduler:
    async def run(self) -> None:
        await asyncio.sleep(0)
        raise ZeroDivisionError("float division by zero")  # what log.cleaner.threads=0 once raised here


async def _finish(coroutine) -> asyncio.Task:
    task = asyncio.get_running_loop().create_task(coroutine)
    task.add_done_callback(log_if_failed)
    await asyncio.wait([task], timeout=5)
    await asyncio.sleep(0)  # done-callbacks run on the next turn of the loop
    return task


def test_a_task_that_fails_is_logged_with_its_name_and_error(caplog):
    caplog.set_level(logging.ERROR, logger="strom.server")
    task = asyncio.run(_finish(Scheduler().run()))
    assert task.done()
    [record] = caplog.records
    assert record.getMessage() == "background task Scheduler.run stopped: ZeroDivisionError('float division by zero')"
    assert record.exc_info is not None and record.exc_info[0] is ZeroDivisionError


def test_tasks_that_end_normally_or_are_cancelled_log_nothing(caplog):
    caplog.set_level(logging.DEBUG, logger="strom.server")

    async def scenario() -> None:
        await _finish(asyncio.sleep(0))
        waiting = asyncio.get_running_loop().create_task(asyncio.sleep(30))
        waiting.add_done_callback(log_if_failed)
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.wait([waiting], timeout=5)
        await asyncio.sleep(0)

    asyncio.run(scenario())
    assert caplog.records == []


def test_the_brokers_background_tasks_run_repeat_and_end_at_shutdown(caplog):
    """BackgroundTasks, as the broker holds them: work until shutdown and work every N seconds, a
    failing run logged and the schedule going on, every task ended by ``cancel``."""
    caplog.set_level(logging.ERROR, logger="strom.server")

    async def scenario() -> None:
        stop = asyncio.Event()
        tasks = BackgroundTasks(stop)
        runs: list[int] = []
        enough = asyncio.Event()

        def check() -> None:
            runs.append(len(runs))
            if len(runs) == 2:
                raise ZeroDivisionError("the second run fails")
            if len(runs) >= 4:
                enough.set()

        tasks.every(0.01, check, "the check")
        tasks.run(asyncio.sleep(3600))  # work that runs until shutdown
        tasks.run(Scheduler().run())  # work that ends with an error at once
        await asyncio.wait_for(enough.wait(), 10)
        assert len([t for t in tasks.tasks if not t.done()]) == 2
        stop.set()
        await asyncio.wait_for(tasks.cancel(), 10)
        assert all(task.done() for task in tasks.tasks)

    asyncio.run(scenario())
    messages = [record.getMessage() for record in caplog.records]
    assert "the check failed" in messages  # the schedule went on after it
    assert "background task Scheduler.run stopped: ZeroDivisionError('float division by zero')" in messages
