"""Regex subscriptions' record (ConsumerGroupRegularExpression, key 16, as Kafka 4.0 writes it): what
a regex resolved to is stored, restored by a reloading coordinator, refreshed when topics change,
deleted when no member uses the regex, and filtered by what the member may Describe."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from strom.group import consumer_records as rec
from strom.group import records as schema
from strom.group.consumer_state import cancel_timers
from tests.group.test_consumer_group import T, U, hb, make

V = uuid.UUID(int=9)


def regex_records(c) -> list[tuple[str, rec.ResolvedRegex | None]]:
    found = []
    for batch in c.store.writes:
        for key, value in batch:
            decoded = schema.decode_key(key)
            if isinstance(decoded, rec.ConsumerKey) and decoded.version == rec.REGULAR_EXPRESSION:
                found.append((decoded.member, None if value is None else rec.decode_regex(value)))
    return found


def test_record_layout_is_kafkas():
    key = rec.encode_key(rec.ConsumerKey(rec.REGULAR_EXPRESSION, "g", "t.*"))
    assert key == b"\x00\x10" + b"\x00\x01g" + b"\x00\x03t.*"
    assert schema.decode_key(key) == rec.ConsumerKey(16, "g", "t.*")
    value = rec.encode_regex(rec.ResolvedRegex(frozenset({"tb", "ta"}), 5, 1700000000000))
    # version 0, compact array of 2 compact strings, Version int64, Timestamp int64, no tagged fields
    assert value == (
        b"\x00\x00"
        + b"\x03"
        + b"\x03ta"
        + b"\x03tb"
        + (5).to_bytes(8, "big")
        + (1700000000000).to_bytes(8, "big")
        + b"\x00"
    )
    assert rec.decode_regex(value) == rec.ResolvedRegex(frozenset({"ta", "tb"}), 5, 1700000000000)


def test_a_resolution_is_stored_reloaded_refreshed_and_deleted():
    c = make(topics={"t1": (T, 2), "t2": (U, 2), "other": (V, 2)})

    async def joined():
        a = await hb(c, "a", 0, regex="t.*")
        assert a.error_code == 0 and a.assignment is not None and set(a.assignment) == {T, U}
        for member in c.consumer.groups["g"].members.values():
            cancel_timers(member)

    asyncio.run(joined())
    assert [(r, v.topics) for r, v in regex_records(c) if v] == [("t.*", frozenset({"t1", "t2"}))]
    # a new coordinator restores the resolution from the records, before any heartbeat
    reloaded = make(topics={"t1": (T, 2), "t2": (U, 2), "other": (V, 2)})
    for batch in c.store.writes:
        for key, value in batch:
            decoded = schema.decode_key(key)
            if isinstance(decoded, rec.ConsumerKey):
                reloaded.consumer.replay(0, decoded, value)
    group = reloaded.consumer.groups["g"]
    assert group.regexes["t.*"].topics == frozenset({"t1", "t2"})
    assert reloaded.consumer.subscribed_topics("g") == {"t1", "t2"}

    async def changes():
        topics = c.metadata.topics = dict(c.metadata.topics)
        topics["t3"] = SimpleNamespace(topic_id=uuid.UUID(int=10), partition_count=1)
        a = await hb(c, "a", 1)  # the topics changed: resolved again, a new record
        assert a.error_code == 0
        assert regex_records(c)[-1][1].topics == frozenset({"t1", "t2", "t3"})
        await hb(c, "b", 0, names=["other"])
        left = await hb(c, "a", -1)  # nobody uses the regex any more: its record goes
        assert left.error_code == 0 and regex_records(c)[-1] == ("t.*", None)
        assert "t.*" not in c.consumer.groups["g"].regexes
        for member in c.consumer.groups["g"].members.values():
            cancel_timers(member)

    asyncio.run(changes())


def test_a_regex_matches_only_topics_the_member_may_describe():
    c = make(topics={"t1": (T, 2), "t2": (U, 2)})

    async def scenario():
        a = await c.consumer.heartbeats.heartbeat(
            "g", "a", 0, None, None, 30000, None, "t.*", None, {}, "client", "/h", 1, lambda topic: topic != "t2"
        )
        assert a.error_code == 0 and set(a.assignment or {}) == {T}
        assert c.consumer.groups["g"].regexes["t.*"].topics == frozenset({"t1"})
        for member in c.consumer.groups["g"].members.values():
            cancel_timers(member)

    asyncio.run(scenario())
