"""The classic rebalance: the state machine of a classic group and its members' sessions.

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance ──▶ Stable

A rebalance waits until every member has rejoined (or the rebalance timeout, and the first one
group.initial.rebalance.delay.ms for more members), then answers the parked JoinGroups with the
new generation. Sessions run on the event loop; a member that goes quiet is removed and the group
rebalances. The requests that drive it are classic_protocol.py's; keeping the machine apart lets
the online migration (migration.py) hand members in and out without the request side.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import Group, GroupState, Member, group_record
from strom.group.join import JoinResult, join_error
from strom.group.offset_store import OffsetStore
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.group")


def cancel_session(member: Member) -> None:
    if member.session_timer is not None:
        member.session_timer.cancel()
        member.session_timer = None


def complete_join(member: Member, result: JoinResult) -> None:
    if member.join_future is not None and not member.join_future.done():
        member.join_future.set_result(result)
    member.join_future = None


def complete_sync(member: Member, code: int, assignment: bytes) -> bool:
    """Answer the member's parked SyncGroup, if it has one (returns whether it had)."""
    parked = member.sync_future is not None and not member.sync_future.done()
    if parked:
        member.sync_future.set_result((code, assignment))  # type: ignore[union-attr]
    member.sync_future = None
    return parked


class Rebalancer:
    """Moves classic groups through their rebalances and expires their members' sessions; stores
    a group's metadata in ``store`` when a generation is formed or a group empties."""

    def __init__(self, config: GroupCoordinatorConfig, store: OffsetStore):
        self.config = config
        self.store = store
        self.completed_rebalances = 0  # metrics: generations handed to members

    def member_list(self, group: Group) -> list[dict]:
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata_for(group.protocol or ""),
            }
            for m in group.members.values()
        ]

    async def parked(self, group: Group, member: Member, future: asyncio.Future, request: str) -> Any:
        """Wait for the answer to a parked JoinGroup or SyncGroup.

        The wait is shielded because a closed connection cancels its request's task, and the
        member's future must outlive that: a member whose JoinGroup was taken still counts as
        joined, so the rebalance it belongs to completes (without the shield it would wait for
        the rebalance timeout, five minutes by default, for a member that can never rejoin). What
        the broker learns from the disconnect instead is that the member has gone quiet: its
        session timeout runs from that moment, whatever phase the group is in, so a consumer that
        dies mid-rebalance is gone one session timeout after it died, as one that dies between
        heartbeats is. Kafka cannot tell (its parked requests keep no link to their socket) and
        removes such a member only a session timeout after the rebalance completes.
        """
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if not future.done() and group.members.get(member.member_id) is member and not member.disconnected:
                member.disconnected = True
                log.info(
                    "member %s of group %s (client %s, host %s) disconnected while its %s was parked: "
                    "it is removed unless heard from within its session timeout (%d ms)",
                    member.member_id,
                    group.group_id,
                    member.client_id,
                    member.client_host,
                    request,
                    member.session_timeout_ms,
                )
                self.schedule_session_expiry(group, member, heard=False)
            raise

    # -- rebalance state machine -------------------------------------------------------------------
    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():  # their assignment is obsolete: rejoin
                complete_sync(member, ErrorCode.REBALANCE_IN_PROGRESS, b"")
        loop = asyncio.get_running_loop()
        if group.join_timer:
            group.join_timer.cancel()
        initial = group.state == GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE)
        log.info("preparing to rebalance group %s (generation %d): %s", group.group_id, group.generation, reason)
        if initial and self.config.group_initial_rebalance_delay_ms > 0:
            # Kafka's InitialDelayedJoin: wait for more members before the first assignment.
            delay = min(self.config.group_initial_rebalance_delay_ms, group.max_rebalance_timeout_ms())
            remaining = max(0, group.max_rebalance_timeout_ms() - delay)
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_delay, group, delay, remaining)
            group.initial_delay = True
        else:
            group.initial_delay = False
            group.join_timer = loop.call_later(
                group.max_rebalance_timeout_ms() / 1000, self._complete_rebalance_join, group
            )

    def _on_initial_delay(self, group: Group, delay: int, remaining: int) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            group.join_timer = asyncio.get_running_loop().call_later(
                step / 1000, self._on_initial_delay, group, delay, remaining - step
            )
            return
        group.initial_delay = False
        if group.all_members_joined():
            self._complete_rebalance_join(group)
        else:
            group.join_timer = asyncio.get_running_loop().call_later(
                group.max_rebalance_timeout_ms() / 1000, self._complete_rebalance_join, group
            )

    def maybe_complete_join(self, group: Group) -> None:
        if group.state == GroupState.PREPARING_REBALANCE and not group.initial_delay and group.all_members_joined():
            self._complete_rebalance_join(group)

    def _complete_rebalance_join(self, group: Group) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if group.join_timer:
            group.join_timer.cancel()
            group.join_timer = None
        for member in [m for m in group.members.values() if not m.is_awaiting_join]:
            log.info("removing member %s of group %s: it did not rejoin in time", member.member_id, group.group_id)
            self.remove_member(group, member)
        group.pending_members.clear()
        if group.is_empty:
            group.generation += 1
            group.protocol = None
            group.leader_id = None
            group.transition(GroupState.EMPTY)
            asyncio.ensure_future(self.persist_group(group))
            return
        group.generation += 1
        group.protocol = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE)
        self.completed_rebalances += 1
        log.info(
            "group %s generation %d: %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
            group.leader_id,
        )
        members = self.member_list(group)
        for member in group.members.values():
            result = JoinResult(
                ErrorCode.NONE,
                group.generation,
                group.protocol_type,
                group.protocol,
                group.leader_id,
                member.member_id,
                members if member.member_id == group.leader_id else [],
            )
            member.is_new = False
            complete_join(member, result)
            self.schedule_session_expiry(group, member, heard=False)

    def remove_member(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        if member.group_instance_id and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        cancel_session(member)
        complete_join(member, join_error(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        complete_sync(member, ErrorCode.UNKNOWN_MEMBER_ID, b"")
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def remove_member_and_update(self, group: Group, member: Member) -> None:
        self.remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"member {member.member_id} left")
        elif group.state == GroupState.PREPARING_REBALANCE:
            self.maybe_complete_join(group)

    # -- sessions ----------------------------------------------------------------------------------
    def schedule_session_expiry(self, group: Group, member: Member, *, heard: bool = True) -> None:
        """Restart the member's session timeout. ``heard``: a request of the member's own arrived
        (else the broker restarts it on the member's behalf, when a rebalance answers it); a member
        whose parked request lost its connection keeps the deadline its disconnect set until it is
        heard from."""
        if heard:
            member.disconnected = False
        elif member.disconnected and member.session_timer is not None:
            return
        cancel_session(member)
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._on_session_expired, group, member
        )

    def _on_session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if not member.disconnected and (member.is_awaiting_join or member.is_awaiting_sync):
            return  # as Kafka: a parked request stands in for heartbeats; its answer restarts the session
        log.info(
            "member %s of group %s (client %s, host %s%s) expired: no heartbeat within its session timeout "
            "(%d ms), group state %s",
            member.member_id,
            group.group_id,
            member.client_id,
            member.client_host,
            f", instance {member.group_instance_id}" if member.group_instance_id else "",
            member.session_timeout_ms,
            group.state.value,
        )
        self.remove_member_and_update(group, member)

    def release_members(self, group: Group, code: int) -> None:
        """The group became a consumer group (online upgrade): its classic members, answered
        ``code`` where they wait, are its members no more (the consumer group has them now)."""
        for member in group.members.values():
            cancel_session(member)
            complete_join(member, join_error(code, member.member_id))
            complete_sync(member, code, b"")
        if group.join_timer:
            group.join_timer.cancel()
            group.join_timer = None
        group.members, group.static_members, group.pending_members = {}, {}, {}
        group.initial_delay = False
        group.transition(GroupState.EMPTY)

    def adopt(self, holder: Group, shape: Group, reason: str) -> None:
        """A consumer group turned classic (online downgrade): ``holder`` (which keeps the offsets)
        takes ``shape``'s members, stable at its generation, and rebalances so that they rejoin."""
        holder.generation, holder.protocol_type = shape.generation, shape.protocol_type
        holder.protocol, holder.leader_id = shape.protocol, shape.leader_id
        holder.members, holder.static_members = shape.members, shape.static_members
        holder.transition(GroupState.STABLE)
        for member in holder.members.values():
            self.schedule_session_expiry(holder, member)
        self.prepare_rebalance(holder, reason)

    async def persist_group(self, group: Group) -> int:
        return await self.store.write(group.partition, [group_record(group)])

    def unload(self, group: Group) -> None:
        for member in group.members.values():
            cancel_session(member)
            complete_join(member, join_error(ErrorCode.NOT_COORDINATOR))
            complete_sync(member, ErrorCode.NOT_COORDINATOR, b"")
        if group.join_timer:
            group.join_timer.cancel()
        group.transition(GroupState.DEAD)
