"""Quota configs: Kafka's precedence, the znode layout shared with SCRAM credentials, Kafka's throttle time."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from strom.cluster.local_store import LocalStore
from strom.security.credentials import CredentialCache
from strom.security.scram import ScramCredential
from strom.server.handlers.fetch import encode_response
from strom.server.quotas import DEFAULT, PRODUCER_BYTE_RATE, LoopTime, QuotaManager, Rate


def empty_fetch(version):
    return encode_response([], version)


LEVELS = [  # Kafka's order, most specific first, and who shares the rate at that level
    (("alice", "app"), ("alice", "app")),
    (("alice", DEFAULT), ("alice", "app")),
    (("alice", None), ("alice", "")),
    ((DEFAULT, "app"), ("alice", "app")),
    ((DEFAULT, DEFAULT), ("alice", "app")),
    ((DEFAULT, None), ("alice", "")),
    ((None, "app"), ("", "app")),
    ((None, DEFAULT), ("", "app")),
]


def test_the_most_specific_configured_entity_wins_in_kafkas_order():
    quotas = QuotaManager(LocalStore(None), empty_fetch=empty_fetch)
    quotas.load()
    for i, (entity, _) in enumerate(LEVELS):
        quotas.alter(entity, {PRODUCER_BYTE_RATE: 1000.0 + i})
    assert quotas.active
    for i, (entity, tags) in enumerate(LEVELS):
        assert quotas.quota(PRODUCER_BYTE_RATE, "alice", "app") == (1000.0 + i, tags)
        quotas.alter(entity, {PRODUCER_BYTE_RATE: None})
    assert quotas.quota(PRODUCER_BYTE_RATE, "alice", "app") is None
    assert not quotas.active


def test_user_quotas_share_the_node_with_scram_credentials():
    store = LocalStore(None)
    credentials, quotas = CredentialCache(store), QuotaManager(store, empty_fetch=empty_fetch)
    credentials.alter("alice", {"SCRAM-SHA-256": ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)}, set())
    quotas.alter(("alice", None), {PRODUCER_BYTE_RATE: 1048576.0, "request_percentage": 12.5})
    quotas.alter(("alice", "app"), {"consumer_byte_rate": 10.0})
    config = json.loads(store.get("/config/users/alice")[0])
    assert config["version"] == 1 and set(config["config"]) == {
        "SCRAM-SHA-256",
        PRODUCER_BYTE_RATE,
        "request_percentage",
    }
    assert config["config"][PRODUCER_BYTE_RATE] == "1048576" and config["config"]["request_percentage"] == "12.5"
    assert json.loads(store.get("/config/users/alice/clients/app")[0]) == {
        "version": 1,
        "config": {"consumer_byte_rate": "10"},
    }
    credentials.alter("alice", {}, {"SCRAM-SHA-256"})
    quotas.alter(("alice", None), {PRODUCER_BYTE_RATE: None, "request_percentage": None})
    # the user node stays (its client node lives under it), with nothing in it
    assert json.loads(store.get("/config/users/alice")[0]) == {"version": 1, "config": {}}
    assert quotas.entities == {("alice", "app"): {"consumer_byte_rate": 10.0}}


def test_rate_and_throttle_follow_kafkas_formulas():
    rate = Rate(11, 1000, 0)
    rate.record(5000, 0)
    assert rate.window(0) == 10_000  # padded to (samples - 1) windows while young
    assert rate.measure(0) == 500.0
    quotas = QuotaManager(LocalStore(None), empty_fetch=empty_fetch)
    quotas.entities, quotas.active = {(None, "c"): {PRODUCER_BYTE_RATE: 100.0}}, True
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "c", 1000, 0) == 0  # 1000 B / 10 s = the bound
    # 2000 B over 10 s: (200 - 100) / 100 x 10 s
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "c", 1000, 0) == 10_000
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "c", 100_000, 0) == 11_000  # capped at the whole window


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_loop_time_counts_a_handlers_steps_but_not_its_wait():
    """request_percentage's measure of an async handler: what runs on the loop, not the purgatory wait."""
    loop = asyncio.new_event_loop()
    try:
        purgatory = loop.create_future()

        async def handler() -> str:
            _busy(0.02)  # the work before it waits
            await purgatory
            _busy(0.02)  # building the response once woken
            return "response"

        began = time.perf_counter_ns()
        timed = LoopTime(handler())
        assert timed.send(None) is purgatory  # suspended: the loop runs other requests meanwhile
        waited = time.perf_counter_ns()
        time.sleep(0.3)
        waited = time.perf_counter_ns() - waited
        purgatory.set_result(True)
        with pytest.raises(StopIteration) as done:
            timed.send(None)
        total = time.perf_counter_ns() - began
        assert done.value.value == "response"
        assert 40_000_000 <= timed.ns <= total - waited

        async def in_a_task() -> tuple[str, int]:  # and as the connection awaits it, in a task
            async def sleeper() -> str:
                await asyncio.sleep(0.05)
                return "slept"

            timed = LoopTime(sleeper())
            return await timed, timed.ns

        value, ns = loop.run_until_complete(in_a_task())
        assert value == "slept" and 0 < ns
    finally:
        loop.close()
