"""The classic group protocol's requests: JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a
classic group, as Kafka's GroupCoordinator answers them, including static membership (KIP-345)
and the member id handshake (KIP-394: MEMBER_ID_REQUIRED).

Join and Sync requests are parked on futures until the rebalance they belong to completes
(rebalance.py moves the group through it). The coordinator (coordinator.py) checks that this
broker coordinates the group and sends the members of consumer groups elsewhere before a request
gets here.
"""

from __future__ import annotations

import asyncio
import logging

from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import Group, GroupState, Member, validate_member
from strom.group.join import JoinRequest, JoinResult, join_error, new_member_id
from strom.group.offset_store import OffsetStore
from strom.group.rebalance import Rebalancer, cancel_session, complete_join, complete_sync
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.group")


class ClassicProtocol:
    """The classic groups in ``groups`` (the coordinator's table, shared with the offsets), moved
    by ``rebalancer``; ``store`` places a new group in its __consumer_offsets partition."""

    def __init__(
        self, config: GroupCoordinatorConfig, store: OffsetStore, groups: dict[str, Group], rebalancer: Rebalancer
    ):
        self.config = config
        self.store = store
        self.groups = groups
        self.rebalancer = rebalancer

    # -- join --------------------------------------------------------------------------------------
    async def join(self, request: JoinRequest) -> JoinResult:
        """A JoinGroup the coordinator has checked, for a group that is not a consumer group."""
        group_id, member_id, instance_id = request.group_id, request.member_id, request.instance_id
        protocols, session_timeout_ms = request.protocols, request.session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id, self.store.partition_for(group_id))
        if group.state == GroupState.DEAD:
            return join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports(request.protocol_type, protocols):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id and len(group.members) >= self.config.group_max_size:
            return join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        if not member_id:
            new_id = new_member_id(instance_id or request.client_id)
            if instance_id is not None and instance_id in group.static_members:
                return await self._rejoin_static(group, instance_id, new_id, request)
            if instance_id is None and request.require_known_member_id:
                group.pending_members[new_id] = (request.client_id, request.client_host)
                asyncio.get_running_loop().call_later(session_timeout_ms / 1000, self._expire_pending, group, new_id)
                return join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            return await self._add_member_and_rebalance(group, new_id, request)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return await self._add_member_and_rebalance(group, member_id, request)
        if instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
            return join_error(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None:
            return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group.state == GroupState.PREPARING_REBALANCE:
            return await self._update_member_and_rebalance(group, member, request)
        if group.state == GroupState.COMPLETING_REBALANCE and member.matches(protocols):
            return self._current_join_info(group, member)  # a resent JoinGroup: answer what it missed
        if group.state == GroupState.STABLE and member.member_id != group.leader_id and member.matches(protocols):
            return self._current_join_info(group, member)
        return await self._update_member_and_rebalance(group, member, request)

    def _current_join_info(self, group: Group, member: Member) -> JoinResult:
        members = self.rebalancer.member_list(group) if member.member_id == group.leader_id else []
        return JoinResult(
            ErrorCode.NONE,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            member.member_id,
            members,
        )

    async def _add_member_and_rebalance(self, group: Group, member_id: str, request: JoinRequest) -> JoinResult:
        instance_id = request.instance_id
        member = request.member(member_id, is_new=True)
        if group.is_empty:
            group.protocol_type = request.protocol_type
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = member_id
        group.members[member_id] = member
        if instance_id is not None:
            group.static_members[instance_id] = member_id
        group.new_member_added = True
        return await self._await_rebalance(group, member, f"member {member_id} joined")

    async def _update_member_and_rebalance(self, group: Group, member: Member, request: JoinRequest) -> JoinResult:
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        cancel_session(member)
        member.disconnected = False
        complete_join(member, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        return await self._await_rebalance(group, member, f"member {member.member_id} rejoined")

    async def _rejoin_static(self, group: Group, instance_id: str, new_id: str, request: JoinRequest) -> JoinResult:
        """A static member restarted: it takes over its old identity; a stable group does not rebalance."""
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        cancel_session(old)
        complete_join(old, join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        complete_sync(old, ErrorCode.FENCED_INSTANCE_ID, b"")
        member = request.member(new_id, assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        log.info("static member %s of group %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.state == GroupState.STABLE and old.matches(request.protocols):
            self.rebalancer.schedule_session_expiry(group, member)
            code = await self.rebalancer.persist_group(group)
            if code:  # as Kafka: the client retries; the new member id is already the instance's
                return join_error(code, new_id)
            result = JoinResult(
                ErrorCode.NONE, group.generation, group.protocol_type, group.protocol, group.leader_id or "", new_id, []
            )
            # KIP-345: the leader keeps its role but need not reassign (skip_assignment, JoinGroup v9+)
            result.skip_assignment = new_id == group.leader_id
            if result.skip_assignment:
                result.members = self.rebalancer.member_list(group)
            return result
        return await self._await_rebalance(group, member, f"static member {instance_id} rejoined with new metadata")

    async def _await_rebalance(self, group: Group, member: Member, reason: str) -> JoinResult:
        """A JoinGroup is answered when the rebalance it belongs to completes, with the generation's members."""
        member.join_future = asyncio.get_running_loop().create_future()
        future = member.join_future
        if group.state != GroupState.PREPARING_REBALANCE:  # as Kafka's canRebalance: a join already
            # under way (above all the initial delay, which waits for exactly these joins) goes on
            self.rebalancer.prepare_rebalance(group, reason)
        self.rebalancer.maybe_complete_join(group)
        return await self.rebalancer.parked(group, member, future, "JoinGroup")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            client_id, host = group.pending_members.pop(member_id)
            log.info(
                "member %s of group %s (client %s, host %s) expired: it did not rejoin with the member id "
                "it was given (KIP-394) within its session timeout",
                member_id,
                group.group_id,
                client_id,
                host,
            )
            self.rebalancer.maybe_complete_join(group)

    # -- sync --------------------------------------------------------------------------------------
    async def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> tuple[int, bytes, str | None, str | None]:
        group = self.groups.get(group_id)
        error = validate_member(group, member_id, instance_id, generation)
        if (
            not error
            and group is not None
            and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol)
            )
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error:
            return error, b"", None, None
        assert group is not None  # validate_member answers UNKNOWN_MEMBER_ID for no group
        member = group.members[member_id]
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, b"", None, None
        if group.state == GroupState.STABLE:
            self.rebalancer.schedule_session_expiry(group, member)
            return ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol
        # CompletingRebalance: park until the leader's assignment arrives
        member.sync_future = asyncio.get_running_loop().create_future()
        future = member.sync_future
        self.rebalancer.schedule_session_expiry(group, member)
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            # its own task: the leader's connection closing must not stop the assignment being
            # stored and handed to the other members, who are waiting for it
            asyncio.ensure_future(self._store_assignment(group, group.generation))
        code, assignment = await self.rebalancer.parked(group, member, future, "SyncGroup")
        return code, assignment, group.protocol_type, group.protocol

    async def _store_assignment(self, group: Group, generation: int) -> None:
        code = await self.rebalancer.persist_group(group)
        if group.state == GroupState.COMPLETING_REBALANCE and group.generation == generation:
            if code:
                for m in group.members.values():
                    m.assignment = b""
                    complete_sync(m, code, b"")
                self.rebalancer.prepare_rebalance(group, "could not store the assignment")
            else:
                group.transition(GroupState.STABLE)
                for m in group.members.values():
                    if complete_sync(m, ErrorCode.NONE, m.assignment):
                        # as Kafka's propagateAssignment: its session restarts with its answer (a
                        # parked SyncGroup stands in for heartbeats, which the client sends only
                        # once it has its assignment)
                        self.rebalancer.schedule_session_expiry(group, m, heard=False)

    # -- heartbeat and leave -----------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        group = self.groups.get(group_id)
        if group is not None and group.state == GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = validate_member(group, member_id, instance_id, generation)
        if (
            error == ErrorCode.ILLEGAL_GENERATION
            and group is not None
            and group.state == GroupState.PREPARING_REBALANCE
        ):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error:
            return error
        assert group is not None  # validate_member answers UNKNOWN_MEMBER_ID for no group
        member = group.members[member_id]
        self.rebalancer.schedule_session_expiry(group, member)
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        group = self.groups.get(group_id)
        results: list[int] = []
        for member_id, instance_id in leaving:
            if group is None:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and known != member_id:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            member = group.members.get(member_id)
            if member is None:
                if member_id in group.pending_members:
                    del group.pending_members[member_id]
                    results.append(ErrorCode.NONE)
                else:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("member %s left group %s", member_id, group.group_id)
            self.rebalancer.remove_member_and_update(group, member)
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results
