"""The consumer group protocol (KIP-848) in-process: epochs, incremental reconciliation, fencing,
static members, offset commits by member epoch, conversion, and reloading from the records."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from strom.group import consumer_records as rec
from strom.group import records as schema
from strom.group.consumer_state import MemberState
from strom.group.coordinator import GroupCoordinator
from strom.group.group import Member
from strom.group.join import JoinRequest
from strom.group.offset_store import OFFSETS_TOPIC
from strom.protocol.errors import ErrorCode
from strom.server.config import BrokerConfig
from tests.group.test_coordinator import RecordingStore, no_transaction_coordinator

T = uuid.UUID(int=7)
U = uuid.UUID(int=8)


def make(topics: dict[str, tuple[uuid.UUID, int]] | None = None, **config) -> GroupCoordinator:
    settings = {"group.initial.rebalance.delay.ms": "0", **{k: str(v) for k, v in config.items()}}
    infos = {OFFSETS_TOPIC: SimpleNamespace(topic_id=uuid.UUID(int=1), partition_count=50)}
    for name, (topic_id, count) in (topics or {"t": (T, 6)}).items():
        infos[name] = SimpleNamespace(topic_id=topic_id, partition_count=count)
    broker_config = BrokerConfig.from_mapping(settings)
    metadata, replicas = SimpleNamespace(topics=infos), SimpleNamespace(fenced=False)
    coordinator = GroupCoordinator(
        broker_config,
        metadata,
        replicas,
        verify_txn_partitions=no_transaction_coordinator,
        store=RecordingStore(replicas, metadata, broker_config),
    )
    coordinator.owned_partitions.update(range(50))
    return coordinator


def hb(
    c: GroupCoordinator,
    member: str,
    epoch: int,
    names=None,
    owned=None,
    regex=None,
    instance=None,
    assignor=None,
    group="g",
):
    return c.consumer.heartbeats.heartbeat(
        group,
        member,
        epoch,
        instance,
        None,
        30000 if epoch == 0 else -1,
        names,
        regex,
        assignor,
        {} if epoch == 0 and owned is None else owned,
        "client",
        "/127.0.0.1",
        1,
    )


def parts(result) -> set[int]:
    return set(result.assignment.get(T, ())) if result.assignment is not None else set()


def test_partitions_move_only_after_their_owner_revoked_them():
    c = make()

    async def scenario():
        a = await hb(c, "a", 0, names=["t"])
        assert (a.error_code, a.member_epoch, parts(a)) == (0, 1, set(range(6)))
        b = await hb(c, "b", 0, names=["t"])
        assert b.error_code == 0 and b.member_epoch == 2 and parts(b) == set()  # all still a's
        group = c.consumer.groups["g"]
        assert group.state == "Reconciling" and group.members["b"].state == MemberState.UNRELEASED_PARTITIONS
        a = await hb(c, "a", 1)  # told to give up b's target, still at epoch 1
        kept = parts(a)
        assert a.member_epoch == 1 and len(kept) == 3
        assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
        b = await hb(c, "b", 2)
        assert b.assignment is None and not group.members["b"].assigned  # nothing released yet
        a = await hb(c, "a", 1, owned={T: frozenset(range(6))})  # has not revoked yet: no progress
        assert a.member_epoch == 1
        a = await hb(c, "a", 1, owned={T: frozenset(kept)})  # revoked
        assert a.member_epoch == 2 and group.members["a"].state == MemberState.STABLE
        b = await hb(c, "b", 2)
        assert parts(b) == set(range(6)) - kept and group.state == "Stable"

    asyncio.run(scenario())


def test_leaving_member_partitions_go_to_the_others():
    c = make()

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        b = await hb(c, "b", 0, names=["t"])
        a = await hb(c, "a", 1)
        await hb(c, "a", 1, owned={T: frozenset(parts(a))})
        b = await hb(c, "b", 2)
        assert len(parts(b)) == 3
        left = await hb(c, "b", -1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        a = await hb(c, "a", 2)
        assert a.member_epoch == 3 and parts(a) == set(range(6))

    asyncio.run(scenario())


def test_fencing_errors():
    c = make()

    async def scenario():
        assert (await hb(c, "a", 5)).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await hb(c, "a", 0, names=["t"])
        assert (await hb(c, "a", 7)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
        assert (await hb(c, "x", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert (await hb(c, "", 0, names=["t"])).error_code == ErrorCode.INVALID_REQUEST
        assert (await hb(c, "b", 0, names=["t"], assignor="sticky")).error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
        assert (await hb(c, "b", 0, regex="(")).error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
        rejoined = await hb(c, "a", 0, names=["t"])  # a fenced member joins again from nothing
        assert rejoined.error_code == 0 and parts(rejoined) == set(range(6))

    asyncio.run(scenario())


def test_static_member_takes_over_its_predecessor_partitions():
    c = make()

    async def scenario():
        a = await hb(c, "a", 0, names=["t"], instance="i1")
        assert (await hb(c, "a2", 0, names=["t"], instance="i1")).error_code == ErrorCode.UNRELEASED_INSTANCE_ID
        left = await hb(c, "a", -2, instance="i1")
        assert left.member_epoch == -2 and "a" in c.consumer.groups["g"].members
        epoch = c.consumer.groups["g"].group_epoch
        a2 = await hb(c, "a2", 0, names=["t"], instance="i1")
        assert a2.error_code == 0 and a2.member_epoch == a.member_epoch and parts(a2) == set(range(6))
        assert c.consumer.groups["g"].group_epoch == epoch and "a" not in c.consumer.groups["g"].members

    asyncio.run(scenario())


def test_offset_commits_carry_the_member_epoch():
    c = make()

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        offsets = {("t", 0): (5, -1, "")}
        assert await c.offsets.commit_offsets("g", 1, "a", None, offsets) == {("t", 0): 0}
        assert await c.offsets.commit_offsets("g", 0, "a", None, offsets) == {("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
        assert await c.offsets.commit_offsets("g", 1, "zz", None, offsets) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert await c.offsets.commit_offsets("g", -1, "", None, offsets) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        assert c.offsets.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
        assert await c.offsets.delete_offsets("g", [("t", 0)]) == (0, {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC})
        assert c.consumer.validate_fetch("g", "a", 1) == 0 and c.consumer.validate_fetch("g", None, -1) == 0
        assert c.consumer.validate_fetch("g", "a", 0) == ErrorCode.STALE_MEMBER_EPOCH
        assert c.consumer.validate_fetch("g", "zz", 1) == ErrorCode.UNKNOWN_MEMBER_ID

    asyncio.run(scenario())


def test_regex_subscription_follows_topic_creation():
    c = make({"t": (T, 2)})

    async def scenario():
        a = await hb(c, "a", 0, regex="t|u.*")
        assert parts(a) == {0, 1}
        c.metadata.topics["u1"] = SimpleNamespace(topic_id=U, partition_count=1)
        a = await hb(c, "a", 1)
        assert a.member_epoch == 2 and a.assignment == {T: frozenset({0, 1}), U: frozenset({0})}

    asyncio.run(scenario())


def test_a_backtracking_regex_is_matched_in_linear_time_and_lookarounds_are_refused():
    # With a backtracking engine `(a+)+b` against this name takes longer than the universe has
    # left; RE2 (Kafka's RE2/J syntax) answers at once. pytest-timeout ends the test otherwise.
    long_name = "a" * 5000 + "c"
    c = make({"t": (T, 2), long_name: (U, 1)})

    async def scenario():
        a = await hb(c, "a", 0, regex="(a+)+b")
        assert a.error_code == 0 and a.assignment == {}
        b = await hb(c, "b", 0, regex="(?<=x)t", group="other")
        assert b.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION

    asyncio.run(scenario())


def test_conversion_of_empty_groups_and_of_live_groups_with_unreadable_metadata():
    """Empty groups convert; live ones migrate online (test_classic_members.py) unless their
    embedded consumer protocol cannot be read, as here."""
    c = make()

    async def scenario():
        classic = c.groups["cl"] = __import__("strom.group.group", fromlist=["Group"]).Group("cl", 0)
        classic.members["m"] = Member("m", None, "c", "h", 1000, 1000, "consumer", [("range", b"")])
        assert (await hb(c, "a", 0, names=["t"], group="cl")).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        await hb(c, "a", 0, names=["t"])
        joined = await c.join_group(
            JoinRequest("g", "", None, "c", "h", "consumer", [("range", b"")], 10000, 10000, False)
        )
        assert joined.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # an unreadable subscription
        await hb(c, "a", -1)
        assert c.consumer.groups["g"].state == "Empty"
        assert await c.consumer.before_classic_join("g") == 0 and "g" not in c.consumer.groups

    asyncio.run(scenario())


def test_records_reload_the_group():
    c = make()

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        await hb(c, "b", 0, names=["t"], instance="i")

    asyncio.run(scenario())
    before = c.consumer.groups["g"]
    reloaded = make()
    for batch in c.store.writes:
        for key, value in batch:
            decoded = schema.decode_key(key)
            assert isinstance(decoded, rec.ConsumerKey) and decoded.version in rec.KEY_VERSIONS
            reloaded.consumer.replay(0, decoded, value)
    after = reloaded.consumer.groups["g"]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.target == before.target and after.static_members == {"i": "b"}
    for member_id, member in before.members.items():
        again = after.members[member_id]
        assert (
            again.member_epoch,
            again.state,
            again.assigned,
            again.pending_revocation,
            again.subscribed_topic_names,
        ) == (
            member.member_epoch,
            member.state,
            member.assigned,
            member.pending_revocation,
            member.subscribed_topic_names,
        )


def test_record_layouts_are_kafkas():
    key = rec.encode_key(rec.ConsumerKey(rec.MEMBER_METADATA, "g", "m"))
    assert key == b"\x00\x05\x00\x01g\x00\x01m"
    assert rec.encode_epoch(3) == b"\x00\x00\x00\x00\x00\x03\x00"
    value = rec.encode_target({T: frozenset({1, 0})})
    assert value == b"\x00\x00" + b"\x02" + T.bytes + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x01" + b"\x00\x00"
    member = rec.MemberMetadata(None, None, "c", "/h", ["t"], None, 300000, "uniform")
    assert rec.decode_member(rec.encode_member(member)) == member


def test_a_member_without_heartbeats_is_removed_after_the_session_timeout():
    # a 1 s session against 50 ms heartbeats: only a stall of a whole second on a loaded machine
    # could expire "a" as well; the loop ends as soon as "b" is gone (bounded at 15 s)
    c = make(**{"group.consumer.session.timeout.ms": 1000, "group.consumer.heartbeat.interval.ms": 50})

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        b = await hb(c, "b", 0, names=["t"])

        async def heartbeat_a():
            await asyncio.sleep(0.05)
            a = c.consumer.groups["g"].members["a"]
            await hb(c, "a", a.member_epoch, owned={T: frozenset(a.assigned.get(T, ()))})

        deadline = asyncio.get_running_loop().time() + 15
        while "b" in c.consumer.groups["g"].members and asyncio.get_running_loop().time() < deadline:
            await heartbeat_a()  # a keeps heartbeating, b does not
        for _ in range(3):  # a reconciles to the whole topic once b is gone
            await heartbeat_a()
        group = c.consumer.groups["g"]
        assert list(group.members) == ["a"] and group.group_epoch > b.member_epoch
        assert c.store.tombstones()  # b's records are deleted
        a = group.members["a"]
        assert a.assigned == {T: frozenset(range(6))} and a.member_epoch == group.group_epoch

    asyncio.run(scenario())


def test_broker_configs_of_the_consumer_protocol():
    import pytest

    from strom.storage.log_config import ConfigError

    config = BrokerConfig.from_mapping({})
    assert (config.group_consumer_session_timeout_ms, config.group_consumer_heartbeat_interval_ms) == (45000, 5000)
    assert config.group_consumer_assignors == ("uniform", "range")
    with pytest.raises(ConfigError, match="group.consumer.assignors"):
        BrokerConfig.from_mapping({"group.consumer.assignors": "sticky"})
    with pytest.raises(ConfigError, match="group.consumer.heartbeat.interval.ms"):
        BrokerConfig.from_mapping({"group.consumer.heartbeat.interval.ms": "45000"})
    c = make(
        **{
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform",
            "group.consumer.max.size": 3,
        }
    )

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        await hb(c, "b", 0, names=["t"])
        assert {m: sorted(p[T]) for m, p in c.consumer.groups["g"].target.items()} == {"a": [0, 1, 2], "b": [3, 4, 5]}
        assert (await hb(c, "c", 0, names=["t"], assignor="uniform")).error_code == 0
        assert (await hb(c, "d", 0, names=["t"])).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED

    asyncio.run(scenario())


def test_delete_groups_refuses_a_live_consumer_group_and_deletes_an_empty_one():
    c = make()

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        assert await c.delete_groups(["g"]) == {"g": ErrorCode.NON_EMPTY_GROUP}
        await hb(c, "a", -1)
        assert await c.delete_groups(["g"]) == {"g": 0}
        assert "g" not in c.consumer.groups and "g" not in c.groups
        assert rec.ConsumerKey(rec.GROUP_METADATA, "g") in c.store.tombstones()
        assert (await hb(c, "a", 1)).error_code == ErrorCode.GROUP_ID_NOT_FOUND

    asyncio.run(scenario())


def _state(c: GroupCoordinator, group: str = "g") -> tuple:
    """What members and a reload would see of a group: epochs, target, and each member's records."""
    g = c.consumer.groups[group]
    members = {
        m.member_id: (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.pending_revocation)
        for m in g.members.values()
    }
    return g.group_epoch, g.assignment_epoch, dict(g.target), dict(g.static_members), members


