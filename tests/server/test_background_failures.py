"""A broker background task that ends with an error is logged when it ends, not dropped.

The broker keeps its background tasks until shutdown, which gathers them with
``return_exceptions=True``: an error that ended one would otherwise never be seen, and what the
task did (retention, flushes, transaction timers) would just stop.
"""

from __future__ import annotations

import asyncio
import logging

from strom.server.periodic import log_if_failed


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
