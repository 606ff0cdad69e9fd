"""Online migration between classic and consumer groups (Kafka 4's ``group.consumer.migration.policy``).

As in Kafka 4.0's GroupMetadataManager:

- **Upgrade.** A ``group.protocol=consumer`` member's first heartbeat to a live classic group
  (protocol type ``consumer``) turns it into a consumer group when the policy allows upgrades
  (``bidirectional``, ``upgrade``): every classic member becomes a consumer-group member at the
  classic generation as its epoch, keeping its last assignment as current and target assignment,
  and the group epoch is that generation. The classic GroupMetadata record is tombstoned and the
  consumer group's records written in one batch. Members in the middle of a classic rebalance
  are told REBALANCE_IN_PROGRESS and rejoin the new group. With upgrades disabled the member gets
  GROUP_ID_NOT_FOUND ("Group g is not a consumer group"), as Kafka answers.
- **Downgrade.** When the last consumer-protocol member leaves (or is fenced) and only classic
  members remain, the group becomes classic again if the policy allows downgrades
  (``bidirectional``, ``downgrade``): the consumer group's records are tombstoned and a classic
  GroupMetadata record written, with the group epoch as the generation and each member's target
  assignment as its assignment; then a rebalance starts, so the members rejoin the classic way.

While classic members live inside a consumer group, classic_members.py speaks their protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from strom.group import consumer_records as rec
from strom.group.consumer_assignment import ConsumerAssignment
from strom.group.consumer_records import ClassicMetadata, ConsumerKey
from strom.group.consumer_state import ConsumerGroup, ConsumerMember, MemberState, cancel_timers, group_tombstones
from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import Group, Member, group_record
from strom.group.offset_store import OffsetStore
from strom.group.rebalance import Rebalancer
from strom.group.records import GroupKey, encode_key
from strom.group.subscription import decode_assignment, decode_subscription, encode_assignment, subscription_version
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.group")

PROTOCOL_TYPE = "consumer"


def upgrade_enabled(policy: str) -> bool:
    return policy in ("bidirectional", "upgrade")


def downgrade_enabled(policy: str) -> bool:
    return policy in ("bidirectional", "downgrade")


class Migration:
    """Converts live groups between the two kinds: consumer groups in ``groups``, classic ones (and
    every group's offsets holder) in ``holders``, moved by ``rebalancer`` once classic again."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        store: OffsetStore,
        groups: dict[str, ConsumerGroup],
        holders: dict[str, Group],
        rebalancer: Rebalancer,
        assignment: ConsumerAssignment,
    ):
        self.config = config
        self.store = store
        self.groups = groups
        self.holders = holders
        self.rebalancer = rebalancer
        self.assignment = assignment
        self._upgrading = asyncio.Lock()

    @property
    def policy(self) -> str:
        return self.config.group_consumer_migration_policy

    # -- upgrade -----------------------------------------------------------------------------------
    def upgrade_error(self, holder: Group) -> str | None:
        """Why a live classic group cannot become a consumer group (Kafka's validateOnlineUpgrade)."""
        if not upgrade_enabled(self.policy):
            return "the online upgrade is disabled"
        if holder.protocol_type != PROTOCOL_TYPE:
            return "the group does not use the consumer embedded protocol"
        if len(holder.members) > self.config.group_consumer_max_size:
            return "the group size exceeds the consumer group maximum size"
        return None

    async def upgrade(
        self, holder: Group, schedule_session: Callable[[ConsumerGroup, ConsumerMember], None]
    ) -> tuple[int, str | None]:
        """Converts the live classic group ``holder``, its members' sessions started with
        ``schedule_session``; (error code, message) when it cannot."""
        async with self._upgrading:
            if self.groups.get(holder.group_id) is not None:
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
                assigned = self.assignment.by_id(decode_assignment(m.assignment))
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
            code = await self.store.write(group.partition, entries)
            if code:
                return code, "could not store the group's state; retry"
            if self.holders.get(holder.group_id) is not holder:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group changed; retry"
            self.rebalancer.release_members(holder, ErrorCode.REBALANCE_IN_PROGRESS)
            holder.protocol_type, holder.protocol, holder.leader_id = PROTOCOL_TYPE, None, None
            group.topics_signature = self.assignment.signature(group)
            self.groups[group.group_id] = group
            for member in group.members.values():
                schedule_session(group, member)
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
        if len(others) > self.config.group_max_size:
            log.info("cannot downgrade consumer group %s: it is larger than group.max.size", group.group_id)
            return False
        return True

    async def downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> int:
        """``leaving`` goes and the group turns classic; nothing changes when the write fails."""
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
            m.assignment = encode_assignment(version, self.assignment.by_name(group.target.get(m.member_id, {})))
        entries = group_tombstones(group)
        entries.append(group_record(shape))
        code = await self.store.write(group.partition, entries)
        if code:
            log.warning("consumer group %s stays as it is: its downgrade could not be written (error %d)", gid, code)
            return code
        for member in group.members.values():
            cancel_timers(member)
        if self.groups.get(gid) is group:
            del self.groups[gid]
        holder = self.holders.get(gid)
        if holder is None:
            holder = self.holders[gid] = Group(gid, group.partition)
        self.rebalancer.adopt(holder, shape, f"downgrade of group {gid} from consumer to classic")
        log.info(
            "consumer group %s downgraded to a classic group (generation %d, %d members) as %s left",
            gid,
            shape.generation,
            len(shape.members),
            leaving.member_id,
        )
        return ErrorCode.NONE
