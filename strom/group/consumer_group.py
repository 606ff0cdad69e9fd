"""Consumer groups (KIP-848) as the rest of the broker sees them: the service that composes their
parts, answers what the classic side and the handlers ask (commits and fetches by member epoch,
listing, describing, deleting), and loads them from __consumer_offsets.

The parts: a group's state (consumer_state.py), its target assignment (consumer_assignment.py),
ConsumerGroupHeartbeat (consumer_heartbeat.py), its members' timers and removal
(consumer_sessions.py), conversions to and from classic groups (migration.py), and classic
members living inside a consumer group (classic_members.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from strom.group import consumer_records as rec
from strom.group.classic_members import ClassicMembers
from strom.group.consumer_assignment import ConsumerAssignment
from strom.group.consumer_heartbeat import ConsumerHeartbeats
from strom.group.consumer_records import ConsumerKey
from strom.group.consumer_sessions import ConsumerSessions
from strom.group.consumer_state import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    cancel_timers,
    group_tombstones,
)
from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import Group
from strom.group.group_config import GroupConfigs
from strom.group.migration import Migration
from strom.group.offset_store import OffsetStore
from strom.group.rebalance import Rebalancer
from strom.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache

log = logging.getLogger("strom.group")


class ConsumerGroupCoordinator:
    """KIP-848 groups of the partitions in ``owned_partitions`` (``coordinator_error`` says whether
    this broker coordinates a group id); their offsets are kept by the classic groups in
    ``holders``, which ``rebalancer`` moves once a group turns classic again; ``configs`` has the
    group-level overrides of the session timeout and heartbeat interval."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        metadata: MetadataCache,
        store: OffsetStore,
        holders: dict[str, Group],
        rebalancer: Rebalancer,
        configs: GroupConfigs,
        coordinator_error: Callable[[str], int],
        owned_partitions: set[int],
    ):
        self.config = config
        self.store = store
        self.holders = holders
        self.configs = configs
        self.coordinator_error = coordinator_error
        self.owned_partitions = owned_partitions
        self.groups: dict[str, ConsumerGroup] = {}
        self.assignment = ConsumerAssignment(config, metadata)
        self.migration = Migration(config, store, self.groups, holders, rebalancer, self.assignment)
        self.sessions = ConsumerSessions(configs, store, self.groups, self.assignment, self.migration)
        self.heartbeats = ConsumerHeartbeats(
            config,
            store,
            self.groups,
            holders,
            configs,
            coordinator_error,
            self.assignment,
            self.sessions,
            self.migration,
        )
        self.classic_members = ClassicMembers(config, self.assignment, self.sessions, self.heartbeats.classic_join)

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
        return set().union(*(self.assignment.subscribed(group, m) for m in group.members.values()))

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
        entries = group_tombstones(group)
        code = await self.store.write(group.partition, entries)
        if not code and self.groups.get(group_id) is group:
            for member in group.members.values():
                cancel_timers(member)
            del self.groups[group_id]
        return code

    def list_groups(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if g.partition in self.owned_partitions]

    def describe(self, group_id: str) -> tuple[int, ConsumerGroup | None]:
        error = self.coordinator_error(group_id)
        if error:
            return error, None
        group = self.groups.get(group_id)
        return (ErrorCode.NONE, group) if group is not None else (ErrorCode.GROUP_ID_NOT_FOUND, None)

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
            self.assignment.regex_version = max(self.assignment.regex_version, resolved.version)
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
            self.holders.setdefault(group.group_id, Group(group.group_id, partition))
            group.topics_signature = self.assignment.signature(group)
            for member in group.members.values():
                self.sessions.schedule_session(group, member)

    def unload(self, partition: int) -> None:
        for group_id in [g for g, group in self.groups.items() if group.partition == partition]:
            for member in self.groups.pop(group_id).members.values():
                cancel_timers(member)
