"""Online migration in-process: a classic group upgraded by a consumer-protocol member, its classic
members reconciled through JoinGroup/SyncGroup/Heartbeat inside the consumer group, the downgrade
when the last consumer-protocol member leaves, the policies, and the records that carry it all."""

from __future__ import annotations

import asyncio

from strom.group import consumer_records as rec
from strom.group import records as schema
from strom.group.consumer_state import MemberState, cancel_timers
from strom.group.group import GroupState
from strom.group.join import JoinRequest
from strom.group.rebalance import cancel_session
from strom.group.subscription import decode_assignment, decode_subscription, encode_assignment
from strom.protocol.errors import ErrorCode
from tests.group.test_consumer_group import T, hb, parts
from tests.group.test_consumer_group import make as make_coordinator


def make(**config):
    """A coordinator whose first classic rebalance waits 50 ms, so that the members join as one generation."""
    return make_coordinator(**{"group.initial.rebalance.delay.ms": 50, **config})


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1: topics, null user data, owned partitions."""
    out = b"\x00\x01" + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    out += b"\xff\xff\xff\xff" + len(owned or {}).to_bytes(4, "big")
    for topic, ps in (owned or {}).items():
        out += len(topic).to_bytes(2, "big") + topic.encode() + len(ps).to_bytes(4, "big")
        out += b"".join(p.to_bytes(4, "big") for p in ps)
    return out


async def classic_join(c, member_id: str, owned: dict[str, list[int]] | None = None, group: str = "g"):
    protocols = [("range", subscription(["t"], owned)), ("roundrobin", subscription(["t"], owned))]
    return await c.join_group(
        JoinRequest(group, member_id, None, "client", "/h", "consumer", protocols, 6000, 6000, False)
    )


async def classic_group(c, split: list[list[int]]):
    """A stable classic group "g" whose members m0, m1, ... hold ``split`` (the leader assigned it)."""
    joins = [asyncio.ensure_future(classic_join(c, "")) for _ in split]
    results = await asyncio.gather(*joins)
    ids = sorted(r.member_id for r in results)
    generation = results[0].generation
    leader = results[0].leader
    assignments = {m: encode_assignment(1, {"t": set(ps)}) for m, ps in zip(ids, split)}
    syncs = [
        c.sync_group("g", generation, m, None, "consumer", "range", assignments if m == leader else {}) for m in ids
    ]
    for code, *_ in await asyncio.gather(*syncs):
        assert code == ErrorCode.NONE
    assert c.groups["g"].state == GroupState.STABLE
    return ids, generation


def owned_by(c, member_id: str) -> set[int]:
    return set(c.consumer.groups["g"].members[member_id].assigned.get(T, ()))


def test_embedded_protocol_round_trips():
    sub = decode_subscription(subscription(["t", "u"], {"t": [1, 2]}))
    assert (sub.version, sub.topics, sub.owned) == (1, ["t", "u"], {"t": {1, 2}})
    data = encode_assignment(0, {"t": {2, 0}})
    partitions = b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02"  # [0, 2]
    assert data == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + partitions + b"\xff\xff\xff\xff"
    assert decode_assignment(data) == {"t": {0, 2}}


def test_classic_member_metadata_is_kafkas_tagged_field():
    member = rec.MemberMetadata(None, None, "c", "/h", ["t"], None, 300000, None)
    plain = rec.encode_member(member)
    member.classic = rec.ClassicMetadata(6000, (("range", b"\x01"),))
    tagged = rec.encode_member(member)
    # one tagged field: tag 0, size 16, presence byte, session timeout, [name, metadata, tags], tags
    assert tagged == plain[:-1] + b"\x01\x00\x10" + b"\x01\x00\x00\x17\x70\x02\x06range\x02\x01\x00\x00"
    assert rec.decode_member(tagged) == member and rec.decode_member(plain).classic is None


def test_a_consumer_member_upgrades_a_live_classic_group_and_classic_members_rejoin_to_move():
    c = make()

    async def scenario():
        (m0, m1), generation = await classic_group(c, [[0, 1, 2], [3, 4, 5]])
        new = await hb(c, "n", 0, names=["t"])
        assert new.error_code == 0 and parts(new) == set()  # every partition still has a classic owner
        group = c.consumer.groups["g"]
        assert new.member_epoch == group.group_epoch == generation + 1
        assert group.members[m0].classic is not None and owned_by(c, m0) == {0, 1, 2}
        assert c.groups["g"].is_empty and c.groups["g"].state == GroupState.EMPTY  # the offsets' holder
        written = [schema.decode_key(k) for k, _ in c.store.writes[-2]]
        assert written[0] == schema.GroupKey("g") and c.store.writes[-2][0][1] is None  # classic metadata gone
        # the classic members are told to rejoin; m0 rejoins (eagerly, owning nothing) and must give up one
        assert c.heartbeat("g", generation, m0, None) == ErrorCode.REBALANCE_IN_PROGRESS
        joined = await classic_join(c, m0, {})
        assert (joined.error_code, joined.generation, joined.protocol, joined.leader) == (0, generation, "range", "")
        assert group.members[m0].state == MemberState.UNREVOKED_PARTITIONS
        code, data, _, _ = await c.sync_group("g", generation, m0, None, "consumer", "range", {})
        assert code == 0 and len(decode_assignment(data)["t"]) == 2  # what it keeps
        assert c.heartbeat("g", generation, m0, None) == ErrorCode.REBALANCE_IN_PROGRESS
        kept = sorted(decode_assignment(data)["t"])
        joined = await classic_join(c, m0, {"t": kept})  # revoked: now at the new epoch
        assert joined.generation == generation + 1 and group.members[m0].state == MemberState.STABLE
        assert c.heartbeat("g", generation + 1, m0, None) == ErrorCode.NONE
        assert c.heartbeat("g", generation, m0, None) == ErrorCode.ILLEGAL_GENERATION
        new = await hb(c, "n", new.member_epoch)
        assert len(parts(new)) == 1  # m0's released partition
        # m1 does the same; then n owns 2 and no partition ever had two owners
        await classic_join(c, m1, {})
        _, data, _, _ = await c.sync_group("g", generation, m1, None, "consumer", "range", {})
        await classic_join(c, m1, {"t": sorted(decode_assignment(data)["t"])})
        new = await hb(c, "n", new.member_epoch)
        assert len(parts(new)) == 2 and group.state == "Stable"
        owners = [owned_by(c, m0), owned_by(c, m1), parts(new)]
        assert sorted(map(len, owners)) == [2, 2, 2] and set().union(*owners) == set(range(6))
        # a classic member commits with its generation, which is its member epoch
        assert c.consumer.validate_commit("g", m0, generation + 1) == ErrorCode.NONE
        assert c.consumer.validate_commit("g", m0, generation) == ErrorCode.ILLEGAL_GENERATION
        for member in group.members.values():
            cancel_timers(member)

    asyncio.run(scenario())


def test_the_last_consumer_member_leaving_downgrades_the_group():
    c = make()

    async def scenario():
        (m0, m1), generation = await classic_group(c, [[0, 1, 2], [3, 4, 5]])
        new = await hb(c, "n", 0, names=["t"])
        group_epoch = c.consumer.groups["g"].group_epoch
        left = await hb(c, "n", -1)
        assert left.error_code == 0 and left.member_epoch == -1
        assert "g" not in c.consumer.groups
        classic = c.groups["g"]
        assert classic.generation == group_epoch and set(classic.members) == {m0, m1}
        assert classic.state == GroupState.PREPARING_REBALANCE and classic.protocol == "range"
        # each member's target (of the three-member group: the rebalance that follows hands out the
        # leaver's partitions) is its assignment, written in its subscription's version
        targets = {m: decode_assignment(classic.members[m].assignment)["t"] for m in (m0, m1)}
        assert sorted(map(len, targets.values())) == [2, 2] and not targets[m0] & targets[m1]
        last = c.store.writes[-1]
        assert last[-1][0] == schema.encode_key(schema.GroupKey("g")) and last[-1][1] is not None
        assert {schema.decode_key(k).version for k, v in last if v is None} == set(range(3, 9))
        # the members rejoin the classic way and get a new generation
        assert c.heartbeat("g", generation, m0, None) == ErrorCode.REBALANCE_IN_PROGRESS
        rejoined = await asyncio.gather(classic_join(c, m0), classic_join(c, m1))
        assert {r.generation for r in rejoined} == {group_epoch + 1} and rejoined[0].leader in (m0, m1)
        assert new.error_code == 0
        for member in classic.members.values():
            cancel_session(member)
        if classic.join_timer:
            classic.join_timer.cancel()

    asyncio.run(scenario())


def test_policies_decide_upgrade_and_downgrade():
    refused = make(**{"group.consumer.migration.policy": "downgrade"})

    async def no_upgrade():
        await classic_group(refused, [[0, 1, 2, 3, 4, 5]])
        result = await hb(refused, "n", 0, names=["t"])
        assert (result.error_code, result.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Group g is not a consumer group.",
        )
        assert "g" not in refused.consumer.groups and len(refused.groups["g"].members) == 1
        for member in refused.groups["g"].members.values():
            cancel_session(member)

    asyncio.run(no_upgrade())
    kept = make(**{"group.consumer.migration.policy": "upgrade"})

    async def no_downgrade():
        (m0,), _ = await classic_group(kept, [[0, 1, 2, 3, 4, 5]])
        await hb(kept, "n", 0, names=["t"])
        await hb(kept, "n", -1)
        group = kept.consumer.groups["g"]  # still a consumer group, of one classic member
        assert set(group.members) == {m0} and group.members[m0].classic is not None
        for member in group.members.values():
            cancel_timers(member)

    asyncio.run(no_downgrade())


def test_a_classic_member_joins_a_live_consumer_group_whatever_the_policy():
    c = make(**{"group.consumer.migration.policy": "disabled"})

    async def scenario():
        first = await hb(c, "n", 0, names=["t"])
        joined = await c.join_group(
            JoinRequest("g", "", None, "client", "/h", "consumer", [("range", subscription(["t"]))], 6000, 6000, True)
        )
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = await classic_join(c, joined.member_id)
        assert joined.error_code == 0 and joined.members == [] and joined.leader == ""
        group = c.consumer.groups["g"]
        assert group.members[joined.member_id].classic is not None and group.group_epoch == first.member_epoch + 1
        other = await c.join_group(
            JoinRequest("g", "x", None, "c", "/h", "consumer", [("sticky", subscription(["t"]))], 6000, 6000, False)
        )
        assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL  # no protocol in common with "range"
        assert await c.leave("g", [(joined.member_id, None)]) == (0, [0])
        assert await c.leave("g", [("n", None)]) == (0, [ErrorCode.UNKNOWN_MEMBER_ID])  # not a classic member
        for member in group.members.values():
            cancel_timers(member)

    asyncio.run(scenario())


def test_records_of_an_upgraded_group_reload_its_classic_members():
    c = make()

    async def scenario():
        await classic_group(c, [[0, 1, 2], [3, 4, 5]])
        await hb(c, "n", 0, names=["t"])
        for member in c.consumer.groups["g"].members.values():
            cancel_timers(member)

    asyncio.run(scenario())
    before = c.consumer.groups["g"]
    reloaded = make()
    for batch in c.store.writes:
        for key, value in batch:
            decoded = schema.decode_key(key)
            if isinstance(decoded, rec.ConsumerKey):
                reloaded.consumer.replay(0, decoded, value)
    after = reloaded.consumer.groups["g"]
    assert {m: v.classic for m, v in after.members.items()} == {m: v.classic for m, v in before.members.items()}
    assert {m: v.assigned for m, v in after.members.items()} == {m: v.assigned for m, v in before.members.items()}


def test_a_classic_group_of_another_protocol_type_is_not_upgraded():
    c = make()

    async def scenario():
        joined = await c.join_group(
            JoinRequest("g", "", None, "client", "/h", "connect", [("v1", b"x")], 6000, 6000, False)
        )
        assert joined.error_code == 0
        result = await hb(c, "n", 0, names=["t"])
        assert (result.error_code, result.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Group g is not a consumer group.",
        )
        assert "g" not in c.consumer.groups and joined.member_id in c.groups["g"].members
        for member in c.groups["g"].members.values():
            cancel_session(member)
        if c.groups["g"].join_timer:
            c.groups["g"].join_timer.cancel()

    asyncio.run(scenario())
