"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, server-side assignment and
incremental reconciliation with member epochs.

Three epochs move a group, as in Kafka's GroupMetadataManager:

- the **group epoch** goes up whenever what the assignment depends on changes: a member joins or
  leaves, a subscription or the chosen assignor changes, or a subscribed topic appears, disappears
  or grows (a regex subscription is matched again when the topics change, seen at a heartbeat);
- the **target assignment** is recomputed by the assignor when its epoch falls behind the group
  epoch, and then carries that epoch;
- each **member epoch** reaches the target epoch once the member holds its target partitions.

A member first gives up what its target no longer contains (state UNREVOKED_PARTITIONS: the
response leaves them out, and the member's next heartbeat shows it no longer owns them); only then
does it move to the new epoch, taking the target partitions that no other member still holds
(UNRELEASED_PARTITIONS until every one of them has been released). So a partition is never owned
by two members at once, and a member keeps consuming everything that does not move.

Every change is written to __consumer_offsets before a member hears of it; when the write fails
(NOT_ENOUGH_REPLICAS, a storage error, lost leadership) the group is put back as it was, its timers
included, and the member gets the coordinator error to retry with, so memory never runs ahead of
what a reload would find.

Committed offsets stay where the classic coordinator keeps them (its ``Group`` of the same id holds
them: a consumer group always has such a holder, with no classic members); membership lives here.
An empty group converts to the other kind when a member of that kind joins; a live one migrates
online as Kafka 4 does (``group.consumer.migration.policy``), with classic members living inside a
consumer group in between: classic_members.py.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re2

from strom.clock import wall_ms
from strom.group import consumer_records as rec
from strom.group import records as schema
from strom.group.assignors import ASSIGNORS, AssignmentSpec, assignor_name
from strom.group.classic_members import ClassicMembers
from strom.group.consumer_records import ClassicMetadata, ConsumerKey, ResolvedRegex, TopicPartitions
from strom.group.group import Group
from strom.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from strom.group.coordinator import GroupCoordinator

log = logging.getLogger("strom.group")

LEAVE_GROUP_EPOCH = -1
_EXPIRY_RETRY_S = 0.5  # Kafka's CoordinatorTimer retries a failed expiry after 500 ms
LEAVE_GROUP_STATIC_EPOCH = -2
_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# A regex is resolved again when the topics change, and at least this often (so that a member's new
# Describe rights show), at the next heartbeat of a member subscribed with it.
_REGEX_REFRESH_S = 10.0


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2


class MemberState(enum.IntEnum):
    """Kafka's MemberState byte, as stored in ConsumerGroupCurrentMemberAssignmentValue."""

    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    STABLE = 3


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    revocation_timer: asyncio.TimerHandle | None = None
    classic: ClassicMetadata | None = None  # set while the member speaks the classic protocol
    classic_timer: asyncio.TimerHandle | None = None  # a classic member's join or sync deadline

    def metadata_record(self) -> rec.MemberMetadata:
        return rec.MemberMetadata(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            list(self.subscribed_topic_names),
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
        )

    def current_record(self) -> rec.CurrentAssignment:
        return rec.CurrentAssignment(
            self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned, self.pending_revocation
        )

    def owns(self, topic_id: uuid.UUID, partition: int) -> bool:
        return partition in self.assigned.get(topic_id, ()) or partition in self.pending_revocation.get(topic_id, ())


@dataclass
class ConsumerGroup:
    group_id: str
    partition: int  # its __consumer_offsets partition
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    topics_signature: tuple = ()  # (name, id, partitions) of the subscribed topics at the last epoch
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # regex -> the topics it resolved to (record key 16), and (the metadata's topic dict, its size,
    # monotonic time) of that resolution, which is not stored: a loaded resolution is used as it is
    # until a member with that regex heartbeats
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    regex_basis: dict[str, tuple[object, int, float]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(
            m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
            for m in self.members.values()
            if m.member_epoch >= 0
        ):
            return "Reconciling"
        return "Stable"

    def owner_of(self, topic_id: uuid.UUID, partition: int, other_than: str) -> str | None:
        for member in self.members.values():
            if member.member_id != other_than and member.owns(topic_id, partition):
                return member.member_id
        return None


@dataclass
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None


def _error(code: int, message: str | None, member_id: str | None = None) -> HeartbeatResult:
    return HeartbeatResult(code, message, member_id)


def _subset(owned: TopicPartitions, of: TopicPartitions) -> bool:
    return all(parts <= of.get(topic_id, frozenset()) for topic_id, parts in owned.items())


class _Checkpoint:
    """A group as it was before an operation changed it in memory, to put back when the
    operation's records cannot be written: what members saw (their epochs, assignments, the
    target) must never get ahead of __consumer_offsets, or a reload would move them backwards
    (Kafka reverts its timeline structures to the last committed offset the same way).

    An operation changes the group's own fields and at most two members (the one heartbeating and
    a static predecessor it replaces), so only those are copied, not every member."""

    def __init__(self, group: ConsumerGroup):
        self.group = group
        self.group_epoch = group.group_epoch
        self.assignment_epoch = group.assignment_epoch
        self.members = dict(group.members)
        self.target = dict(group.target)
        self.static_members = dict(group.static_members)
        self.topics_signature = group.topics_signature
        self.regexes, self.regex_basis = dict(group.regexes), dict(group.regex_basis)
        self.saved: list[tuple[ConsumerMember, dict]] = []

    def save(self, member: ConsumerMember) -> None:
        """Call before the first change to ``member``."""
        if all(m is not member for m, _ in self.saved):
            self.saved.append((member, dict(vars(member))))

    def restore(self) -> list[tuple[ConsumerMember, asyncio.TimerHandle | None, asyncio.TimerHandle | None]]:
        """Put the group back; returns the saved members with the timers they had then (the
        caller revives those the operation cancelled) after cancelling the timers of members that
        only the failed operation knew and any timer it started."""
        group = self.group
        for member in group.members.values():
            if self.members.get(member.member_id) is not member:
                _cancel(member)
        group.group_epoch, group.assignment_epoch = self.group_epoch, self.assignment_epoch
        group.members, group.target = self.members, self.target
        group.static_members, group.topics_signature = self.static_members, self.topics_signature
        group.regexes, group.regex_basis = self.regexes, self.regex_basis
        timers = []
        for member, fields in self.saved:
            for now, then in (
                (member.session_timer, fields["session_timer"]),
                (member.revocation_timer, fields["revocation_timer"]),
                (member.classic_timer, fields["classic_timer"]),
            ):
                if now is not None and now is not then:
                    now.cancel()
            vars(member).update(fields)
            timers.append((member, member.session_timer, member.revocation_timer))
        return timers


def _cancel(member: ConsumerMember) -> None:
    for timer in (member.session_timer, member.revocation_timer, member.classic_timer):
        if timer is not None:
            timer.cancel()
    member.session_timer = member.revocation_timer = member.classic_timer = None


class ConsumerGroupCoordinator:
    """KIP-848 groups of the partitions the classic coordinator owns; shares its store and offsets."""

    def __init__(self, classic: GroupCoordinator):
        self.classic = classic
        self.config = classic.config
        self.groups: dict[str, ConsumerGroup] = {}
        self._regex_cache: dict[str, re2._Regexp | None] = {}
        # pattern -> (the metadata's topic dict it was matched against, its size, the matches): the
        # cache replaces that dict on every change, so a regex is matched again only after a change
        self._matches: dict[str, tuple[object, int, frozenset[str]]] = {}
        self.classic_members = ClassicMembers(self)
        self._regex_version = 0  # Version of record 16: resolutions made here (after the loaded ones)

    # -- configuration ---------------------------------------------------------------------------
    @property
    def session_timeout_ms(self) -> int:
        return self.config.group_consumer_session_timeout_ms

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.config.group_consumer_heartbeat_interval_ms

    @property
    def assignors(self) -> list[str]:
        return [name for name in (assignor_name(a) for a in self.config.group_consumer_assignors) if name]

    # -- what the classic side asks ----------------------------------------------------------------
    def has_members(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and bool(group.members)

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> int | None:
        """None when ``group_id`` is not a consumer group (the classic rules apply), else Kafka's
        ConsumerGroup.validateOffsetCommit: the member must exist and send its current epoch."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not member_id:
            return ErrorCode.UNKNOWN_MEMBER_ID if group.members else ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            # a classic member sends its generation, which is its member epoch
            return ErrorCode.ILLEGAL_GENERATION if member.classic else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def subscribed_topics(self, group_id: str) -> set[str]:
        """What OffsetDelete refuses to delete (GROUP_SUBSCRIBED_TO_TOPIC): the members' topics."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return set().union(*(self._subscribed(group, m) for m in group.members.values()))

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        """OffsetFetch v9 from a member: Kafka's ConsumerGroup.validateOffsetFetch (admins send no member)."""
        group = self.groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch == member.member_epoch:
            return ErrorCode.NONE
        return ErrorCode.ILLEGAL_GENERATION if member.classic else ErrorCode.STALE_MEMBER_EPOCH

    async def before_classic_join(self, group_id: str) -> int:
        """A classic member may take over an empty consumer group (converted: its records are
        deleted); a live one takes it in as a classic member (classic_members.py)."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return ErrorCode.NONE
        code = await self.delete(group_id)
        if not code:
            log.info("empty consumer group %s converted to a classic group", group_id)
        return code

    async def delete(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        entries: list[tuple[bytes, bytes | None]] = []
        for member_id in group.members:
            entries += self._member_tombstones(group_id, member_id)
        entries += [(rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, group_id, r)), None) for r in group.regexes]
        entries += [
            (rec.encode_key(ConsumerKey(v, group_id)), None)
            for v in (rec.TARGET_METADATA, rec.PARTITION_METADATA, rec.GROUP_METADATA)
        ]
        code = await self.classic.store.write(group.partition, entries)
        if not code and self.groups.get(group_id) is group:
            for member in group.members.values():
                self._cancel_timers(member)
            del self.groups[group_id]
        return code

    def list_groups(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if g.partition in self.classic.owned_partitions]

    def describe(self, group_id: str) -> tuple[int, ConsumerGroup | None]:
        error = self.classic.coordinator_error(group_id)
        if error:
            return error, None
        group = self.groups.get(group_id)
        return (ErrorCode.NONE, group) if group is not None else (ErrorCode.GROUP_ID_NOT_FOUND, None)

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {info.topic_id: name for name, info in self.classic.metadata.topics.items()}

    # -- loading -----------------------------------------------------------------------------------
    def replay(self, partition: int, key: ConsumerKey, value: bytes | None) -> None:
        """One record of a __consumer_offsets partition being loaded, last write wins."""
        group = self.groups.get(key.group)
        if value is None:
            if group is None:
                return
            if key.version == rec.GROUP_METADATA:
                del self.groups[key.group]
            elif key.version == rec.MEMBER_METADATA:
                member = group.members.pop(key.member, None)
                if member is not None and member.instance_id:
                    group.static_members.pop(member.instance_id, None)
            elif key.version == rec.TARGET_MEMBER:
                group.target.pop(key.member, None)
            elif key.version == rec.REGULAR_EXPRESSION:
                group.regexes.pop(key.member, None)
            return
        if key.version == rec.PARTITION_METADATA:
            return  # Kafka 3.x's subscription metadata: recomputed from the topics here
        if group is None:
            group = self.groups[key.group] = ConsumerGroup(key.group, partition)
        if key.version == rec.REGULAR_EXPRESSION:
            resolved = group.regexes[key.member] = rec.decode_regex(value)
            self._regex_version = max(self._regex_version, resolved.version)
        elif key.version == rec.GROUP_METADATA:
            group.group_epoch = rec.decode_epoch(value)
        elif key.version == rec.TARGET_METADATA:
            group.assignment_epoch = rec.decode_epoch(value)
        elif key.version == rec.TARGET_MEMBER:
            group.target[key.member] = rec.decode_target(value)
        else:
            member = group.members.setdefault(key.member, ConsumerMember(key.member))
            if key.version == rec.MEMBER_METADATA:
                m = rec.decode_member(value)
                member.instance_id, member.rack_id, member.client_id, member.client_host = (
                    m.instance_id,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                )
                member.subscribed_topic_names = m.subscribed_topic_names
                member.subscribed_topic_regex = m.subscribed_topic_regex
                member.rebalance_timeout_ms, member.server_assignor = m.rebalance_timeout_ms, m.server_assignor
                member.classic = m.classic
                if m.instance_id:
                    group.static_members[m.instance_id] = key.member
            else:
                c = rec.decode_current(value)
                member.member_epoch, member.previous_member_epoch = c.member_epoch, c.previous_member_epoch
                member.state = MemberState(c.state) if c.state in (1, 2, 3) else MemberState.STABLE
                member.assigned, member.pending_revocation = c.assigned, c.pending_revocation

    def loaded(self, partition: int) -> None:
        """After replay: members get a fresh session, as in Kafka; groups get their offsets holder."""
        for group in self.groups.values():
            if group.partition != partition:
                continue
            self.classic.groups.setdefault(group.group_id, Group(group.group_id, partition))
            group.topics_signature = self._signature(group)
            for member in group.members.values():
                self._schedule_session(group, member)

    def unload(self, partition: int) -> None:
        for group_id in [g for g, group in self.groups.items() if group.partition == partition]:
            for member in self.groups.pop(group_id).members.values():
                self._cancel_timers(member)

    # -- the heartbeat ---------------------------------------------------------------------------
    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topic_names: list[str] | None,
        subscribed_topic_regex: str | None,
        server_assignor: str | None,
        owned: TopicPartitions | None,
        client_id: str,
        client_host: str,
        version: int,
        describable: Callable[[str], bool] | None = None,
    ) -> HeartbeatResult:
        """``describable``: whether the member may Describe a topic (None: no authorizer); its
        regex matches only such topics."""
        error = self.classic.coordinator_error(group_id)
        if error:
            return _error(error, None, member_id)
        invalid = self._invalid_request(
            member_id,
            member_epoch,
            rebalance_timeout_ms,
            subscribed_topic_names,
            subscribed_topic_regex,
            server_assignor,
            owned,
            version,
        )
        if invalid:
            return _error(ErrorCode.INVALID_REQUEST, invalid, member_id)
        if subscribed_topic_regex and self._pattern(subscribed_topic_regex) is None:
            return _error(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{subscribed_topic_regex}` is not a valid regular expression.",
            )
        if server_assignor is not None and server_assignor not in self.assignors:
            return _error(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: {', '.join(self.assignors)}.",
            )
        if not member_id:  # v0: the coordinator names the member
            member_id = str(uuid.uuid4())
        group = self.groups.get(group_id)
        if member_epoch in (LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH):
            if group is None:
                return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", member_id)
            async with group.lock:
                return await self._leave(group, member_id, member_epoch, instance_id)
        if group is None:
            if member_epoch != 0:
                return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", member_id)
            classic = self.classic.groups.get(group_id)
            if classic is not None and not classic.is_empty:
                code, message = await self.classic_members.upgrade(classic)  # Kafka 4's online upgrade
                if code:
                    return _error(code, message, member_id)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id, self.classic.store.partition_for(group_id))
            holder = self.classic.groups.get(group_id)
            was = None if holder is None else (holder.protocol_type, holder.protocol, holder.leader_id)
            if holder is None:
                holder = self.classic.groups[group_id] = Group(group_id, group.partition)
            else:
                holder.protocol_type, holder.protocol, holder.leader_id = "consumer", None, None
            created = (group, holder, was)
        else:
            created = None
        async with group.lock:
            if self.groups.get(group_id) is not group:  # deleted or converted while waiting
                return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group changed; retry", member_id)
            result = await self._heartbeat(
                group,
                member_id,
                member_epoch,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                subscribed_topic_names,
                subscribed_topic_regex,
                server_assignor,
                owned,
                client_id,
                client_host,
                describable=describable,
            )
            if created is not None and result.error_code and not group.members:
                self._forget_new(*created)
            return result

    def _forget_new(self, group: ConsumerGroup, holder: Group, was: tuple | None) -> None:
        """A group whose first heartbeat was refused or could not be stored never existed: no
        record of it was written, so ListGroups must not list it (nor its offsets holder, unless
        offsets were committed to it meanwhile)."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        if self.classic.groups.get(group.group_id) is not holder:
            return
        if was is not None:
            holder.protocol_type, holder.protocol, holder.leader_id = was
        elif (
            holder.is_empty
            and not holder.offsets
            and not holder.pending_txn_offsets
            and not any(holder.commits_in_flight.values())
        ):
            del self.classic.groups[group.group_id]

    def _invalid_request(
        self,
        member_id: str,
        member_epoch: int,
        rebalance_timeout_ms: int,
        names: list[str] | None,
        regex: str | None,
        server_assignor: str | None,
        owned: TopicPartitions | None,
        version: int,
    ) -> str | None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, with its messages."""
        if version >= 1 and not member_id:
            return "MemberId can't be empty."
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if owned is None or owned:
                return "TopicPartitions must be empty when (re-)joining."
            if not names and not regex:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif member_epoch < LEAVE_GROUP_STATIC_EPOCH:
            return f"MemberEpoch is invalid: {member_epoch}."
        if server_assignor is not None and not server_assignor:
            return "ServerAssignor can't be empty."
        if any(not schema.fits(s) for s in (member_id, *(names or ()))):
            return "MemberId or a topic name is too long."
        return None

    async def _heartbeat(
        self,
        group: ConsumerGroup,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        names: list[str] | None,
        regex: str | None,
        server_assignor: str | None,
        owned: TopicPartitions | None,
        client_id: str,
        client_host: str,
        classic: ClassicMetadata | None = None,
        unknown_member: bool = False,
        describable: Callable[[str], bool] | None = None,
    ) -> HeartbeatResult:
        """``classic``: a classic member's JoinGroup, translated (Kafka's classicGroupJoinToConsumerGroup:
        an existing member is updated, not reset; a static instance joining under a new member id
        replaces its predecessor)."""
        entries: list[tuple[bytes, bytes | None]] = []
        bump = replaced = False
        member = group.members.get(member_id)
        checkpoint = _Checkpoint(group)
        if member is not None:
            checkpoint.save(member)
        if classic is not None:
            known = group.static_members.get(instance_id) if instance_id is not None else None
            if known is not None and known != member_id:
                if not unknown_member:
                    return _error(
                        ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to {known}.", member_id
                    )
                previous = group.members[known]
                checkpoint.save(previous)
                member = self._replace_static(group, previous, member_id)
                replaced = True
                entries += self._member_tombstones(group.group_id, known)
            elif member is None:
                member = group.members[member_id] = ConsumerMember(member_id)
                bump = True
                log.info("classic member %s joined consumer group %s", member_id, group.group_id)
        elif member_epoch == 0:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is not None and known != member_id:
                    previous = group.members[known]
                    if previous.member_epoch != LEAVE_GROUP_STATIC_EPOCH:
                        return _error(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {known} with instance id {instance_id} is not released.",
                            member_id,
                        )
                    checkpoint.save(previous)
                    member = self._replace_static(group, previous, member_id)  # takes over its partitions
                    replaced = True
                    entries += self._member_tombstones(group.group_id, known)
            if member is None and len(group.members) >= self.config.group_consumer_max_size:
                return _error(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The consumer group has reached its maximum "
                    f"capacity of {self.config.group_consumer_max_size} members.",
                    member_id,
                )
            if member is None:
                member = group.members[member_id] = ConsumerMember(member_id)
                bump = True
                log.info("member %s joined consumer group %s", member_id, group.group_id)
            elif member.member_epoch == LEAVE_GROUP_STATIC_EPOCH:  # the same static member is back
                member.member_epoch, member.previous_member_epoch = member.previous_member_epoch, -1
            elif not replaced and member.member_epoch != 0:
                # a member that lost its partitions (fenced, restarted) joins again from nothing
                self._cancel_revocation(member)
                member.assigned, member.pending_revocation, member.state = {}, {}, MemberState.STABLE
                member.previous_member_epoch, member.member_epoch = member.member_epoch, 0
        else:
            if member is None:
                return _error(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                    member_id,
                )
            if instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
                return _error(
                    ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to another member.", member_id
                )
            if (
                member_epoch > member.member_epoch
                or member_epoch < member.member_epoch
                and not (
                    member_epoch == member.previous_member_epoch
                    and owned is not None
                    and _subset(owned, member.assigned)
                )
            ):
                return _error(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a "
                    f"{'greater' if member_epoch > member.member_epoch else 'smaller'} member epoch "
                    f"({member_epoch}) than the one known by the group coordinator "
                    f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
                    member_id,
                )
        before = (member.metadata_record(), member.current_record())
        member.classic = classic  # None for a ConsumerGroupHeartbeat: the member speaks the consumer protocol
        # the request carries only what changed since the last heartbeat
        member.client_id, member.client_host = client_id, client_host
        if instance_id is not None and member.instance_id != instance_id:
            member.instance_id = instance_id
            group.static_members[instance_id] = member_id
        if rack_id is not None and (rack_id or None) != member.rack_id:
            member.rack_id = rack_id or None
            bump = True  # the rack-aware assignors place partitions by it
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        if names is not None and sorted(set(names)) != member.subscribed_topic_names:
            member.subscribed_topic_names = sorted(set(names))
            bump = True
        if regex is not None and (regex or None) != member.subscribed_topic_regex:
            member.subscribed_topic_regex = regex or None  # an empty regex is none
            bump = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor = server_assignor
            bump = True
        entries += self._resolve_regexes(group, member, describable)
        signature = self._signature(group)
        if signature != group.topics_signature:  # a topic appeared, went, grew, or matched a regex
            group.topics_signature = signature
            bump = True
        if bump:
            group.group_epoch += 1
            entries.append(
                (rec.encode_key(ConsumerKey(rec.GROUP_METADATA, group.group_id)), rec.encode_epoch(group.group_epoch))
            )
        if group.group_epoch > group.assignment_epoch:
            entries += self._compute_target(group)
        assigned_before = dict(member.assigned)
        self._reconcile(group, member, owned)
        after = (member.metadata_record(), member.current_record())
        if after[0] != before[0] or bump or replaced:
            entries.append(
                (
                    rec.encode_key(ConsumerKey(rec.MEMBER_METADATA, group.group_id, member_id)),
                    rec.encode_member(after[0]),
                )
            )
        if replaced and member_id in group.target:
            entries.append(
                (
                    rec.encode_key(ConsumerKey(rec.TARGET_MEMBER, group.group_id, member_id)),
                    rec.encode_target(group.target[member_id]),
                )
            )
        if after[1] != before[1] or replaced:
            entries.append(
                (
                    rec.encode_key(ConsumerKey(rec.CURRENT_ASSIGNMENT, group.group_id, member_id)),
                    rec.encode_current(after[1]),
                )
            )
        if entries:
            code = await self.classic.store.write(group.partition, entries)
            if code:
                self._revert(checkpoint)
                return _error(code, "could not store the group's state; retry", member_id)
        self._schedule_session(group, member)
        full = member_epoch == 0 or owned is not None
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            member_id,
            member.member_epoch,
            self.classic.configs.heartbeat_interval_ms(group.group_id),
            dict(member.assigned) if full or member.assigned != assigned_before else None,
        )

    # -- what classic_members.py uses -------------------------------------------------------------
    async def classic_join(
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
    ) -> HeartbeatResult:
        async with group.lock:
            if self.groups.get(group.group_id) is not group:
                return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group changed; retry", member_id)
            return await self._heartbeat(
                group,
                member_id,
                0,
                instance_id,
                rack_id,
                rebalance_timeout_ms,
                names,
                None,
                None,
                owned,
                client_id,
                client_host,
                classic,
                unknown_member,
            )

    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._schedule_session(group, member)

    def signature(self, group: ConsumerGroup) -> tuple:
        return self._signature(group)

    def cancel_timers(self, member: ConsumerMember) -> None:
        _cancel(member)

    @staticmethod
    def cancel_classic_timer(member: ConsumerMember) -> None:
        if member.classic_timer is not None:
            member.classic_timer.cancel()
            member.classic_timer = None

    def member_tombstones(self, group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
        return self._member_tombstones(group_id, member_id)

    async def remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> int:
        return await self._remove(group, member, why)

    def expire(self, group: ConsumerGroup, member: ConsumerMember, timer: str, why: str) -> None:
        self._expire(group, member, timer, why)

    def _replace_static(self, group: ConsumerGroup, previous: ConsumerMember, member_id: str) -> ConsumerMember:
        """KIP-848 static membership: a restarted instance takes its predecessor's place and
        partitions without a new group epoch."""
        self._cancel_timers(previous)
        del group.members[previous.member_id]
        member = ConsumerMember(
            member_id,
            previous.instance_id,
            previous.rack_id,
            previous.client_id,
            previous.client_host,
            previous.subscribed_topic_names,
            previous.subscribed_topic_regex,
            previous.rebalance_timeout_ms,
            previous.server_assignor,
            previous.previous_member_epoch,
            -1,
            previous.state,
            previous.assigned,
            previous.pending_revocation,
        )
        member.classic = previous.classic
        group.members[member_id] = member
        if previous.member_id in group.target:
            group.target[member_id] = group.target.pop(previous.member_id)
        if member.instance_id:
            group.static_members[member.instance_id] = member_id
        log.info("static member %s of consumer group %s rejoined as %s", member.instance_id, group.group_id, member_id)
        return member

    async def _leave(
        self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None
    ) -> HeartbeatResult:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.", member_id)
            if known != member_id:
                return _error(ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to {known}.", member_id)
        member = group.members.get(member_id)
        if member is None:
            return _error(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.", member_id
            )
        if epoch == LEAVE_GROUP_STATIC_EPOCH and member.instance_id is not None:
            # a static member going away for a while: it keeps its partitions until its session ends
            checkpoint = _Checkpoint(group)
            checkpoint.save(member)
            member.previous_member_epoch, member.member_epoch = member.member_epoch, LEAVE_GROUP_STATIC_EPOCH
            code = await self.classic.store.write(
                group.partition,
                [
                    (
                        rec.encode_key(ConsumerKey(rec.CURRENT_ASSIGNMENT, group.group_id, member_id)),
                        rec.encode_current(member.current_record()),
                    )
                ],
            )
            if code:
                self._revert(checkpoint)
                return _error(code, "could not store the group's state; retry", member_id)
            self._schedule_session(group, member)
            return HeartbeatResult(code, None, member_id, LEAVE_GROUP_STATIC_EPOCH)
        code = await self._remove(group, member, "left")
        if code:
            return _error(code, "could not store the group's state; retry", member_id)
        return HeartbeatResult(code, None, member_id, LEAVE_GROUP_EPOCH)

    async def _remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> int:
        """Removes ``member`` once its tombstones are written; a failed write leaves it a member,
        its timers running as before."""
        if group.members.get(member.member_id) is not member:
            return ErrorCode.NONE
        if self.classic_members.should_downgrade(group, member):  # the last consumer-protocol member
            return await self.classic_members.downgrade(group, member)
        checkpoint = _Checkpoint(group)
        checkpoint.save(member)
        self._cancel_timers(member)
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        if member.instance_id and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        group.group_epoch += 1
        log.info(
            "member %s of consumer group %s (client %s, host %s%s) %s (group epoch %d)",
            member.member_id,
            group.group_id,
            member.client_id,
            member.client_host,
            f", instance {member.instance_id}" if member.instance_id else "",
            why,
            group.group_epoch,
        )
        entries = self._member_tombstones(group.group_id, member.member_id) + self._unused_regexes(group)
        entries.append(
            (rec.encode_key(ConsumerKey(rec.GROUP_METADATA, group.group_id)), rec.encode_epoch(group.group_epoch))
        )
        code = await self.classic.store.write(group.partition, entries)
        if code:
            log.warning(
                "member %s stays in consumer group %s: its removal could not be written (error %d)",
                member.member_id,
                group.group_id,
                code,
            )
            self._revert(checkpoint)
        return code

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
        return [
            (rec.encode_key(ConsumerKey(v, group_id, member_id)), None)
            for v in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER, rec.MEMBER_METADATA)
        ]

    # -- assignment ------------------------------------------------------------------------------
    def _pattern(self, regex: str) -> re2._Regexp | None:
        """RE2 (linear time, the syntax Kafka's RE2/J implements): a client's pattern cannot make
        the broker backtrack for minutes, as ``(a+)+b`` would with Python's ``re``."""
        if regex not in self._regex_cache:
            try:
                self._regex_cache[regex] = re2.compile(regex, _RE2_OPTIONS)
            except (re2.error, TypeError, ValueError):
                self._regex_cache[regex] = None
            if len(self._regex_cache) > 1024:
                self._regex_cache.pop(next(iter(self._regex_cache)))
        return self._regex_cache[regex]

    def _subscribed(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[str]:
        """The existing topics a member subscribes to: its names and what its regex resolved to
        in the group (a regex never resolved in it, e.g. of a group stored before strom wrote
        key 16, matches as it stands until a member with it heartbeats)."""
        topics = self.classic.metadata.topics
        named = frozenset(t for t in member.subscribed_topic_names if t in topics)
        regex = member.subscribed_topic_regex
        if regex is None:
            return named
        resolved = group.regexes.get(regex)
        if resolved is None:
            return named | self._matching(regex)
        return named | frozenset(t for t in resolved.topics if t in topics)

    def _matching(self, regex: str) -> frozenset[str]:
        """The topics ``regex`` matches whole (RE2/J's matches(); internal topics never match)."""
        pattern = self._pattern(regex)
        if pattern is None:
            return frozenset()
        topics = self.classic.metadata.topics
        cached = self._matches.get(regex)
        if cached is None or cached[0] is not topics or cached[1] != len(topics):
            matches = frozenset(t for t in topics if t not in _INTERNAL_TOPICS and pattern.fullmatch(t))
            if len(self._matches) > 1024:
                self._matches.clear()
            cached = self._matches[regex] = (topics, len(topics), matches)
        return cached[2]

    def _resolve_regexes(
        self, group: ConsumerGroup, member: ConsumerMember, describable: Callable[[str], bool] | None
    ) -> list[tuple[bytes, bytes | None]]:
        """Kafka 4.0's regex resolution: the member's regex is matched against the topics again
        when they changed (or after _REGEX_REFRESH_S), keeping only those the member may Describe
        when an authorizer is on (KAFKA-18813); a changed result is stored as record 16, and the
        records of regexes no member uses any more are deleted."""
        entries: list[tuple[bytes, bytes | None]] = []
        regex = member.subscribed_topic_regex
        if regex is not None and self._pattern(regex) is not None:
            topics = self.classic.metadata.topics
            basis = group.regex_basis.get(regex)
            now = time.monotonic()
            stale = (
                regex not in group.regexes
                or basis is None
                or basis[0] is not topics
                or basis[1] != len(topics)
                or now - basis[2] >= _REGEX_REFRESH_S
            )
            if stale:
                matched = self._matching(regex)
                if describable is not None:
                    matched = frozenset(t for t in matched if describable(t))
                group.regex_basis[regex] = (topics, len(topics), now)
                old = group.regexes.get(regex)
                if old is None or old.topics != matched:
                    self._regex_version += 1
                    group.regexes[regex] = ResolvedRegex(matched, self._regex_version, wall_ms())
                    entries.append(
                        (
                            rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, group.group_id, regex)),
                            rec.encode_regex(group.regexes[regex]),
                        )
                    )
        entries += self._unused_regexes(group)
        return entries

    def _unused_regexes(self, group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        used = {m.subscribed_topic_regex for m in group.members.values()}
        entries: list[tuple[bytes, bytes | None]] = []
        for regex in [r for r in group.regexes if r not in used]:
            del group.regexes[regex]
            group.regex_basis.pop(regex, None)
            entries.append((rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, group.group_id, regex)), None))
        return entries

    def _signature(self, group: ConsumerGroup) -> tuple:
        """What the target depends on besides the members: the subscribed topics, and, when a
        member has a rack, the racks of their replicas (a broker moving racks moves partitions)."""
        topics = self.classic.metadata.topics
        names = set().union(*(self._subscribed(group, m) for m in group.members.values())) if group.members else set()
        signature: tuple = tuple(sorted((n, str(topics[n].topic_id), topics[n].partition_count) for n in names))
        if any(m.rack_id for m in group.members.values()):
            signature += tuple(tuple(self._partition_racks(n)) for n in sorted(names))
        return signature

    def _partition_racks(self, topic: str) -> list[frozenset[str]]:
        """The racks of each partition's replicas (empty where brokers have no broker.rack)."""
        metadata = self.classic.metadata
        brokers = getattr(metadata, "brokers", {})
        info = metadata.topics[topic]
        return [
            frozenset(r for r in (getattr(brokers.get(b), "rack", None) for b in info.replicas.get(p, ())) if r)
            for p in range(info.partition_count)
        ]

    def _compute_target(self, group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        topics = self.classic.metadata.topics
        names = self.topic_names()
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        chosen = max(sorted(votes), key=lambda n: votes[n]) if votes else (self.assignors or ["uniform"])[0]
        subscriptions = {m.member_id: self._subscribed(group, m) for m in group.members.values()}
        counts = {t: topics[t].partition_count for subs in subscriptions.values() for t in subs}
        racks = {m.member_id: m.rack_id for m in group.members.values() if m.rack_id}
        spec = AssignmentSpec(
            subscriptions,
            counts,
            {
                m: {names[tid]: parts for tid, parts in target.items() if tid in names}
                for m, target in group.target.items()
                if m in subscriptions
            },
            racks,
            {t: self._partition_racks(t) for t in counts} if racks else {},
        )
        result = ASSIGNORS[chosen](spec)
        entries: list[tuple[bytes, bytes | None]] = []
        new_target: dict[str, TopicPartitions] = {}
        for member_id, by_name in result.items():
            new_target[member_id] = {topics[t].topic_id: frozenset(p) for t, p in by_name.items() if p}
            if new_target[member_id] != group.target.get(member_id):
                entries.append(
                    (
                        rec.encode_key(ConsumerKey(rec.TARGET_MEMBER, group.group_id, member_id)),
                        rec.encode_target(new_target[member_id]),
                    )
                )
        group.target = new_target
        group.assignment_epoch = group.group_epoch
        entries.append(
            (rec.encode_key(ConsumerKey(rec.TARGET_METADATA, group.group_id)), rec.encode_epoch(group.assignment_epoch))
        )
        log.info(
            "consumer group %s: target assignment of epoch %d by %s: %s",
            group.group_id,
            group.assignment_epoch,
            chosen,
            {m: {names.get(t, str(t)): sorted(p) for t, p in a.items()} for m, a in new_target.items()},
        )
        return entries

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: TopicPartitions | None) -> None:
        """Kafka's CurrentAssignmentBuilder: one step of the member towards its target."""
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if owned is None or any(
                parts & member.pending_revocation.get(t, frozenset()) for t, parts in owned.items()
            ):
                return  # still holds partitions it must give up
            member.pending_revocation = {}
            self._cancel_revocation(member)
        elif member.state == MemberState.STABLE and member.member_epoch == group.assignment_epoch:
            return
        target = group.target.get(member.member_id, {})
        keep: TopicPartitions = {}
        revoke: TopicPartitions = {}
        for topic_id, parts in member.assigned.items():
            wanted = target.get(topic_id, frozenset())
            if parts & wanted:
                keep[topic_id] = parts & wanted
            if parts - wanted:
                revoke[topic_id] = parts - wanted
        if revoke:
            member.assigned, member.pending_revocation = keep, revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            if member.classic is None:  # a classic member has join and sync deadlines instead
                self._schedule_revocation(group, member)
            return
        assigned: dict[uuid.UUID, set[int]] = {t: set(p) for t, p in keep.items()}
        unreleased = False
        for topic_id, parts in target.items():
            for p in parts:
                if group.owner_of(topic_id, p, member.member_id) is None:
                    assigned.setdefault(topic_id, set()).add(p)
                else:
                    unreleased = True
        member.assigned = {t: frozenset(p) for t, p in assigned.items() if p}
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    # -- timers ----------------------------------------------------------------------------------
    def _schedule_session(self, group: ConsumerGroup, member: ConsumerMember, at: float | None = None) -> None:
        """``at``: the event loop's time of expiry (default: a session timeout from now)."""
        if member.session_timer is not None:
            member.session_timer.cancel()
        loop = asyncio.get_running_loop()
        if member.classic is not None:  # the session timeout its JoinGroup asked for
            timeout, why = member.classic.session_timeout_ms, "expired: no heartbeat within its session timeout"
        else:
            timeout = self.classic.configs.session_timeout_ms(group.group_id)
            why = f"expired: no heartbeat within its group's consumer session timeout ({timeout} ms)"
        member.session_timer = loop.call_at(
            loop.time() + timeout / 1000 if at is None else at, self._expire, group, member, "session", why
        )

    def _schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember, at: float | None = None) -> None:
        self._cancel_revocation(member)
        loop = asyncio.get_running_loop()
        member.revocation_timer = loop.call_at(
            loop.time() + member.rebalance_timeout_ms / 1000 if at is None else at,
            self._expire,
            group,
            member,
            "revocation",
            f"was fenced: it did not revoke its partitions within its rebalance timeout ({member.rebalance_timeout_ms} ms)",
        )

    @staticmethod
    def _cancel_revocation(member: ConsumerMember) -> None:
        if member.revocation_timer is not None:
            member.revocation_timer.cancel()
            member.revocation_timer = None

    def _cancel_timers(self, member: ConsumerMember) -> None:
        _cancel(member)

    def _revert(self, checkpoint: _Checkpoint) -> None:
        """After a failed write: the group as before, each timer the operation cancelled running
        again towards its old deadline (unless the group has been unloaded meanwhile)."""
        group = checkpoint.group
        loaded = self.groups.get(group.group_id) is group
        for member, session, revocation in checkpoint.restore():
            if not loaded or group.members.get(member.member_id) is not member:
                _cancel(member)
                continue
            if session is not None and session.cancelled():
                member.session_timer = None
                self._schedule_session(group, member, session.when())
            if revocation is not None and revocation.cancelled():
                member.revocation_timer = None
                self._schedule_revocation(group, member, revocation.when())

    def _expire(self, group: ConsumerGroup, member: ConsumerMember, timer: str, why: str) -> None:
        async def remove() -> None:
            async with group.lock:
                failed = await self._remove(group, member, why)
                if (
                    failed
                    and self.groups.get(group.group_id) is group
                    and group.members.get(member.member_id) is member
                ):
                    # as Kafka's retried timers: try again shortly rather than keep a dead member
                    # (the revert put back the timer that fired, due at once: replace it)
                    loop = asyncio.get_running_loop()
                    retry = loop.time() + _EXPIRY_RETRY_S
                    if timer == "session":
                        self._schedule_session(group, member, retry)
                    elif timer == "revocation":
                        self._schedule_revocation(group, member, retry)
                    else:  # a classic member's join or sync deadline
                        self.cancel_classic_timer(member)
                        member.classic_timer = loop.call_at(retry, self._expire, group, member, timer, why)

        if group.members.get(member.member_id) is member and self.groups.get(group.group_id) is group:
            asyncio.ensure_future(remove())
