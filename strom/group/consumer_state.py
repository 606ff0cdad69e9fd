"""A consumer group's state (KIP-848): its members with their epochs and assignments, the group
and target epochs, and what a failed write puts back.

The state names and member states are Kafka's (ConsumerGroupState, MemberState). Everything here is
data and the helpers that only touch it, so that the services that change groups (consumer_group.py
and the modules it composes) can share it without importing each other.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field

from strom.group import consumer_records as rec
from strom.group.consumer_records import ClassicMetadata, ConsumerKey, ResolvedRegex, TopicPartitions

LEAVE_GROUP_EPOCH = -1
LEAVE_GROUP_STATIC_EPOCH = -2


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


def heartbeat_error(code: int, message: str | None, member_id: str | None = None) -> HeartbeatResult:
    return HeartbeatResult(code, message, member_id)


def subset(owned: TopicPartitions, of: TopicPartitions) -> bool:
    return all(parts <= of.get(topic_id, frozenset()) for topic_id, parts in owned.items())


class Checkpoint:
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
                cancel_timers(member)
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


def cancel_timers(member: ConsumerMember) -> None:
    for timer in (member.session_timer, member.revocation_timer, member.classic_timer):
        if timer is not None:
            timer.cancel()
    member.session_timer = member.revocation_timer = member.classic_timer = None


def cancel_revocation(member: ConsumerMember) -> None:
    if member.revocation_timer is not None:
        member.revocation_timer.cancel()
        member.revocation_timer = None


def cancel_classic_timer(member: ConsumerMember) -> None:
    if member.classic_timer is not None:
        member.classic_timer.cancel()
        member.classic_timer = None


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
    """The records that delete a member."""
    return [
        (rec.encode_key(ConsumerKey(v, group_id, member_id)), None)
        for v in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER, rec.MEMBER_METADATA)
    ]


def group_tombstones(group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
    """The records that delete a whole consumer group (its offsets are records of their own)."""
    entries: list[tuple[bytes, bytes | None]] = []
    for member_id in group.members:
        entries += member_tombstones(group.group_id, member_id)
    entries += [(rec.encode_key(ConsumerKey(rec.REGULAR_EXPRESSION, group.group_id, r)), None) for r in group.regexes]
    entries += [
        (rec.encode_key(ConsumerKey(v, group.group_id)), None)
        for v in (rec.TARGET_METADATA, rec.PARTITION_METADATA, rec.GROUP_METADATA)
    ]
    return entries
