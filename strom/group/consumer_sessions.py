"""The timers of consumer group members and their removal: a member that misses its session
timeout, or does not revoke its partitions within its rebalance timeout, is fenced, as in Kafka.

A removal is written (the member's tombstones and a new group epoch) before the member is gone; a
failed write puts the group back, its timers included, and a fired timer tries again shortly.
Removing the last consumer-protocol member of a group whose other members speak the classic
protocol downgrades it (migration.py).
"""

from __future__ import annotations

import asyncio
import logging

from strom.group import consumer_records as rec
from strom.group.consumer_assignment import ConsumerAssignment
from strom.group.consumer_records import ConsumerKey
from strom.group.consumer_state import (
    Checkpoint,
    ConsumerGroup,
    ConsumerMember,
    cancel_classic_timer,
    cancel_revocation,
    cancel_timers,
    member_tombstones,
)
from strom.group.group_config import GroupConfigs
from strom.group.migration import Migration
from strom.group.offset_store import OffsetStore
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.group")

_EXPIRY_RETRY_S = 0.5  # Kafka's CoordinatorTimer retries a failed expiry after 500 ms


class ConsumerSessions:
    """Session and revocation timers of the members of the consumer groups in ``groups``; a
    group's session timeout comes from ``configs`` (its override, or the broker's)."""

    def __init__(
        self,
        configs: GroupConfigs,
        store: OffsetStore,
        groups: dict[str, ConsumerGroup],
        assignment: ConsumerAssignment,
        migration: Migration,
    ):
        self.configs = configs
        self.store = store
        self.groups = groups
        self.assignment = assignment
        self.migration = migration

    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember, at: float | None = None) -> None:
        """``at``: the event loop's time of expiry (default: a session timeout from now)."""
        if member.session_timer is not None:
            member.session_timer.cancel()
        loop = asyncio.get_running_loop()
        if member.classic is not None:  # the session timeout its JoinGroup asked for
            timeout, why = member.classic.session_timeout_ms, "expired: no heartbeat within its session timeout"
        else:
            timeout = self.configs.session_timeout_ms(group.group_id)
            why = f"expired: no heartbeat within its group's consumer session timeout ({timeout} ms)"
        member.session_timer = loop.call_at(
            loop.time() + timeout / 1000 if at is None else at, self.expire, group, member, "session", why
        )

    def schedule_revocation(self, group: ConsumerGroup, member: ConsumerMember, at: float | None = None) -> None:
        cancel_revocation(member)
        loop = asyncio.get_running_loop()
        member.revocation_timer = loop.call_at(
            loop.time() + member.rebalance_timeout_ms / 1000 if at is None else at,
            self.expire,
            group,
            member,
            "revocation",
            f"was fenced: it did not revoke its partitions within its rebalance timeout ({member.rebalance_timeout_ms} ms)",
        )

    def revert(self, checkpoint: Checkpoint) -> None:
        """After a failed write: the group as before, each timer the operation cancelled running
        again towards its old deadline (unless the group has been unloaded meanwhile)."""
        group = checkpoint.group
        loaded = self.groups.get(group.group_id) is group
        for member, session, revocation in checkpoint.restore():
            if not loaded or group.members.get(member.member_id) is not member:
                cancel_timers(member)
                continue
            if session is not None and session.cancelled():
                member.session_timer = None
                self.schedule_session(group, member, session.when())
            if revocation is not None and revocation.cancelled():
                member.revocation_timer = None
                self.schedule_revocation(group, member, revocation.when())

    def expire(self, group: ConsumerGroup, member: ConsumerMember, timer: str, why: str) -> None:
        async def remove() -> None:
            async with group.lock:
                failed = await self.remove(group, member, why)
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
                        self.schedule_session(group, member, retry)
                    elif timer == "revocation":
                        self.schedule_revocation(group, member, retry)
                    else:  # a classic member's join or sync deadline
                        cancel_classic_timer(member)
                        member.classic_timer = loop.call_at(retry, self.expire, group, member, timer, why)

        if group.members.get(member.member_id) is member and self.groups.get(group.group_id) is group:
            asyncio.ensure_future(remove())

    async def remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> int:
        """Removes ``member`` once its tombstones are written; a failed write leaves it a member,
        its timers running as before."""
        if group.members.get(member.member_id) is not member:
            return ErrorCode.NONE
        if self.migration.should_downgrade(group, member):  # the last consumer-protocol member
            return await self.migration.downgrade(group, member)
        checkpoint = Checkpoint(group)
        checkpoint.save(member)
        cancel_timers(member)
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
        entries = member_tombstones(group.group_id, member.member_id) + self.assignment.unused_regexes(group)
        entries.append(
            (rec.encode_key(ConsumerKey(rec.GROUP_METADATA, group.group_id)), rec.encode_epoch(group.group_epoch))
        )
        code = await self.store.write(group.partition, entries)
        if code:
            log.warning(
                "member %s stays in consumer group %s: its removal could not be written (error %d)",
                member.member_id,
                group.group_id,
                code,
            )
            self.revert(checkpoint)
        return code
