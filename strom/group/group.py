"""A consumer group's state: members, generation, protocol and the classic-protocol state machine.

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                    ▲   │                                       │ leader's SyncGroup
      │                    │   └── all members left ──▶ Empty          ▼
      └──last member left──┴─────── member joins/leaves/expires ◀── Stable
    Dead: the group was deleted (or its partition moved to another coordinator).

The broker never looks inside protocol metadata or assignments: it passes the bytes between
members, so every client-side assignor (range, roundrobin, sticky, cooperative-sticky) works.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field

from strom.clock import wall_ms
from strom.group import records as schema
from strom.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    session_timer: asyncio.TimerHandle | None = None
    is_new: bool = False
    # The connection of its parked JoinGroup or SyncGroup closed: the member still counts as
    # joined (it may reconnect and resend), but its session runs from the disconnect, in every
    # phase, until the member is heard from again.
    disconnected: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # Offset in __consumer_offsets of the record that carried it. A transaction's offsets become
    # visible only at its commit marker, so "the last write wins" is decided by record offsets:
    # a plain commit written after a transactional one (but before its marker) stays.
    record_offset: int = -1

    def older_than(self, other: CommittedOffset) -> bool:
        return self.record_offset < other.record_offset


@dataclass
class Group:
    group_id: str
    partition: int  # the __consumer_offsets partition that stores it
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    # ids handed out with MEMBER_ID_REQUIRED (KIP-394) -> (client id, host), for the expiry's log line
    pending_members: dict[str, tuple[str, str]] = field(default_factory=dict)
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # producer id -> offsets its open transaction committed (TxnOffsetCommit): invisible to
    # OffsetFetch until the commit marker, dropped by the abort marker
    pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    commits_in_flight: Counter[tuple[str, int]] = field(default_factory=Counter)  # plain commits being written
    state_timestamp: int = field(default_factory=lambda: wall_ms())  # looked up when called: tests set it
    join_timer: asyncio.TimerHandle | None = None
    new_member_added: bool = False
    initial_delay: bool = False  # in the first rebalance's group.initial.rebalance.delay.ms window

    def transition(self, state: GroupState) -> None:
        self.state = state
        self.state_timestamp = wall_ms()

    @property
    def is_empty(self) -> bool:
        return not self.members

    # -- offsets ----------------------------------------------------------------------------------
    def commit_offset(self, tp: tuple[str, int], committed: CommittedOffset) -> None:
        """A plain commit whose record is written: it wins unless a later record already did."""
        current = self.offsets.get(tp)
        if current is None or not committed.older_than(current):
            self.offsets[tp] = committed

    def has_pending_offset(self, tp: tuple[str, int]) -> bool:
        """Whether OffsetFetch with require_stable must answer UNSTABLE_OFFSET_COMMIT (as Kafka)."""
        return self.commits_in_flight[tp] > 0 or any(tp in p for p in self.pending_txn_offsets.values())

    def has_pending_txn_offsets(self, tp: tuple[str, int] | None = None) -> bool:
        if tp is None:
            return bool(self.pending_txn_offsets)
        return any(tp in p for p in self.pending_txn_offsets.values())

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's marker is written: its pending offsets become committed or vanish.

        Returns how many offsets the commit made visible.
        """
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return 0
        for tp, committed in pending.items():
            current = self.offsets.get(tp)
            if current is None or current.older_than(committed):
                self.offsets[tp] = committed
        return len(pending)

    def remove_offset(self, tp: tuple[str, int], tombstone_offset: int) -> None:
        """A tombstone for ``tp`` is written at ``tombstone_offset``: it deletes what records before it
        committed, the pending offsets of open transactions included (as a replay of the log would);
        what was written after it stays."""
        current = self.offsets.get(tp)
        if current is not None and current.record_offset < tombstone_offset:
            del self.offsets[tp]
        for producer_id in [pid for pid, p in self.pending_txn_offsets.items() if tp in p]:
            pending = self.pending_txn_offsets[producer_id]
            if pending[tp].record_offset < tombstone_offset:
                del pending[tp]
                if not pending:
                    del self.pending_txn_offsets[producer_id]

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A joining member must share the protocol type and at least one protocol with the group."""
        if self.is_empty:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Kafka's vote: each member votes for its most preferred protocol that all members support."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            for name, _ in member.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        return max(sorted(votes), key=lambda name: votes[name])

    def all_members_joined(self) -> bool:
        return all(m.is_awaiting_join for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer members subscribe to (None when the protocol is not 'consumer')."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        from strom.group.subscription import subscription_topics

        topics: set[str] = set()
        for member in self.members.values():
            topics |= subscription_topics(member.metadata_for(self.protocol))
        return topics


def validate_member(group: Group | None, member_id: str, instance_id: str | None, generation: int) -> int:
    """Kafka's checks of a classic member's request (SyncGroup, Heartbeat, OffsetCommit)."""
    if group is None or group.state == GroupState.DEAD:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def group_record(group: Group) -> tuple[bytes, bytes]:
    """The GroupMetadata record of a classic group, as it stands."""
    value = schema.GroupValue(
        group.protocol_type or "",
        group.generation,
        group.protocol,
        group.leader_id,
        group.state_timestamp,
        [
            schema.MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(group.protocol or ""),
                m.assignment,
            )
            for m in group.members.values()
        ],
    )
    return schema.encode_key(schema.GroupKey(group.group_id)), schema.encode_group_value(value)


def restore_group(group: Group, value: schema.GroupValue) -> None:
    """A loaded GroupMetadata record: the group's members and generation as it last stored them."""
    group.protocol_type = value.protocol_type or None
    group.generation = value.generation
    group.protocol = value.protocol
    group.leader_id = value.leader
    group.members = {}
    group.static_members = {}
    for m in value.members:
        member = Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            value.protocol_type,
            [(value.protocol or "", m.subscription)],
            m.assignment,
        )
        group.members[m.member_id] = member
        if m.group_instance_id:
            group.static_members[m.group_instance_id] = m.member_id
    group.transition(GroupState.STABLE if group.members else GroupState.EMPTY)
    if value.current_state_timestamp > 0:  # retention counts from when it became empty, not from loading
        group.state_timestamp = value.current_state_timestamp
