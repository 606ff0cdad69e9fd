"""Online migration between classic and consumer groups (Kafka 4's ``group.consumer.migration.policy``),
and classic members living inside a consumer group.

As in Kafka 4.0's GroupMetadataManager:

- **Upgrade.** A ``group.protocol=consumer`` member's first heartbeat to a live classic group
  (protocol type ``consumer``) turns it into a consumer group when the policy allows upgrades
  (``bidirectional``, ``upgrade``): every classic member becomes a consumer-group member at the
  classic generation as its epoch, keeping its last assignment as current and target assignment,
  and the group epoch is that generation. The classic GroupMetadata record is tombstoned and the
  consumer group's records written in one batch. Members in the middle of a classic rebalance
  are told REBALANCE_IN_PROGRESS and rejoin the new group. With upgrades disabled the member gets
  GROUP_ID_NOT_FOUND ("Group g is not a consumer group"), as Kafka answers.
- **Classic members in a consumer group.** Their JoinGroup/SyncGroup/Heartbeat/LeaveGroup are
  translated: a JoinGroup is a heartbeat carrying the subscription and the owned partitions (read
  from the ConsumerProtocolSubscription); it is answered at once, with the member epoch as the
  generation, no leader and no member list, so that every classic member is a follower; its
  SyncGroup gets the partitions the broker assigned it, written as a ConsumerProtocolAssignment.
  A Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin to move towards its target:
  the group epoch passed its epoch, it has partitions to revoke, or partitions it waits for have
  been released. A classic member has no revocation timer; it must rejoin within its rebalance
  timeout after being told to (join timer) and sync within it after joining (sync timer), or be
  fenced, as in Kafka. Classic JoinGroups are accepted by a live consumer group whatever the policy
  (the policy governs only conversions), when their protocols match the group's classic members.
- **Downgrade.** When the last consumer-protocol member leaves (or is fenced) and only classic
  members remain, the group becomes classic again if the policy allows downgrades
  (``bidirectional``, ``downgrade``): the consumer group's records are tombstoned and a classic
  GroupMetadata record written, with the group epoch as the generation and each member's target
  assignment as its assignment; then a rebalance starts, so the members rejoin the classic way.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from strom.group import consumer_records as rec
from strom.group.consumer_records import ClassicMetadata, ConsumerKey, TopicPartitions
from strom.group.group import Group, Member
from strom.group.records import GroupKey, encode_key
from strom.group.subscription import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from strom.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from strom.group.consumer_group import ConsumerGroup, ConsumerGroupCoordinator, ConsumerMember
    from strom.group.coordinator import JoinRequest, JoinResult

log = logging.getLogger("strom.group")

PROTOCOL_TYPE = "consumer"


def upgrade_enabled(policy: str) -> bool:
    return policy in ("bidirectional", "upgrade")


def downgrade_enabled(policy: str) -> bool:
    return policy in ("bidirectional", "downgrade")


class ClassicMembers:
    """The classic protocol spoken to a consumer group, and the conversions between the two kinds."""

    def __init__(self, consumer: ConsumerGroupCoordinator):
        self.consumer = consumer
        self._upgrading = asyncio.Lock()

    @property
    def policy(self) -> str:
        return self.consumer.config.group_consumer_migration_policy

    def _topics(self) -> dict:  # topic name -> its metadata
        return self.consumer.classic.metadata.topics

    def _by_id(self, partitions: dict[str, set[int]]) -> TopicPartitions:
        topics = self._topics()
        return {topics[t].topic_id: frozenset(p) for t, p in partitions.items() if t in topics and p}

    def _by_name(self, partitions: TopicPartitions) -> dict[str, frozenset[int]]:
        names = self.consumer.topic_names()
        return {names[t]: p for t, p in partitions.items() if t in names and p}

    # -- upgrade -----------------------------------------------------------------------------------
    def upgrade_error(self, holder: Group) -> str | None:
        """Why a live classic group cannot become a consumer group (Kafka's validateOnlineUpgrade)."""
        if not upgrade_enabled(self.policy):
            return "the online upgrade is disabled"
        if holder.protocol_type != PROTOCOL_TYPE:
            return "the group does not use the consumer embedded protocol"
        if len(holder.members) > self.consumer.config.group_consumer_max_size:
            return "the group size exceeds the consumer group maximum size"
        return None

    async def upgrade(self, holder: Group) -> tuple[int, str | None]:
        """Converts the live classic group ``holder``; (error code, message) when it cannot."""
        from strom.group.consumer_group import ConsumerGroup, ConsumerMember, MemberState

        async with self._upgrading:
            if self.consumer.groups.get(holder.group_id) is not None:
                return ErrorCode.NONE, None  # converted by a heartbeat that was waiting before this one
            why = self.upgrade_error(holder)
            if why is not None:
                log.info("cannot upgrade classic group %s to a consumer group: %s", holder.group_id, why)
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {holder.group_id} is not a consumer group."
            generation = holder.generation
            group = ConsumerGroup(holder.group_id, holder.partition, generation, generation)
            for m in holder.members.values():
                metadata = m.metadata_for(holder.protocol) if holder.protocol else (m.protocols or [("", b"")])[0][1]
                try:
                    subscription = decode_subscription(metadata)
                except ValueError:
                    return (
                        ErrorCode.GROUP_ID_NOT_FOUND,
                        f"Cannot upgrade the classic group {holder.group_id} to consumer group because "
                        "the embedded consumer protocol is malformed.",
                    )
                assigned = self._by_id(decode_assignment(m.assignment))
                member = ConsumerMember(
                    m.member_id,
                    m.group_instance_id,
                    subscription.rack_id,
                    m.client_id,
                    m.client_host,
                    sorted(set(subscription.topics)),
                    None,
                    m.rebalance_timeout_ms,
                    None,
                    generation,
                    generation,
                    MemberState.STABLE,
                    assigned,
                    {},
                )
                member.classic = ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))
                group.members[m.member_id] = member
                group.target[m.member_id] = assigned
                if m.group_instance_id:
                    group.static_members[m.group_instance_id] = m.member_id
            entries: list[tuple[bytes, bytes | None]] = [(encode_key(GroupKey(holder.group_id)), None)]
            entries += self.group_records(group)
            code = await self.consumer.classic.store.write(group.partition, entries)
            if code:
                return code, "could not store the group's state; retry"
            if self.consumer.classic.groups.get(holder.group_id) is not holder:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group changed; retry"
            self.consumer.classic.release_members(holder, ErrorCode.REBALANCE_IN_PROGRESS)
            holder.protocol_type, holder.protocol, holder.leader_id = PROTOCOL_TYPE, None, None
            group.topics_signature = self.consumer.signature(group)
            self.consumer.groups[group.group_id] = group
            for member in group.members.values():
                self.consumer.schedule_session(group, member)
            log.info(
                "classic group %s upgraded to a consumer group at epoch %d (%d classic members)",
                group.group_id,
                generation,
                len(group.members),
            )
            return ErrorCode.NONE, None

    @staticmethod
    def group_records(group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        """Every record of a consumer group, as Kafka's createConsumerGroupRecords writes them."""
        gid = group.group_id
        entries: list[tuple[bytes, bytes | None]] = []
        for member_id, member in group.members.items():
            entries.append(
                (
                    rec.encode_key(ConsumerKey(rec.MEMBER_METADATA, gid, member_id)),
                    rec.encode_member(member.metadata_record()),
                )
            )
        entries.append((rec.encode_key(ConsumerKey(rec.GROUP_METADATA, gid)), rec.encode_epoch(group.group_epoch)))
        for member_id in group.members:
            entries.append(
                (
                    rec.encode_key(ConsumerKey(rec.TARGET_MEMBER, gid, member_id)),
                    rec.encode_target(group.target.get(member_id, {})),
                )
            )
        entries.append(
            (rec.encode_key(ConsumerKey(rec.TARGET_METADATA, gid)), rec.encode_epoch(group.assignment_epoch))
        )
        for member_id, member in group.members.items():
            entries.append(
                (
                    rec.encode_key(ConsumerKey(rec.CURRENT_ASSIGNMENT, gid, member_id)),
                    rec.encode_current(member.current_record()),
                )
            )
        return entries

    # -- downgrade ---------------------------------------------------------------------------------
    def should_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        others = [m for m in group.members.values() if m is not leaving]
        if leaving.classic is not None or not others or any(m.classic is None for m in others):
            return False
        common = set.intersection(*({name for name, _ in m.classic.protocols} for m in others if m.classic))
        if not common:  # cannot happen for members admitted by _supports; a classic group needs one
            log.warning("cannot downgrade consumer group %s: its classic members share no protocol", group.group_id)
            return False
        if not downgrade_enabled(self.policy):
            log.info("cannot downgrade consumer group %s: the online downgrade is disabled", group.group_id)
            return False
        if len(others) > self.consumer.config.group_max_size:
            log.info("cannot downgrade consumer group %s: it is larger than group.max.size", group.group_id)
            return False
        return True

    async def downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> int:
        """``leaving`` goes and the group turns classic; nothing changes when the write fails."""
        classic = self.consumer.classic
        gid = group.group_id
        shape = Group(gid, group.partition, generation=group.group_epoch, protocol_type=PROTOCOL_TYPE)
        for member in group.members.values():
            if member is leaving or member.classic is None:
                continue
            shape.members[member.member_id] = Member(
                member.member_id,
                member.instance_id,
                member.client_id,
                member.client_host,
                member.rebalance_timeout_ms,
                member.classic.session_timeout_ms,
                PROTOCOL_TYPE,
                list(member.classic.protocols),
            )
            if member.instance_id:
                shape.static_members[member.instance_id] = member.member_id
        shape.protocol = shape.select_protocol()
        shape.leader_id = next(iter(shape.members))
        for m in shape.members.values():
            version = subscription_version(m.metadata_for(shape.protocol))
            m.assignment = encode_assignment(version, self._by_name(group.target.get(m.member_id, {})))
        entries: list[tuple[bytes, bytes | None]] = []
        for member_id in group.members:
            entries += self.consumer.member_tombstones(gid, member_id)
        entries += [(rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, gid, r)), None) for r in group.regexes]
        entries += [
            (rec.encode_key(ConsumerKey(v, gid)), None)
            for v in (rec.TARGET_METADATA, rec.PARTITION_METADATA, rec.GROUP_METADATA)
        ]
        entries.append(classic.group_record(shape))
        code = await classic.store.write(group.partition, entries)
        if code:
            log.warning("consumer group %s stays as it is: its downgrade could not be written (error %d)", gid, code)
            return code
        for member in group.members.values():
            self.consumer.cancel_timers(member)
        if self.consumer.groups.get(gid) is group:
            del self.consumer.groups[gid]
        holder = classic.groups.get(gid)
        if holder is None:
            holder = classic.groups[gid] = Group(gid, group.partition)
        classic.adopt(holder, shape, f"downgrade of group {gid} from consumer to classic")
        log.info(
            "consumer group %s downgraded to a classic group (generation %d, %d members) as %s left",
            gid,
            shape.generation,
            len(shape.members),
            leaving.member_id,
        )
        return ErrorCode.NONE

    # -- the classic protocol inside a consumer group ----------------------------------------------
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
        from strom.group.coordinator import JoinResult, _join_error

        member_id, instance_id, protocols = request.member_id, request.instance_id, request.protocols
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        if group.members.get(member_id) is None and len(group.members) >= self.consumer.config.group_consumer_max_size:
            return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        if not self._supports(group, request.protocol_type, protocols):
            return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if unknown and instance_id is None and request.require_known_member_id:
            return _join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ValueError:
            return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        owned = self._by_id(subscription.owned)
        result = await self.consumer.classic_join(
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
            return _join_error(result.error_code, member_id)
        member = group.members[member_id]
        self.consumer.cancel_classic_timer(member)
        self.consumer.schedule_session(group, member)
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
        from strom.group.consumer_group import MemberState

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
        from strom.group.consumer_group import MemberState

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
        self.consumer.cancel_classic_timer(member)
        self.consumer.schedule_session(group, member)
        version = subscription_version(member.classic.protocols[0][1])
        return ErrorCode.NONE, encode_assignment(version, self._by_name(member.assigned)), protocol_type, protocol_name

    def heartbeat(self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None) -> int:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        code, member = self._member(group, member_id, instance_id)
        if member is None:
            return code
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumer.schedule_session(group, member)
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
                results.append(await self.consumer.remove(group, member, "left (LeaveGroup)"))
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
        self.consumer.cancel_classic_timer(member)
        loop = asyncio.get_running_loop()
        member.classic_timer = loop.call_later(
            member.rebalance_timeout_ms / 1000, self.consumer.expire, group, member, kind, f"was fenced: {why}"
        )
