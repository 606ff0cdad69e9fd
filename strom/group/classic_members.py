"""Classic members living inside a consumer group (Kafka 4), as in Kafka 4.0's GroupMetadataManager.

Their JoinGroup/SyncGroup/Heartbeat/LeaveGroup are translated: a JoinGroup is a heartbeat
carrying the subscription and the owned partitions (read from the ConsumerProtocolSubscription); it is answered at once, with the member epoch as the
generation, no leader and no member list, so that every classic member is a follower; its
SyncGroup gets the partitions the broker assigned it, written as a ConsumerProtocolAssignment.
A Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to move towards its target:
the group epoch passed its epoch, it has partitions to revoke, or partitions it waits for have
been released. A classic member has no revocation timer; it must rejoin within its rebalance
timeout after being told to (join timer) and sync within it after joining (sync timer), or be
fenced, as in Kafka. Classic JoinGroups are accepted by a live consumer group whatever the policy
(the policy governs only conversions), when their protocols match the group's classic members.

How a group gets into this state, and out of it, is migration.py's.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Protocol

from strom.group.consumer_assignment import ConsumerAssignment
from strom.group.consumer_records import ClassicMetadata, TopicPartitions
from strom.group.consumer_sessions import ConsumerSessions
from strom.group.consumer_state import (
    ConsumerGroup,
    ConsumerMember,
    HeartbeatResult,
    MemberState,
    cancel_classic_timer,
)
from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.join import JoinRequest, JoinResult, join_error
from strom.group.migration import PROTOCOL_TYPE
from strom.group.subscription import decode_subscription, encode_assignment, subscription_version
from strom.protocol.errors import ErrorCode


class ClassicJoin(Protocol):
    """The consumer group heartbeat a classic member's JoinGroup becomes (consumer_group.py)."""

    async def __call__(
        self,
        group: ConsumerGroup,
        member_id: str,
        unknown_member: bool,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        names: list[str],
        owned: TopicPartitions,
        client_id: str,
        client_host: str,
        classic: ClassicMetadata,
    ) -> HeartbeatResult: ...


class ClassicMembers:
    """The classic protocol spoken to a consumer group: ``classic_join`` takes a member's JoinGroup
    into the group, ``sessions`` times it out."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        assignment: ConsumerAssignment,
        sessions: ConsumerSessions,
        classic_join: ClassicJoin,
    ):
        self.config = config
        self.assignment = assignment
        self.sessions = sessions
        self.classic_join = classic_join

    def _supports(self, group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols."""
        if protocol_type != PROTOCOL_TYPE or not protocols:
            return False
        classics = [m.classic for m in group.members.values() if m.classic is not None]
        if not classics:
            return True
        names = {name for name, _ in protocols}
        return any(all(name in {n for n, _ in c.protocols} for c in classics) for name in names)

    async def join(self, group: ConsumerGroup, request: JoinRequest) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup."""
        member_id, instance_id, protocols = request.member_id, request.instance_id, request.protocols
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        if group.members.get(member_id) is None and len(group.members) >= self.config.group_consumer_max_size:
            return join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        if not self._supports(group, request.protocol_type, protocols):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if unknown and instance_id is None and request.require_known_member_id:
            return join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ValueError:
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        owned = self.assignment.by_id(subscription.owned)
        result = await self.classic_join(
            group,
            member_id,
            unknown,
            instance_id,
            subscription.rack_id,
            request.rebalance_timeout_ms,
            sorted(set(subscription.topics)),
            owned,
            request.client_id,
            request.client_host,
            ClassicMetadata(request.session_timeout_ms, tuple(protocols)),
        )
        if result.error_code:
            return join_error(result.error_code, member_id)
        member = group.members[member_id]
        cancel_classic_timer(member)
        self.sessions.schedule_session(group, member)
        self._schedule_classic_timer(group, member, "sync", "the member failed to sync within timeout.")
        assert member.classic is not None
        return JoinResult(
            ErrorCode.NONE,
            member.member_epoch,
            PROTOCOL_TYPE,
            member.classic.protocols[0][0],
            "",
            member_id,
            [],
        )

    def _member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[int, ConsumerMember | None]:
        """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            known = group.static_members.get(instance_id)
            member = group.members.get(known) if known else None
            if member is not None and member.member_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID, None
        if member is None or member.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        return ErrorCode.NONE, member

    def _must_rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        if member.member_epoch < group.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state == MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            waiting = any(
                group.owner_of(t, p, member.member_id) is not None
                for t, parts in target.items()
                for p in parts - member.assigned.get(t, frozenset())
            )
            return not waiting
        return False

    async def sync(
        self,
        group: ConsumerGroup,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> tuple[int, bytes, str | None, str | None]:
        """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment."""
        if not group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID, b"", None, None
        code, member = self._member(group, member_id, instance_id)
        if member is None:
            return code, b"", None, None
        assert member.classic is not None
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION, b"", None, None
        name = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b"", None, None
        if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timer(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS, b"", None, None
        cancel_classic_timer(member)
        self.sessions.schedule_session(group, member)
        version = subscription_version(member.classic.protocols[0][1])
        return (
            ErrorCode.NONE,
            encode_assignment(version, self.assignment.by_name(member.assigned)),
            protocol_type,
            protocol_name,
        )

    def heartbeat(self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None) -> int:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        code, member = self._member(group, member_id, instance_id)
        if member is None:
            return code
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.sessions.schedule_session(group, member)
        if self._must_rejoin(group, member):
            self._schedule_join_timer(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(self, group: ConsumerGroup, leaving: list[tuple[str, str | None]]) -> list[int]:
        """Kafka's classicGroupLeaveToConsumerGroup: each member's records go, the epoch moves on."""
        results: list[int] = []
        async with group.lock:
            for member_id, instance_id in leaving:
                if instance_id is None:
                    member = group.members.get(member_id)
                else:
                    known = group.static_members.get(instance_id)
                    member = group.members.get(known) if known else None
                    if member is not None and member_id and member.member_id != member_id:
                        results.append(ErrorCode.FENCED_INSTANCE_ID)
                        continue
                if member is None or member.classic is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                results.append(await self.sessions.remove(group, member, "left (LeaveGroup)"))
        return results

    # -- timers ------------------------------------------------------------------------------------
    def _schedule_join_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent: told to rejoin, it must within its
        rebalance timeout."""
        if member.classic_timer is None:
            self._schedule_classic_timer(
                group, member, "join", "the classic member failed to join within the rebalance timeout."
            )

    def _schedule_classic_timer(self, group: ConsumerGroup, member: ConsumerMember, kind: str, why: str) -> None:
        cancel_classic_timer(member)
        loop = asyncio.get_running_loop()
        member.classic_timer = loop.call_later(
            member.rebalance_timeout_ms / 1000, self.sessions.expire, group, member, kind, f"was fenced: {why}"
        )
