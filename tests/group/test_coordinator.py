"""The group coordinator in-process, with a recording offset store and a fake wall clock.

Offset expiry (offsets.retention.minutes) is tested here rather than against a broker process:
the real wait is minutes long. The join/sync tests drive the classic protocol directly.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from strom.group import group as group_module
from strom.group import offset_commits as offsets_module
from strom.group import records as schema
from strom.group.coordinator import GroupCoordinator
from strom.group.group import GroupState
from strom.group.join import JoinRequest
from strom.group.offset_store import OFFSETS_TOPIC, OffsetStore, StoredBatch
from strom.group.rebalance import cancel_session
from strom.protocol.errors import ErrorCode
from strom.server.config import BrokerConfig

MINUTE = 60_000
T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = T0):
        self.now_ms = now_ms

    def time(self) -> float:
        return self.now_ms / 1000

    def advance(self, ms: int) -> None:
        self.now_ms += ms


async def no_transaction_coordinator(transactional_id, producer_id, producer_epoch, partitions):
    raise AssertionError("these tests verify no transaction with a transaction coordinator")


class RecordingStore(OffsetStore):
    """Remembers every write (key/value bytes) instead of appending to __consumer_offsets."""

    def __init__(self, replicas, metadata, config):
        super().__init__(replicas, metadata, config)
        self.writes: list[list[tuple[bytes, bytes | None]]] = []
        self.error = ErrorCode.NONE
        self.before_write = None  # an async hook that runs while a write is "in flight"

    async def write(self, partition, entries, *, producer_id=-1, producer_epoch=-1, on_append=None):
        entries = list(entries)
        if not self.error and on_append is not None:
            on_append(sum(len(batch) for batch in self.writes))  # the offset the batch would get
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            await hook()
        if not self.error:
            self.writes.append(entries)
        return self.error

    def tombstones(self) -> list:
        return [schema.decode_key(key) for batch in self.writes for key, value in batch if value is None]


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(offsets_module, "wall_ms", lambda: fake.now_ms)  # the broker's wall clock (strom.clock)
    monkeypatch.setattr(group_module, "wall_ms", lambda: fake.now_ms)
    return fake


def make_coordinator(**config) -> GroupCoordinator:
    settings = {"offsets.retention.minutes": "10", "group.initial.rebalance.delay.ms": "0"}
    settings.update({key: str(value) for key, value in config.items()})
    broker_config = BrokerConfig.from_mapping(settings)
    metadata = SimpleNamespace(topics={OFFSETS_TOPIC: SimpleNamespace(partition_count=50)})
    replicas = SimpleNamespace(fenced=False)  # the replica manager; fenced: cut off from ZooKeeper
    coordinator = GroupCoordinator(
        broker_config,
        metadata,
        replicas,
        verify_txn_partitions=no_transaction_coordinator,
        store=RecordingStore(replicas, metadata, broker_config),
    )
    coordinator.owned_partitions.update(range(50))
    return coordinator


def run(coro):
    return asyncio.run(coro)


async def commit(coordinator, group_id, offsets: dict[tuple[str, int], int], generation=-1, member_id=""):
    return await coordinator.offsets.commit_offsets(
        group_id, generation, member_id, None, {tp: (offset, -1, "") for tp, offset in offsets.items()}
    )


# -- offset expiry --------------------------------------------------------------------------------


def test_offsets_of_an_empty_group_expire_after_the_retention(clock):
    coordinator = make_coordinator()

    async def scenario():
        assert await commit(coordinator, "g", {("t", 0): 5, ("t", 1): 7}) == {("t", 0): 0, ("t", 1): 0}
        clock.advance(10 * MINUTE - 1)
        assert await coordinator.offsets.expire_offsets() == 0
        assert coordinator.offsets.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
        clock.advance(1)
        assert await coordinator.offsets.expire_offsets() == 2

    run(scenario())
    assert coordinator.offsets.fetch_offsets("g", [("t", 0), ("t", 1)]) == (
        ErrorCode.NONE,
        {("t", 0): None, ("t", 1): None},
    )
    assert "g" not in coordinator.groups and coordinator.list_groups() == []
    assert set(coordinator.store.tombstones()) == {
        schema.OffsetKey("g", "t", 0),
        schema.OffsetKey("g", "t", 1),
        schema.GroupKey("g"),
    }


def test_retention_counts_from_when_the_group_became_empty(clock):
    coordinator = make_coordinator()

    async def scenario():
        await commit(coordinator, "g", {("t", 0): 1})
        group = coordinator.groups["g"]
        clock.advance(30 * MINUTE)
        group.transition(GroupState.EMPTY)  # e.g. its last member left only now
        clock.advance(10 * MINUTE - 1)
        assert await coordinator.offsets.expire_offsets() == 0
        clock.advance(1)
        assert await coordinator.offsets.expire_offsets() == 1

    run(scenario())


def test_only_offsets_older_than_the_retention_expire(clock):
    coordinator = make_coordinator()

    async def scenario():
        await commit(coordinator, "g", {("t", 0): 1})
        clock.advance(5 * MINUTE)
        await commit(coordinator, "g", {("t", 1): 2})
        clock.advance(5 * MINUTE)
        assert await coordinator.offsets.expire_offsets() == 1
        assert schema.GroupKey("g") not in coordinator.store.tombstones()  # it still has an offset
        assert coordinator.offsets.fetch_offsets("g", None)[1].keys() == {("t", 1)}
        clock.advance(5 * MINUTE)
        assert await coordinator.offsets.expire_offsets() == 1
        assert "g" not in coordinator.groups

    run(scenario())


def test_a_failed_tombstone_write_keeps_the_offsets(clock):
    coordinator = make_coordinator()

    async def scenario():
        await commit(coordinator, "g", {("t", 0): 1})
        clock.advance(11 * MINUTE)
        coordinator.store.error = ErrorCode.NOT_COORDINATOR
        assert await coordinator.offsets.expire_offsets() == 0
        assert coordinator.offsets.fetch_offsets("g", None)[1][("t", 0)].offset == 1

    run(scenario())


def test_an_offset_committed_again_during_expiry_survives(clock):
    coordinator = make_coordinator()

    async def scenario():
        await commit(coordinator, "g", {("t", 0): 1})
        clock.advance(11 * MINUTE)

        async def recommit():
            coordinator.store.before_write = None
            await commit(coordinator, "g", {("t", 0): 9})

        coordinator.store.before_write = recommit
        await coordinator.offsets.expire_offsets()
        assert coordinator.offsets.fetch_offsets("g", None)[1][("t", 0)].offset == 9

    run(scenario())


def test_an_empty_group_without_offsets_is_removed(clock):
    coordinator = make_coordinator()

    async def scenario():
        member, generation = await join_and_sync(coordinator, "g", assignment=b"a")
        assert coordinator.classic.leave_group("g", [(member, None)]) == (ErrorCode.NONE, [ErrorCode.NONE])
        await asyncio.sleep(0.05)  # the rebalance with no members left completes on the loop
        assert coordinator.groups["g"].state == GroupState.EMPTY
        clock.advance(6_000)
        assert await coordinator.offsets.expire_offsets() == 0
        assert "g" not in coordinator.groups
        assert schema.GroupKey("g") in coordinator.store.tombstones()

    run(scenario())


def test_a_stable_group_expires_offsets_of_topics_it_no_longer_reads(clock):
    coordinator = make_coordinator()

    async def scenario():
        member, generation = await join_and_sync(coordinator, "g", topics=["reads"])
        await commit(coordinator, "g", {("reads", 0): 3, ("old", 0): 4}, generation, member)
        clock.advance(10 * MINUTE)
        assert await coordinator.offsets.expire_offsets() == 1
        assert coordinator.offsets.fetch_offsets("g", None)[1].keys() == {("reads", 0)}
        assert coordinator.groups["g"].state == GroupState.STABLE
        assert schema.GroupKey("g") not in coordinator.store.tombstones()
        coordinator.classic.leave_group("g", [(member, None)])

    run(scenario())


# -- group ids ------------------------------------------------------------------------------------


def test_group_ids_are_checked_before_anything_is_stored():
    coordinator = make_coordinator()
    assert coordinator.coordinator_error("") == ErrorCode.INVALID_GROUP_ID
    assert coordinator.coordinator_error("x" * 32767) == ErrorCode.NONE
    assert coordinator.coordinator_error("x" * 32768) == ErrorCode.INVALID_GROUP_ID
    assert coordinator.coordinator_error("€" * 10922) == ErrorCode.NONE  # 32766 bytes
    assert coordinator.coordinator_error("€" * 10923) == ErrorCode.INVALID_GROUP_ID  # 32769 bytes
    coordinator.owned_partitions.discard(schema.partition_for_group("my-group", 50))
    assert coordinator.coordinator_error("my-group") == ErrorCode.NOT_COORDINATOR
    result = run(commit(coordinator, "", {("t", 0): 1}))
    assert result == {("t", 0): ErrorCode.INVALID_GROUP_ID} and coordinator.store.writes == []


def test_a_huge_client_id_still_gives_a_storable_member_id():
    coordinator = make_coordinator()

    request = JoinRequest(
        "g", "", None, "c" * 40_000, "/127.0.0.1", "consumer", [("range", subscription(["t"]))], 6000, 6000, False
    )

    async def scenario():
        return await coordinator.join_group(request)

    result = run(scenario())
    assert result.error_code == ErrorCode.NONE
    assert len(result.member_id.encode()) <= 32767 and result.member_id.startswith("ccc")


# -- the classic protocol ---------------------------------------------------------------------------


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, [topics], user data (null)."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return out + b"\xff\xff\xff\xff"


async def join(coordinator, group_id, member_id="", instance_id=None, topics=("t",), protocol="range"):
    return await coordinator.join_group(
        JoinRequest(
            group_id,
            member_id,
            instance_id,
            "client",
            "/127.0.0.1",
            "consumer",
            [(protocol, subscription(list(topics)))],
            6000,
            6000,
            True,
        )
    )


async def join_and_sync(coordinator, group_id, topics=("t",), assignment=b"x"):
    first = await join(coordinator, group_id, topics=topics)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED  # KIP-394
    joined = await join(coordinator, group_id, first.member_id, topics=topics)
    assert joined.error_code == ErrorCode.NONE and joined.leader == joined.member_id
    code, got, _, _ = await coordinator.sync_group(
        group_id, joined.generation, joined.member_id, None, "consumer", "range", {joined.member_id: assignment}
    )
    assert (code, got) == (ErrorCode.NONE, assignment)
    return joined.member_id, joined.generation


def test_two_members_rebalance_and_receive_the_leaders_assignment():
    coordinator = make_coordinator()

    async def scenario():
        a, generation = await join_and_sync(coordinator, "g", assignment=b"all")
        assert coordinator.heartbeat("g", generation, a, None) == ErrorCode.NONE
        pending = await join(coordinator, "g")
        assert pending.error_code == ErrorCode.MEMBER_ID_REQUIRED
        b_join = asyncio.ensure_future(join(coordinator, "g", pending.member_id))
        await asyncio.sleep(0)
        assert coordinator.groups["g"].state == GroupState.PREPARING_REBALANCE
        assert coordinator.heartbeat("g", generation, a, None) == ErrorCode.REBALANCE_IN_PROGRESS
        a_rejoined = await join(coordinator, "g", a)
        b_joined = await b_join
        assert a_rejoined.generation == b_joined.generation == generation + 1
        assert a_rejoined.leader == a and len(a_rejoined.members) == 2 and b_joined.members == []
        b_sync = asyncio.ensure_future(
            coordinator.sync_group("g", b_joined.generation, b_joined.member_id, None, None, None, {})
        )
        a_sync = await coordinator.sync_group(
            "g", a_rejoined.generation, a, None, None, None, {a: b"first half", b_joined.member_id: b"second half"}
        )
        assert a_sync[:2] == (ErrorCode.NONE, b"first half")
        assert (await b_sync)[:2] == (ErrorCode.NONE, b"second half")
        assert coordinator.heartbeat("g", generation, a, None) == ErrorCode.ILLEGAL_GENERATION
        assert coordinator.groups["g"].state == GroupState.STABLE
        coordinator.classic.leave_group("g", [(a, None), (b_joined.member_id, None)])

    run(scenario())


def test_members_joining_during_the_initial_delay_form_one_generation():
    """Kafka's InitialDelayedJoin: the first rebalance of an empty group waits for the members
    that come within group.initial.rebalance.delay.ms; a second member's join must not end the
    wait (it did: each join restarted the rebalance, so a group of ten rebalanced several times)."""
    coordinator = make_coordinator(**{"group.initial.rebalance.delay.ms": 1000})

    async def scenario():
        ids = [(await join(coordinator, "g")).member_id for _ in range(2)]  # KIP-394: ids first
        joins = [asyncio.ensure_future(join(coordinator, "g", member_id)) for member_id in ids]
        await asyncio.sleep(0)  # both have joined: nothing pending, a join could complete here
        ids.append((await join(coordinator, "g")).member_id)  # a third comes within the delay
        joins.append(asyncio.ensure_future(join(coordinator, "g", ids[-1])))
        results = await asyncio.wait_for(asyncio.gather(*joins), 10)
        assert [r.error_code for r in results] == [ErrorCode.NONE] * 3
        assert {r.generation for r in results} == {1}
        assert sorted(len(r.members) for r in results) == [0, 0, 3]
        coordinator.classic.leave_group("g", [(member_id, None) for member_id in ids])

    run(scenario())


def test_a_static_member_rejoining_keeps_generation_and_assignment():
    coordinator = make_coordinator()

    async def scenario():
        first = await join(coordinator, "g", instance_id="i-1")
        assert first.error_code == ErrorCode.NONE  # static members skip MEMBER_ID_REQUIRED
        await coordinator.sync_group(
            "g", first.generation, first.member_id, "i-1", None, None, {first.member_id: b"mine"}
        )
        again = await join(coordinator, "g", instance_id="i-1")  # a restarted process: no member id
        assert again.error_code == ErrorCode.NONE and again.generation == first.generation
        assert again.member_id != first.member_id
        code, assignment, _, _ = await coordinator.sync_group(
            "g", again.generation, again.member_id, "i-1", None, None, {}
        )
        assert (code, assignment) == (ErrorCode.NONE, b"mine")
        # the old incarnation is fenced
        assert coordinator.heartbeat("g", first.generation, first.member_id, "i-1") == ErrorCode.FENCED_INSTANCE_ID
        assert coordinator.groups["g"].state == GroupState.STABLE
        coordinator.classic.leave_group("g", [("", "i-1")])

    run(scenario())


# -- loading from __consumer_offsets ------------------------------------------------------------------


def test_loading_replays_records_with_tombstones_and_keeps_state_timestamps(monkeypatch, clock):
    coordinator = make_coordinator()
    empty_since = T0 - 3 * MINUTE
    member = schema.MemberRecord("m-1", "i-1", "client", "/10.0.0.1", 6000, 6000, subscription(["t"]), b"a")
    records = [
        (schema.OffsetKey("g", "t", 0), schema.encode_offset_value(schema.OffsetValue(3, 1, "", T0 - MINUTE))),
        (schema.OffsetKey("g", "t", 1), schema.encode_offset_value(schema.OffsetValue(4, 1, "", T0 - MINUTE))),
        (schema.OffsetKey("g", "t", 1), None),
        (schema.GroupKey("g"), schema.encode_group_value(schema.GroupValue("consumer", 4, None, None, empty_since))),
        (
            schema.GroupKey("live"),
            schema.encode_group_value(schema.GroupValue("consumer", 2, "range", "m-1", T0 - MINUTE, [member])),
        ),
        (schema.OffsetKey("gone", "t", 0), schema.encode_offset_value(schema.OffsetValue(1))),
        (schema.GroupKey("gone"), None),
    ]
    batches = [StoredBatch(offset, -1, records=[record]) for offset, record in enumerate(records)]
    monkeypatch.setattr(OffsetStore, "replay", staticmethod(lambda partition: iter(batches)))

    async def scenario():
        coordinator.owned_partitions.clear()
        coordinator.on_leadership_change(SimpleNamespace(topic=OFFSETS_TOPIC, index=7), True)
        for group in coordinator.groups.values():  # no timers left behind
            for m in group.members.values():
                cancel_session(m)

    run(scenario())
    # a group tombstone removes the group's metadata only; its offsets are records of their own
    # (as Kafka: DeleteGroups tombstones them first; an online upgrade keeps them)
    assert set(coordinator.groups) == {"g", "live", "gone"}
    gone = coordinator.groups["gone"]
    assert gone.is_empty and {tp: c.offset for tp, c in gone.offsets.items()} == {("t", 0): 1}
    g = coordinator.groups["g"]
    assert g.state == GroupState.EMPTY and g.generation == 4 and g.state_timestamp == empty_since
    assert {tp: c.offset for tp, c in g.offsets.items()} == {("t", 0): 3}
    live = coordinator.groups["live"]
    assert live.state == GroupState.STABLE and live.leader_id == "m-1" and live.static_members == {"i-1": "m-1"}
    assert live.members["m-1"].assignment == b"a" and live.members["m-1"].client_host == "/10.0.0.1"


def test_a_static_rejoin_that_cannot_be_stored_is_an_error():
    coordinator = make_coordinator()

    async def scenario():
        first = await join(coordinator, "g", instance_id="i-1")
        await coordinator.sync_group(
            "g", first.generation, first.member_id, "i-1", None, None, {first.member_id: b"mine"}
        )
        coordinator.store.error = ErrorCode.NOT_COORDINATOR
        again = await join(coordinator, "g", instance_id="i-1")
        assert again.error_code == ErrorCode.NOT_COORDINATOR  # the client finds the coordinator and retries
        coordinator.store.error = ErrorCode.NONE
        retry = await join(coordinator, "g", again.member_id, instance_id="i-1")
        assert retry.error_code == ErrorCode.NONE and retry.member_id == again.member_id  # (a leader rejoining
        # a stable group makes it rebalance, as in Kafka, so the generation may move on)
        coordinator.classic.leave_group("g", [("", "i-1")])

    run(scenario())


def test_list_groups_filters_states_case_insensitively(clock):
    coordinator = make_coordinator()

    async def scenario():
        await commit(coordinator, "idle", {("t", 0): 1})
        member, _ = await join_and_sync(coordinator, "busy")
        assert [g.group_id for g in coordinator.list_groups({"Stable"})] == ["busy"]
        assert [g.group_id for g in coordinator.list_groups({"empty"})] == ["idle"]
        assert sorted(g.group_id for g in coordinator.list_groups(set())) == ["busy", "idle"]
        coordinator.classic.leave_group("busy", [(member, None)])

    run(scenario())


# -- transactional offsets in __consumer_offsets -------------------------------------------------------


def offset_record(group: str, topic: str, partition: int, offset: int | None, timestamp: int = T0):
    value = None if offset is None else schema.encode_offset_value(schema.OffsetValue(offset, -1, "", timestamp))
    return schema.OffsetKey(group, topic, partition), value


def load(monkeypatch, coordinator, batches, index=7) -> None:
    monkeypatch.setattr(OffsetStore, "replay", staticmethod(lambda partition: iter(batches)))
    coordinator.owned_partitions.clear()
    coordinator.on_leadership_change(SimpleNamespace(topic=OFFSETS_TOPIC, index=index), True)
    coordinator.owned_partitions.update(range(50))  # whatever partition the test's group ids hash to


def committed_offsets(coordinator, group_id) -> dict:
    return {tp: c.offset for tp, c in coordinator.offsets.fetch_offsets(group_id, None)[1].items()}


def test_loading_settles_transactional_offsets_at_their_markers(monkeypatch, clock):
    coordinator = make_coordinator()
    batches = [
        StoredBatch(0, -1, records=[offset_record("g", "t", p, 1) for p in range(4)]),
        StoredBatch(1, 7, records=[offset_record("g", "t", 0, 10), offset_record("g", "t", 1, 10)]),
        StoredBatch(3, -1, records=[offset_record("g", "t", 1, 5)]),  # after producer 7's record: it stays
        StoredBatch(4, 7, marker=True),
        StoredBatch(5, 8, records=[offset_record("g", "t", 2, 20)]),
        StoredBatch(6, 8, marker=False),
        StoredBatch(7, 9, records=[offset_record("g", "t", 3, 30), offset_record("h", "t", 0, 31)]),
        StoredBatch(9, 10, records=[offset_record("g", "t", 2, 40)]),
        StoredBatch(10, -1, records=[offset_record("g", "t", 2, None)]),  # deletes producer 10's pending offset too
        StoredBatch(11, 10, marker=True),
    ]
    load(monkeypatch, coordinator, batches)
    assert committed_offsets(coordinator, "g") == {("t", 0): 10, ("t", 1): 5, ("t", 3): 1}
    assert committed_offsets(coordinator, "h") == {}  # a group known only from an open transaction
    assert coordinator.offsets.unstable_offsets("g", [("t", p) for p in range(4)]) == {("t", 3)}
    assert coordinator.offsets.unstable_offsets("h", [("t", 0)]) == {("t", 0)}
    assert coordinator.offsets.unstable_offsets("g", None) == {("t", 3)}  # only partitions with a committed offset

    coordinator.offsets.complete_txn(7, 9, commit=True)  # producer 9's marker, written after the load
    assert committed_offsets(coordinator, "g") == {("t", 0): 10, ("t", 1): 5, ("t", 3): 30}
    assert committed_offsets(coordinator, "h") == {("t", 0): 31}
    assert (
        coordinator.offsets.unstable_offsets("g", None) == set()
        and coordinator.offsets.unstable_offsets("h", None) == set()
    )


def test_an_abort_marker_after_loading_drops_the_pending_offsets(monkeypatch, clock):
    coordinator = make_coordinator()
    load(
        monkeypatch,
        coordinator,
        [
            StoredBatch(0, -1, records=[offset_record("g", "t", 0, 1)]),
            StoredBatch(1, 4, records=[offset_record("g", "t", 0, 2)]),
        ],
    )
    coordinator.offsets.complete_txn(8, 4, commit=True)  # another partition's marker: not this group's
    assert coordinator.offsets.unstable_offsets("g", [("t", 0)]) == {("t", 0)}
    coordinator.offsets.complete_txn(7, 4, commit=False)
    assert committed_offsets(coordinator, "g") == {("t", 0): 1}
    assert coordinator.offsets.unstable_offsets("g", [("t", 0)]) == set()


def test_offsets_and_groups_of_open_transactions_do_not_expire(monkeypatch, clock):
    coordinator = make_coordinator()
    old = T0 - 60 * MINUTE
    load(
        monkeypatch,
        coordinator,
        [
            StoredBatch(0, -1, records=[offset_record("g", "t", 0, 1, old), offset_record("g", "t", 1, 1, old)]),
            StoredBatch(
                2, 5, records=[offset_record("g", "t", 0, 2, old), offset_record("pending-only", "t", 0, 3, old)]
            ),
        ],
    )

    async def scenario():
        clock.advance(11 * MINUTE)
        # t-1 expires; t-0 would take producer 5's pending offset with it; both groups stay
        assert await coordinator.offsets.expire_offsets() == 1
        assert committed_offsets(coordinator, "g") == {("t", 0): 1}
        assert {"g", "pending-only"} <= set(coordinator.groups)
        coordinator.offsets.complete_txn(7, 5, commit=True)
        assert committed_offsets(coordinator, "pending-only") == {("t", 0): 3}

    run(scenario())
    assert schema.GroupKey("g") not in coordinator.store.tombstones()
    assert coordinator.store.tombstones() == [schema.OffsetKey("g", "t", 1)]


def test_a_broker_fenced_from_zookeeper_stops_answering_as_coordinator():
    """Another broker may lead the group's offsets partition by now and take its commits: the
    fenced one answers NOT_COORDINATOR rather than offsets from a cache that may be stale (found
    by the chaos campaign's group checker: committed offsets read back going backwards)."""
    c = make_coordinator()
    assert c.offsets.fetch_offsets("g", None)[0] == ErrorCode.NONE
    c.replicas.fenced = True
    assert c.coordinator_error("g") == ErrorCode.NOT_COORDINATOR
    assert c.offsets.fetch_offsets("g", None)[0] == ErrorCode.NOT_COORDINATOR
    c.replicas.fenced = False
    assert c.offsets.fetch_offsets("g", None)[0] == ErrorCode.NONE
