"""The metadata reloader built from its collaborators alone, no broker: the embedded store (which
answers at once, so a reload runs on the event loop straight away), a real metadata cache, and a
metadata pass that records what it was asked to re-read. Every wait is bounded."""

from __future__ import annotations

import asyncio

from strom.cluster import model
from strom.cluster.local_store import LocalStore
from strom.cluster.metadata_cache import MetadataCache
from strom.cluster.store import StoreError
from strom.server.metadata_reload import RELOAD_CHUNK, MetadataReloader


class Passes:
    """The broker's metadata pass: records each call's changed znodes (None: everything)."""

    def __init__(self, failures: int = 0):
        self.calls: list[set[str] | None] = []
        self.failures = failures  # the first calls raise StoreError (ZooKeeper unreachable)
        self.reloaded = 0  # after_reload calls
        self.called = asyncio.Event()

    def refresh(self, changed, reads) -> None:
        self.calls.append(None if changed is None else set(changed))
        self.called.set()
        if self.failures:
            self.failures -= 1
            raise StoreError("no answer")


def reloader_of(passes: Passes, stop: asyncio.Event) -> MetadataReloader:
    store = LocalStore(None)
    loop = asyncio.get_running_loop()

    def after_reload() -> None:
        passes.reloaded += 1

    return MetadataReloader(lambda: store, MetadataCache(), passes.refresh, lambda: loop, stop, after_reload)


async def until(passes: Passes, count: int) -> None:
    async def wait() -> None:
        while len(passes.calls) < count:
            passes.called.clear()
            await passes.called.wait()

    await asyncio.wait_for(wait(), 10)


def test_a_burst_of_watches_is_one_pass_over_the_znodes_that_fired():
    async def scenario() -> Passes:
        passes, stop = Passes(), asyncio.Event()
        reloader = reloader_of(passes, stop)
        for topic in ("a", "b", "a"):
            reloader.on_store_change(model.topic_path(topic))
        assert reloader.unapplied_changes() == set()  # the watches hop to the loop first
        await asyncio.sleep(0)
        assert reloader.unapplied_changes() == {model.topic_path("a"), model.topic_path("b")}
        await until(passes, 1)
        reloader.schedule()  # everything
        assert reloader.unapplied_changes() == {model.BROKERS_IDS, model.CONTROLLER}
        await until(passes, 2)
        reloader.close()
        return passes

    passes = asyncio.run(scenario())
    assert passes.calls == [{model.topic_path("a"), model.topic_path("b")}, None]
    assert passes.reloaded == 2


def test_many_changed_znodes_are_read_a_chunk_at_a_time():
    paths = {model.partition_state_path("t", i) for i in range(RELOAD_CHUNK)} | {model.topic_path("t")}

    async def scenario() -> Passes:
        passes, stop = Passes(), asyncio.Event()
        reloader = reloader_of(passes, stop)
        for path in paths:
            reloader.schedule(path)
        await until(passes, 2)
        reloader.close()
        return passes

    first, second = asyncio.run(scenario()).calls
    assert first is not None and second is not None
    assert len(first) == RELOAD_CHUNK and model.topic_path("t") in first  # topics before partition states
    assert first | second == paths and not first & second


def test_a_failed_pass_is_retried_over_everything():
    async def scenario() -> Passes:
        passes, stop = Passes(failures=1), asyncio.Event()
        reloader = reloader_of(passes, stop)
        reloader.schedule(model.topic_path("a"))
        await until(passes, 2)  # retried after 0.5 s
        reloader.close()
        return passes

    passes = asyncio.run(scenario())
    assert passes.calls == [{model.topic_path("a")}, None]
    assert passes.reloaded == 1  # only the pass that succeeded