def test_a_failed_write_leaves_the_group_as_it_was_and_the_retry_succeeds():
    c = make()

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        before = _state(c)
        a_timer = c.consumer.groups["g"].members["a"].session_timer
        c.store.error = ErrorCode.COORDINATOR_NOT_AVAILABLE  # what NOT_ENOUGH_REPLICAS becomes
        joined = await hb(c, "b", 0, names=["t"])
        assert (joined.error_code, joined.member_epoch, joined.assignment) == (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            -1,
            None,
        )
        assert _state(c) == before and c.consumer.groups["g"].state == "Stable"
        assert (await hb(c, "a", 1, owned={T: frozenset(range(6))})).error_code == 0  # nothing to write
        assert not c.consumer.groups["g"].members["a"].session_timer.cancelled() and a_timer.cancelled()
        left = await hb(c, "a", -1)
        assert left.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and _state(c) == before
        assert c.consumer.groups["g"].members["a"].session_timer is not None
        c.store.error = ErrorCode.NONE
        joined = await hb(c, "b", 0, names=["t"])
        assert (joined.error_code, joined.member_epoch) == (0, 2)
        a = await hb(c, "a", 1)
        assert len(parts(a)) == 3 and c.consumer.groups["g"].members["a"].state == MemberState.UNREVOKED_PARTITIONS

    asyncio.run(scenario())


