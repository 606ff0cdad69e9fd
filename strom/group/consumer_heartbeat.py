"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, with server-side assignment
(consumer_assignment.py) and incremental reconciliation with member epochs.

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
consumer group in between (migration.py, classic_members.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from strom.group import consumer_records as rec
from strom.group import records as schema
from strom.group.consumer_assignment import ConsumerAssignment
from strom.group.consumer_records import ClassicMetadata, ConsumerKey, TopicPartitions
from strom.group.consumer_sessions import ConsumerSessions
from strom.group.consumer_state import (
    LEAVE_GROUP_EPOCH,
    LEAVE_GROUP_STATIC_EPOCH,
    Checkpoint,
    ConsumerGroup,
    ConsumerMember,
    HeartbeatResult,
    MemberState,
    cancel_revocation,
    cancel_timers,
    heartbeat_error,
    member_tombstones,
    subset,
)
from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import Group
from strom.group.group_config import GroupConfigs
from strom.group.migration import Migration
from strom.group.offset_store import OffsetStore
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.group")


class ConsumerHeartbeats:
    """Answers the heartbeats of the consumer groups in ``groups`` (``holders``: the classic groups
    that keep their offsets, and that an upgrade converts); ``coordinator_error`` says whether
    this broker coordinates a group id, ``configs`` has a group's heartbeat interval."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        store: OffsetStore,
        groups: dict[str, ConsumerGroup],
        holders: dict[str, Group],
        configs: GroupConfigs,
        coordinator_error: Callable[[str], int],
        assignment: ConsumerAssignment,
        sessions: ConsumerSessions,
        migration: Migration,
    ):
        self.config = config
        self.store = store
        self.groups = groups
        self.holders = holders
        self.configs = configs
        self.coordinator_error = coordinator_error
        self.assignment = assignment
        self.sessions = sessions
        self.migration = migration

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
        error = self.coordinator_error(group_id)
        if error:
            return heartbeat_error(error, None, member_id)
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
            return heartbeat_error(ErrorCode.INVALID_REQUEST, invalid, member_id)
        if subscribed_topic_regex and self.assignment.pattern(subscribed_topic_regex) is None:
            return heartbeat_error(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{subscribed_topic_regex}` is not a valid regular expression.",
            )
        if server_assignor is not None and server_assignor not in self.assignment.assignors:
            return heartbeat_error(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: {', '.join(self.assignment.assignors)}.",
            )
        if not member_id:  # v0: the coordinator names the member
            member_id = str(uuid.uuid4())
        group = self.groups.get(group_id)
        if member_epoch in (LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH):
            if group is None:
                return heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", member_id)
            async with group.lock:
                return await self._leave(group, member_id, member_epoch, instance_id)
        if group is None:
            if member_epoch != 0:
                return heartbeat_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", member_id)
            classic = self.holders.get(group_id)
            if classic is not None and not classic.is_empty:
                code, message = await self.migration.upgrade(
                    classic, self.sessions.schedule_session
                )  # Kafka 4's online upgrade
                if code:
                    return heartbeat_error(code, message, member_id)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id, self.store.partition_for(group_id))
            holder = self.holders.get(group_id)
            was = None if holder is None else (holder.protocol_type, holder.protocol, holder.leader_id)
            if holder is None:
                holder = self.holders[group_id] = Group(group_id, group.partition)
            else:
                holder.protocol_type, holder.protocol, holder.leader_id = "consumer", None, None
            created = (group, holder, was)
        else:
            created = None
        async with group.lock:
            if self.groups.get(group_id) is not group:  # deleted or converted while waiting
                return heartbeat_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group changed; retry", member_id)
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
        if self.holders.get(group.group_id) is not holder:
            return
        if was is not None:
            holder.protocol_type, holder.protocol, holder.leader_id = was
        elif (
            holder.is_empty
            and not holder.offsets
            and not holder.pending_txn_offsets
            and not any(holder.commits_in_flight.values())
        ):
            del self.holders[group.group_id]

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
        checkpoint = Checkpoint(group)
        if member is not None:
            checkpoint.save(member)
        if classic is not None:
            known = group.static_members.get(instance_id) if instance_id is not None else None
            if known is not None and known != member_id:
                if not unknown_member:
                    return heartbeat_error(
                        ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to {known}.", member_id
                    )
                previous = group.members[known]
                checkpoint.save(previous)
                member = self._replace_static(group, previous, member_id)
                replaced = True
                entries += member_tombstones(group.group_id, known)
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
                        return heartbeat_error(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {known} with instance id {instance_id} is not released.",
                            member_id,
                        )
                    checkpoint.save(previous)
                    member = self._replace_static(group, previous, member_id)  # takes over its partitions
                    replaced = True
                    entries += member_tombstones(group.group_id, known)
            if member is None and len(group.members) >= self.config.group_consumer_max_size:
                return heartbeat_error(
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
                cancel_revocation(member)
                member.assigned, member.pending_revocation, member.state = {}, {}, MemberState.STABLE
                member.previous_member_epoch, member.member_epoch = member.member_epoch, 0
        else:
            if member is None:
                return heartbeat_error(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                    member_id,
                )
            if instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
                return heartbeat_error(
                    ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to another member.", member_id
                )
            if (
                member_epoch > member.member_epoch
                or member_epoch < member.member_epoch
                and not (
                    member_epoch == member.previous_member_epoch
                    and owned is not None
                    and subset(owned, member.assigned)
                )
            ):
                return heartbeat_error(
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
        entries += self.assignment.resolve_regexes(group, member, describable)
        signature = self.assignment.signature(group)
        if signature != group.topics_signature:  # a topic appeared, went, grew, or matched a regex
            group.topics_signature = signature
            bump = True
        if bump:
            group.group_epoch += 1
            entries.append(
                (rec.encode_key(ConsumerKey(rec.GROUP_METADATA, group.group_id)), rec.encode_epoch(group.group_epoch))
            )
        if group.group_epoch > group.assignment_epoch:
            entries += self.assignment.compute_target(group)
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
            code = await self.store.write(group.partition, entries)
            if code:
                self.sessions.revert(checkpoint)
                return heartbeat_error(code, "could not store the group's state; retry", member_id)
        self.sessions.schedule_session(group, member)
        full = member_epoch == 0 or owned is not None
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            member_id,
            member.member_epoch,
            self.configs.heartbeat_interval_ms(group.group_id),
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
                return heartbeat_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group changed; retry", member_id)
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

    def _replace_static(self, group: ConsumerGroup, previous: ConsumerMember, member_id: str) -> ConsumerMember:
        """KIP-848 static membership: a restarted instance takes its predecessor's place and
        partitions without a new group epoch."""
        cancel_timers(previous)
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
                return heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.", member_id)
            if known != member_id:
                return heartbeat_error(
                    ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to {known}.", member_id
                )
        member = group.members.get(member_id)
        if member is None:
            return heartbeat_error(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.", member_id
            )
        if epoch == LEAVE_GROUP_STATIC_EPOCH and member.instance_id is not None:
            # a static member going away for a while: it keeps its partitions until its session ends
            checkpoint = Checkpoint(group)
            checkpoint.save(member)
            member.previous_member_epoch, member.member_epoch = member.member_epoch, LEAVE_GROUP_STATIC_EPOCH
            code = await self.store.write(
                group.partition,
                [
                    (
                        rec.encode_key(ConsumerKey(rec.CURRENT_ASSIGNMENT, group.group_id, member_id)),
                        rec.encode_current(member.current_record()),
                    )
                ],
            )
            if code:
                self.sessions.revert(checkpoint)
                return heartbeat_error(code, "could not store the group's state; retry", member_id)
            self.sessions.schedule_session(group, member)
            return HeartbeatResult(code, None, member_id, LEAVE_GROUP_STATIC_EPOCH)
        code = await self.sessions.remove(group, member, "left")
        if code:
            return heartbeat_error(code, "could not store the group's state; retry", member_id)
        return HeartbeatResult(code, None, member_id, LEAVE_GROUP_EPOCH)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: TopicPartitions | None) -> None:
        """Kafka's CurrentAssignmentBuilder: one step of the member towards its target."""
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if owned is None or any(
                parts & member.pending_revocation.get(t, frozenset()) for t, parts in owned.items()
            ):
                return  # still holds partitions it must give up
            member.pending_revocation = {}
            cancel_revocation(member)
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
                self.sessions.schedule_revocation(group, member)
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