def test_a_failed_write_of_a_revocation_ack_keeps_the_revocation_deadline():
    c = make()

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        await hb(c, "b", 0, names=["t"])
        kept = parts(await hb(c, "a", 1))
        member = c.consumer.groups["g"].members["a"]
        deadline = member.revocation_timer.when()
        before = _state(c)
        c.store.error = ErrorCode.NOT_COORDINATOR
        acked = await hb(c, "a", 1, owned={T: frozenset(kept)})
        assert acked.error_code == ErrorCode.NOT_COORDINATOR and _state(c) == before
        assert member.state == MemberState.UNREVOKED_PARTITIONS and member.revocation_timer.when() == deadline
        c.store.error = ErrorCode.NONE
        acked = await hb(c, "a", 1, owned={T: frozenset(kept)})
        assert acked.member_epoch == 2 and member.revocation_timer is None

    asyncio.run(scenario())


def test_a_failed_first_heartbeat_creates_no_group_and_a_failed_static_takeover_is_undone():
    c = make()

    async def scenario():
        c.store.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert (await hb(c, "a", 0, names=["t"])).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert "g" not in c.consumer.groups and "g" not in c.groups and not c.consumer.list_groups()
        c.store.error = ErrorCode.NONE
        await hb(c, "a", 0, names=["t"], instance="i1")
        await hb(c, "a", -2, instance="i1")
        before = _state(c)
        c.store.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        taken = await hb(c, "a2", 0, names=["t"], instance="i1")
        assert taken.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and _state(c) == before
        previous = c.consumer.groups["g"].members["a"]
        assert previous.session_timer is not None and not previous.session_timer.cancelled()
        c.store.error = ErrorCode.NONE
        taken = await hb(c, "a2", 0, names=["t"], instance="i1")
        assert taken.error_code == 0 and parts(taken) == set(range(6))
        assert list(c.consumer.groups["g"].members) == ["a2"] and previous.session_timer is None

    asyncio.run(scenario())


def test_an_expiry_that_cannot_be_written_is_retried():
    c = make(**{"group.consumer.session.timeout.ms": 100, "group.consumer.heartbeat.interval.ms": 50})

    async def scenario():
        await hb(c, "a", 0, names=["t"])
        c.store.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        await asyncio.sleep(0.3)  # the session ended; its removal failed
        assert list(c.consumer.groups["g"].members) == ["a"] and c.consumer.groups["g"].group_epoch == 1
        c.store.error = ErrorCode.NONE
        for _ in range(100):  # bounded: the retry comes after 0.5 s
            if not c.consumer.groups["g"].members:
                break
            await asyncio.sleep(0.05)
        assert not c.consumer.groups["g"].members and c.consumer.groups["g"].group_epoch == 2

    asyncio.run(scenario())
