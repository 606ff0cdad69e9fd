"""The group coordinator: consumer group membership (classic protocol) and committed offsets.

A broker coordinates the groups whose __consumer_offsets partition it leads. Join and Sync
requests are parked on futures until the rebalance they belong to completes; timers (session
expiry, rebalance timeout, the initial rebalance delay) run on the event loop. The rules follow
Kafka's GroupCoordinator, including static membership (KIP-345) and the member id handshake
(KIP-394: MEMBER_ID_REQUIRED).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from strom.clock import wall_ms
from strom.group import records as schema
from strom.group.consumer_group import ConsumerGroupCoordinator
from strom.group.consumer_records import ConsumerKey
from strom.group.group import CommittedOffset, Group, GroupState, Member
from strom.group.group_config import GroupConfigs
from strom.group.offset_store import OFFSETS_TOPIC, OffsetStore, OffsetStoreConfig
from strom.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.partition import Partition
    from strom.replication.replica_manager import ReplicaManager

# the transaction coordinator's verify_partitions(transactional id, producer id, epoch, partitions):
# error codes by partition (KIP-890 part 1)
VerifyTxnPartitions = Callable[[str, int, int, list[tuple[str, int]]], Awaitable[dict[tuple[str, int], int]]]


class GroupCoordinatorConfig(OffsetStoreConfig, Protocol):
    """The broker configs the group coordinators follow (``BrokerConfig`` has them all)."""

    @property
    def group_min_session_timeout_ms(self) -> int: ...
    @property
    def group_max_session_timeout_ms(self) -> int: ...
    @property
    def group_initial_rebalance_delay_ms(self) -> int: ...
    @property
    def group_max_size(self) -> int: ...
    @property
    def offsets_retention_minutes(self) -> int: ...
    @property
    def group_consumer_session_timeout_ms(self) -> int: ...
    @property
    def group_consumer_heartbeat_interval_ms(self) -> int: ...
    @property
    def group_consumer_max_size(self) -> int: ...
    @property
    def group_consumer_assignors(self) -> tuple[str, ...]: ...
    @property
    def group_consumer_migration_policy(self) -> str: ...


log = logging.getLogger("strom.group")

# Transaction coordinator errors of a verification that the client should retry.
_RETRIABLE_VERIFICATION = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}

OFFSET_METADATA_MAX_BYTES = 4096


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup as the coordinator reads it, handed whole to whichever group takes the member: a
    classic group, or a consumer group that has classic members (Kafka 4)."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    require_known_member_id: bool

    def member(self, member_id: str, *, assignment: bytes = b"", is_new: bool = False) -> Member:
        """The classic group member this request makes, under the id the coordinator gave it."""
        return Member(
            member_id,
            self.instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.protocol_type,
            self.protocols,
            assignment=assignment,
            is_new=is_new,
        )


@dataclass
class JoinResult:
    error_code: int
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[dict] | None = None
    skip_assignment: bool = False


class _Offset:
    """An ``on_append`` callback for OffsetStore.write that remembers where the batch went."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = -1

    def __call__(self, offset: int) -> None:
        self.value = offset


def _join_error(code: int, member_id: str = "") -> JoinResult:
    return JoinResult(code, member_id=member_id)


def _new_member_id(prefix: str) -> str:
    """Kafka's ``<client id or instance id>-<uuid>``, with the prefix cut so that the id fits a record."""
    room = schema.MAX_STRING_BYTES - 37
    if not schema.fits(prefix + "-" * 37):
        prefix = prefix.encode()[:room].decode("utf-8", "ignore")
    return f"{prefix}-{uuid.uuid4()}"


class GroupCoordinator:
    """Coordinates the groups of the __consumer_offsets partitions this broker leads (``replicas``,
    which also says whether it is fenced); ``metadata`` has the topics that groups subscribe to;
    ``verify_txn_partitions`` asks the transaction coordinator about a TxnOffsetCommit."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        *,
        verify_txn_partitions: VerifyTxnPartitions,
    ):
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self._verify_txn_partitions = verify_txn_partitions
        self.store = OffsetStore(replicas, metadata, config)
        self.groups: dict[str, Group] = {}
        self.owned_partitions: set[int] = set()
        self.completed_rebalances = 0  # metrics: generations handed to members
        # (offsets partition, producer id) -> groups holding that producer's pending offsets,
        # so that a marker (complete_txn) finds them without scanning every group
        self._txn_groups: dict[tuple[int, int], set[str]] = {}
        self.configs = GroupConfigs(None, self.config)  # group-level configs; the broker starts it
        self.consumer = ConsumerGroupCoordinator(self)  # KIP-848 groups, beside the classic ones

    # -- ownership ---------------------------------------------------------------------------------
    def on_leadership_change(self, partition: Partition, is_leader: bool) -> None:
        if partition.topic != OFFSETS_TOPIC:
            return
        if is_leader and partition.index not in self.owned_partitions:
            self._load(partition)
            self.owned_partitions.add(partition.index)
        elif not is_leader and partition.index in self.owned_partitions:
            self.owned_partitions.discard(partition.index)
            for group_id in [g for g, group in self.groups.items() if group.partition == partition.index]:
                self._unload(self.groups.pop(group_id))
            for key in [k for k in self._txn_groups if k[0] == partition.index]:
                del self._txn_groups[key]
            self.consumer.unload(partition.index)

    def _load(self, partition: Partition) -> None:
        """Replay the partition as Kafka's GroupMetadataManager loads it.

        Offsets in a transactional batch stay pending per producer id until that producer's
        marker: a commit makes them count (unless a later record of the same partition already
        did), an abort drops them. Transactions still open at the end stay pending: their
        coordinator will write the marker, and WriteTxnMarkers then calls complete_txn.
        """
        loaded: dict[str, Group] = {}
        pending: dict[int, dict[tuple[str, str, int], CommittedOffset]] = {}  # producer -> (group, tp) -> offset

        def group_of(group_id: str) -> Group:
            group = loaded.get(group_id)
            if group is None:
                group = loaded[group_id] = Group(group_id, partition.index)
            return group

        for batch in OffsetStore.replay(partition):
            if batch.marker is not None:
                settled = pending.pop(batch.producer_id, {})
                if batch.marker:
                    for (group_id, topic, index), committed in settled.items():
                        offsets = group_of(group_id).offsets
                        current = offsets.get((topic, index))
                        if current is None or current.older_than(committed):
                            offsets[(topic, index)] = committed
                continue
            for key, value in batch.records:
                if isinstance(key, schema.OffsetKey):
                    gtp = (key.group, key.topic, key.partition)
                    if batch.transactional:
                        txn = pending.setdefault(batch.producer_id, {})
                        if value is None:
                            txn.pop(gtp, None)
                        else:
                            txn[gtp] = self._decode_offset(value, batch.base_offset)
                    elif value is None:
                        for txn in pending.values():  # a tombstone deletes what open transactions wrote before it
                            txn.pop(gtp, None)
                        if key.group in loaded:
                            loaded[key.group].offsets.pop((key.topic, key.partition), None)
                    else:
                        group_of(key.group).offsets[(key.topic, key.partition)] = self._decode_offset(
                            value, batch.base_offset
                        )
                elif isinstance(key, ConsumerKey):
                    try:
                        self.consumer.replay(partition.index, key, value)
                    except (schema.RecordFormatError, ValueError) as exc:
                        log.warning("skipping unreadable consumer group record of %s: %s", key.group, exc)
                elif value is None:
                    # the group's metadata goes; its offsets are records of their own and stay (an
                    # online upgrade tombstones the classic metadata of a group that keeps its offsets)
                    dropped = loaded.pop(key.group, None)
                    if dropped is not None and dropped.offsets:
                        group_of(key.group).offsets = dropped.offsets
                else:
                    self._restore_metadata(group_of(key.group), schema.decode_group_value(value))
        for producer_id, txn in pending.items():
            for (group_id, topic, index), committed in txn.items():
                group_of(group_id).pending_txn_offsets.setdefault(producer_id, {})[(topic, index)] = committed
                self._txn_groups.setdefault((partition.index, producer_id), set()).add(group_id)
        for group_id, group in loaded.items():
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_session_expiry(group, member)
        self.consumer.loaded(partition.index)
        if loaded:
            log.info(
                "loaded %d groups from %s-%d (%d open transactions)",
                len(loaded),
                OFFSETS_TOPIC,
                partition.index,
                sum(1 for txn in pending.values() if txn),
            )

    @staticmethod
    def _decode_offset(value: bytes, record_offset: int) -> CommittedOffset:
        v = schema.decode_offset_value(value)
        return CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, record_offset)

    def _restore_metadata(self, group: Group, value: schema.GroupValue) -> None:
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

    def _unload(self, group: Group) -> None:
        for member in group.members.values():
            self._cancel_session(member)
            self._complete_join(member, _join_error(ErrorCode.NOT_COORDINATOR))
            self._complete_sync(member, ErrorCode.NOT_COORDINATOR, b"")
        if group.join_timer:
            group.join_timer.cancel()
        group.transition(GroupState.DEAD)

    def coordinator_error(self, group_id: str) -> int:
        """NONE when this broker coordinates ``group_id``, else the error the client acts on."""
        if not group_id or not schema.fits(group_id):  # too long for __consumer_offsets' int16 strings
            return ErrorCode.INVALID_GROUP_ID
        if OFFSETS_TOPIC not in self.metadata.topics:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.store.partition_for(group_id) not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        if self.replicas.fenced:
            # cut off from ZooKeeper: another broker may lead the group's partition by now and take
            # commits, so this one's cache may be stale (the chaos group checker saw OffsetFetch
            # answers going backwards); the transaction coordinator steps back the same way
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # -- join --------------------------------------------------------------------------------------
    async def join_group(self, request: JoinRequest) -> JoinResult:
        group_id, member_id, instance_id = request.group_id, request.member_id, request.instance_id
        protocols, session_timeout_ms = request.protocols, request.session_timeout_ms
        error = self.coordinator_error(group_id)
        if error:
            return _join_error(error, member_id)
        if not all(
            schema.fits(s) for s in (instance_id or "", request.protocol_type, *(name for name, _ in protocols))
        ):
            return _join_error(ErrorCode.INVALID_REQUEST, member_id)  # it could never be stored
        if not (
            self.config.group_min_session_timeout_ms <= session_timeout_ms <= self.config.group_max_session_timeout_ms
        ):
            return _join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        live = self.consumer.groups.get(group_id)
        if live is not None and live.members:  # a classic member of a consumer group (Kafka 4)
            return await self.consumer.classic_members.join(live, request)
        error = await self.consumer.before_classic_join(group_id)
        if error:
            return _join_error(error, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id, self.store.partition_for(group_id))
        if group.state == GroupState.DEAD:
            return _join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports(request.protocol_type, protocols):
            return _join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id and len(group.members) >= self.config.group_max_size:
            return _join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        if not member_id:
            new_id = _new_member_id(instance_id or request.client_id)
            if instance_id is not None and instance_id in group.static_members:
                return await self._rejoin_static(group, instance_id, new_id, request)
            if instance_id is None and request.require_known_member_id:
                group.pending_members[new_id] = (request.client_id, request.client_host)
                asyncio.get_running_loop().call_later(session_timeout_ms / 1000, self._expire_pending, group, new_id)
                return _join_error(ErrorCode.MEMBER_ID_REQUIRED, new_id)
            return await self._add_member_and_rebalance(group, new_id, request)
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return await self._add_member_and_rebalance(group, member_id, request)
        if instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
            return _join_error(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None:
            return _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group.state == GroupState.PREPARING_REBALANCE:
            return await self._update_member_and_rebalance(group, member, request)
        if group.state == GroupState.COMPLETING_REBALANCE and member.matches(protocols):
            return self._current_join_info(group, member)  # a resent JoinGroup: answer what it missed
        if group.state == GroupState.STABLE and member.member_id != group.leader_id and member.matches(protocols):
            return self._current_join_info(group, member)
        return await self._update_member_and_rebalance(group, member, request)

    def _current_join_info(self, group: Group, member: Member) -> JoinResult:
        members = self._member_list(group) if member.member_id == group.leader_id else []
        return JoinResult(
            ErrorCode.NONE,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader_id or "",
            member.member_id,
            members,
        )

    def _member_list(self, group: Group) -> list[dict]:
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata_for(group.protocol or ""),
            }
            for m in group.members.values()
        ]

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
        self._cancel_session(member)
        member.disconnected = False
        self._complete_join(member, _join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        return await self._await_rebalance(group, member, f"member {member.member_id} rejoined")

    async def _rejoin_static(self, group: Group, instance_id: str, new_id: str, request: JoinRequest) -> JoinResult:
        """A static member restarted: it takes over its old identity; a stable group does not rebalance."""
        old_id = group.static_members[instance_id]
        old = group.members.pop(old_id)
        self._cancel_session(old)
        self._complete_join(old, _join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self._complete_sync(old, ErrorCode.FENCED_INSTANCE_ID, b"")
        member = request.member(new_id, assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        log.info("static member %s of group %s rejoined as %s", instance_id, group.group_id, new_id)
        if group.state == GroupState.STABLE and old.matches(request.protocols):
            self._schedule_session_expiry(group, member)
            code = await self._persist_group(group)
            if code:  # as Kafka: the client retries; the new member id is already the instance's
                return _join_error(code, new_id)
            result = JoinResult(
                ErrorCode.NONE, group.generation, group.protocol_type, group.protocol, group.leader_id or "", new_id, []
            )
            # KIP-345: the leader keeps its role but need not reassign (skip_assignment, JoinGroup v9+)
            result.skip_assignment = new_id == group.leader_id
            if result.skip_assignment:
                result.members = self._member_list(group)
            return result
        return await self._await_rebalance(group, member, f"static member {instance_id} rejoined with new metadata")

    async def _await_rebalance(self, group: Group, member: Member, reason: str) -> JoinResult:
        """A JoinGroup is answered when the rebalance it belongs to completes, with the generation's members."""
        member.join_future = asyncio.get_running_loop().create_future()
        future = member.join_future
        if group.state != GroupState.PREPARING_REBALANCE:  # as Kafka's canRebalance: a join already
            # under way (above all the initial delay, which waits for exactly these joins) goes on
            self._prepare_rebalance(group, reason)
        self._maybe_complete_join(group)
        return await self._parked(group, member, future, "JoinGroup")

    async def _parked(self, group: Group, member: Member, future: asyncio.Future, request: str) -> Any:
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
                self._schedule_session_expiry(group, member, heard=False)
            raise

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
            self._maybe_complete_join(group)

    # -- rebalance state machine -------------------------------------------------------------------
    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():  # their assignment is obsolete: rejoin
                self._complete_sync(member, ErrorCode.REBALANCE_IN_PROGRESS, b"")
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

    def _maybe_complete_join(self, group: Group) -> None:
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
            self._remove_member(group, member)
        group.pending_members.clear()
        if group.is_empty:
            group.generation += 1
            group.protocol = None
            group.leader_id = None
            group.transition(GroupState.EMPTY)
            asyncio.ensure_future(self._persist_group(group))
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
        members = self._member_list(group)
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
            self._complete_join(member, result)
            self._schedule_session_expiry(group, member, heard=False)

    # -- sync --------------------------------------------------------------------------------------
    async def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> tuple[int, bytes, str | None, str | None]:
        error = self.coordinator_error(group_id)
        live = self.consumer.groups.get(group_id)
        if not error and live is not None:
            return await self.consumer.classic_members.sync(
                live, generation, member_id, instance_id, protocol_type, protocol_name
            )
        group = self.groups.get(group_id)
        if not error:
            error = self._validate_member(group, member_id, instance_id, generation)
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
        assert group is not None  # _validate_member answers UNKNOWN_MEMBER_ID for no group
        member = group.members[member_id]
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, b"", None, None
        if group.state == GroupState.STABLE:
            self._schedule_session_expiry(group, member)
            return ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol
        # CompletingRebalance: park until the leader's assignment arrives
        member.sync_future = asyncio.get_running_loop().create_future()
        future = member.sync_future
        self._schedule_session_expiry(group, member)
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            # its own task: the leader's connection closing must not stop the assignment being
            # stored and handed to the other members, who are waiting for it
            asyncio.ensure_future(self._store_assignment(group, group.generation))
        code, assignment = await self._parked(group, member, future, "SyncGroup")
        return code, assignment, group.protocol_type, group.protocol

    async def _store_assignment(self, group: Group, generation: int) -> None:
        code = await self._persist_group(group)
        if group.state == GroupState.COMPLETING_REBALANCE and group.generation == generation:
            if code:
                for m in group.members.values():
                    m.assignment = b""
                    self._complete_sync(m, code, b"")
                self._prepare_rebalance(group, "could not store the assignment")
            else:
                group.transition(GroupState.STABLE)
                for m in group.members.values():
                    if self._complete_sync(m, ErrorCode.NONE, m.assignment):
                        # as Kafka's propagateAssignment: its session restarts with its answer (a
                        # parked SyncGroup stands in for heartbeats, which the client sends only
                        # once it has its assignment)
                        self._schedule_session_expiry(group, m, heard=False)

    def _validate_member(self, group: Group | None, member_id: str, instance_id: str | None, generation: int) -> int:
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None and group.static_members.get(instance_id) not in (None, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # -- heartbeat and leave -----------------------------------------------------------------------
    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        error = self.coordinator_error(group_id)
        if error:
            return error
        live = self.consumer.groups.get(group_id)
        if live is not None:
            return self.consumer.classic_members.heartbeat(live, generation, member_id, instance_id)
        group = self.groups.get(group_id)
        if group is not None and group.state == GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._validate_member(group, member_id, instance_id, generation)
        if (
            error == ErrorCode.ILLEGAL_GENERATION
            and group is not None
            and group.state == GroupState.PREPARING_REBALANCE
        ):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error:
            return error
        assert group is not None  # _validate_member answers UNKNOWN_MEMBER_ID for no group
        member = group.members[member_id]
        self._schedule_session_expiry(group, member)
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of either kind of group: a consumer group's classic members leave by writing
        records, a classic group's at once."""
        error = self.coordinator_error(group_id)
        live = self.consumer.groups.get(group_id)
        if not error and live is not None:
            return ErrorCode.NONE, await self.consumer.classic_members.leave(live, leaving)
        return self.leave_group(group_id, leaving)

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        error = self.coordinator_error(group_id)
        if error:
            return error, []
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
            self._remove_member_and_update(group, member)
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    def _remove_member(self, group: Group, member: Member) -> None:
        group.members.pop(member.member_id, None)
        if member.group_instance_id and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        self._cancel_session(member)
        self._complete_join(member, _join_error(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._complete_sync(member, ErrorCode.UNKNOWN_MEMBER_ID, b"")
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)

    def _remove_member_and_update(self, group: Group, member: Member) -> None:
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        elif group.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    # -- sessions ----------------------------------------------------------------------------------
    def _schedule_session_expiry(self, group: Group, member: Member, *, heard: bool = True) -> None:
        """Restart the member's session timeout. ``heard``: a request of the member's own arrived
        (else the broker restarts it on the member's behalf, when a rebalance answers it); a member
        whose parked request lost its connection keeps the deadline its disconnect set until it is
        heard from."""
        if heard:
            member.disconnected = False
        elif member.disconnected and member.session_timer is not None:
            return
        self._cancel_session(member)
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._on_session_expired, group, member
        )

    @staticmethod
    def _cancel_session(member: Member) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None

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
        self._remove_member_and_update(group, member)

    @staticmethod
    def _complete_join(member: Member, result: JoinResult) -> None:
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(result)
        member.join_future = None

    @staticmethod
    def _complete_sync(member: Member, code: int, assignment: bytes) -> bool:
        """Answer the member's parked SyncGroup, if it has one (returns whether it had)."""
        parked = member.sync_future is not None and not member.sync_future.done()
        if parked:
            member.sync_future.set_result((code, assignment))  # type: ignore[union-attr]
        member.sync_future = None
        return parked

    def release_members(self, group: Group, code: int) -> None:
        """The group became a consumer group (online upgrade): its classic members, answered
        ``code`` where they wait, are its members no more (the consumer group has them now)."""
        for member in group.members.values():
            self._cancel_session(member)
            self._complete_join(member, _join_error(code, member.member_id))
            self._complete_sync(member, code, b"")
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
            self._schedule_session_expiry(holder, member)
        self._prepare_rebalance(holder, reason)

    def group_record(self, group: Group) -> tuple[bytes, bytes]:
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

    async def _persist_group(self, group: Group) -> int:
        return await self.store.write(group.partition, [self.group_record(group)])

    # -- offsets -----------------------------------------------------------------------------------
    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        def everywhere(code: int) -> dict[tuple[str, int], int]:
            return {tp: code for tp in offsets}

        error = self.coordinator_error(group_id)
        if error:
            return everywhere(error)
        group = self.groups.get(group_id)
        consumer_error = self.consumer.validate_commit(group_id, member_id, generation)
        if consumer_error is not None:  # a consumer protocol group: the generation is the member epoch
            if consumer_error:
                return everywhere(consumer_error)
            group = self.groups.setdefault(group_id, Group(group_id, self.store.partition_for(group_id)))
        elif generation < 0 and not member_id:
            if group is not None and not group.is_empty:
                return everywhere(ErrorCode.UNKNOWN_MEMBER_ID)  # a group with members commits through them
            if group is None:
                group = self.groups[group_id] = Group(group_id, self.store.partition_for(group_id))
        else:
            error = self._validate_member(group, member_id, instance_id, generation)
            if error:
                return everywhere(error)
            assert group is not None  # _validate_member answers UNKNOWN_MEMBER_ID for no group
            if group.state == GroupState.COMPLETING_REBALANCE:
                return everywhere(ErrorCode.REBALANCE_IN_PROGRESS)
            self._schedule_session_expiry(group, group.members[member_id])
        results, accepted, entries = self._offset_entries(group_id, offsets)
        if entries:

            def on_append(record_offset: int) -> None:
                for committed in accepted.values():
                    committed.record_offset = record_offset

            in_flight = group.commits_in_flight
            in_flight.update(accepted.keys())
            try:
                code = await self.store.write(group.partition, entries, on_append=on_append)
            finally:
                in_flight.subtract(accepted.keys())
                for tp in accepted:
                    if in_flight[tp] <= 0:
                        del in_flight[tp]
            if not code:
                if group.state == GroupState.DEAD:  # removed by expiry while the write was in flight
                    group = self.groups.setdefault(group_id, Group(group_id, group.partition))
                for tp, committed in accepted.items():
                    group.commit_offset(tp, committed)
            for tp in accepted:
                results[tp] = code
        return results

    @staticmethod
    def _offset_entries(
        group_id: str, offsets: dict[tuple[str, int], tuple[int, int, str | None]]
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], CommittedOffset], list[tuple[bytes, bytes]]]:
        """(errors of offsets that cannot be stored, the storable ones, their records)."""
        results: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        entries = []
        now = wall_ms()  # commit timestamps and offsets.retention.minutes are wall-clock, as in Kafka
        for (topic, partition), (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            accepted[(topic, partition)] = CommittedOffset(offset, leader_epoch, metadata or "", now)
            entries.append(
                (
                    schema.encode_key(schema.OffsetKey(group_id, topic, partition)),
                    schema.encode_offset_value(schema.OffsetValue(offset, leader_epoch, metadata or "", now)),
                )
            )
        return results, accepted, entries

    # -- transactional offsets (KIP-98) --------------------------------------------------------------
    async def commit_txn_offsets(
        self,
        group_id: str,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        generation: int,
        instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: offsets that count only if the producer's transaction commits.

        They are written as the producer's transactional batch to the group's partition and kept
        pending under its producer id; the marker the transaction coordinator writes there later
        settles them (complete_txn). As in Kafka, a producer outside any group (generation -1, no
        member id) may commit for the group, while a member's commit (v3+) is checked against the
        group's generation, so that a zombie member cannot commit after a rebalance.
        """

        def everywhere(code: int) -> dict[tuple[str, int], int]:
            return {tp: code for tp in offsets}

        error = self._check_txn_commit(group_id, producer_id, member_id, generation, instance_id)
        if error:
            return everywhere(error)
        partition = self.store.partition_for(group_id)
        error = await self._verify_txn(transactional_id, producer_id, producer_epoch, partition)
        if not error:  # the group may have changed while the coordinator answered
            error = self._check_txn_commit(group_id, producer_id, member_id, generation, instance_id)
        if error:
            return everywhere(error)
        known_epoch, _ = self.store.producer_status(partition, producer_id)
        if known_epoch is not None and producer_epoch < known_epoch:
            return everywhere(ErrorCode.INVALID_PRODUCER_EPOCH)  # a zombie of a fenced producer
        results, accepted, entries = self._offset_entries(group_id, offsets)
        if not entries:
            return results
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, partition)

        def on_append(record_offset: int) -> None:  # before the wait: the marker may come right after
            for committed in accepted.values():
                committed.record_offset = record_offset
            group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
            self._txn_groups.setdefault((partition, producer_id), set()).add(group_id)

        code = await self.store.write(
            partition, entries, producer_id=producer_id, producer_epoch=producer_epoch, on_append=on_append
        )
        pending = group.pending_txn_offsets.get(producer_id)
        if code:
            # as Kafka's failPendingTxnOffsetCommit: the client is told to retry; forget them
            if pending is not None:
                for tp, committed in accepted.items():
                    if pending.get(tp) is committed:
                        del pending[tp]
                if not pending:
                    del group.pending_txn_offsets[producer_id]
        elif group.state == GroupState.DEAD:  # deleted while the write was in flight
            self._rehome_pending(group)
        for tp in accepted:
            results[tp] = code
        return results

    def _check_txn_commit(
        self, group_id: str, producer_id: int, member_id: str, generation: int, instance_id: str | None
    ) -> int:
        """Kafka's validateOffsetCommit for transactional commits."""
        error = self.coordinator_error(group_id)
        if error:
            return error
        if producer_id < 0:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        group = self.groups.get(group_id)
        if group is not None and group.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id or instance_id is not None:
            consumer_error = self.consumer.validate_commit(group_id, member_id, generation)
            if consumer_error is not None:
                return consumer_error
            return self._validate_member(group, member_id, instance_id, generation)
        return ErrorCode.NONE

    async def _verify_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, partition: int) -> int:
        """KIP-890 part 1, as Produce does it: unless this producer's transaction is already open in
        the group's partition, its coordinator must confirm that the transaction added it
        (AddOffsetsToTxn). Otherwise a late TxnOffsetCommit would open a transaction no
        coordinator ends, and the partition's LSO would hang behind it."""
        epoch, open_here = self.store.producer_status(partition, producer_id)
        if open_here and epoch == producer_epoch:
            return ErrorCode.NONE
        tp = (OFFSETS_TOPIC, partition)
        codes = await self._verify_txn_partitions(transactional_id, producer_id, producer_epoch, [tp])
        code = codes.get(tp, ErrorCode.INVALID_TXN_STATE)
        if code in _RETRIABLE_VERIFICATION:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # the client finds the coordinator again and retries
        if code == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH  # as Kafka's AddPartitionsToTxnManager answers
        return code

    def complete_txn(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker is committed in ``offsets_partition`` (WriteTxnMarkers).

        Commit makes the transaction's pending offsets of every group of that partition the
        committed ones, unless a later record of the same partition already committed another;
        abort drops them.
        """
        for group_id in self._txn_groups.pop((offsets_partition, producer_id), ()):
            group = self.groups.get(group_id)
            if group is None or group.partition != offsets_partition or group.state == GroupState.DEAD:
                continue  # deleted, or moved to another coordinator: its loading replays the marker
            count = group.complete_txn(producer_id, commit)
            if count:
                log.debug("group %s: %d offsets of producer %d committed", group_id, count, producer_id)

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[int, dict[tuple[str, int], CommittedOffset | None]]:
        error = self.coordinator_error(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group else {}
        if partitions is None:
            return ErrorCode.NONE, dict(stored)
        return ErrorCode.NONE, {tp: stored.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> set[tuple[str, int]]:
        """Partitions for which OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT: an
        open transaction (or a commit being written) holds an offset the answer may not show yet.
        Without a partition list only partitions with a committed offset are answered, as in Kafka."""
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return set()
        wanted = group.offsets.keys() if partitions is None else partitions
        return {tp for tp in wanted if group.has_pending_offset(tp)}

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict]:
        error = self.coordinator_error(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.state not in (
            GroupState.EMPTY,
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
        ):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed = group.subscribed_topics() if not group.is_empty else self.consumer.subscribed_topics(group_id)
        if subscribed is None and not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP, {}
        results: dict[tuple[str, int], int] = {}
        doomed = []
        for tp in partitions:
            if tp[0] in (subscribed or set()):
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                doomed.append(tp)
        if doomed:
            written = _Offset()
            code = await self.store.write(
                group.partition,
                [(schema.encode_key(schema.OffsetKey(group_id, t, p)), None) for t, p in doomed],
                on_append=written,
            )
            for tp in doomed:
                if code:
                    results[tp] = code
                else:
                    group.remove_offset(tp, written.value)
        return ErrorCode.NONE, results

    # -- listing, describing, deleting -------------------------------------------------------------
    def list_groups(self, states: set[str] | None = None) -> list[Group]:
        wanted = {s.lower() for s in states or ()}  # state names match case-insensitively, as in Kafka 3.7+
        return [
            g
            for g in self.groups.values()
            if g.state != GroupState.DEAD
            and g.partition in self.owned_partitions
            and g.group_id not in self.consumer.groups
            and (not wanted or g.state.value.lower() in wanted)
        ]

    def describe_group(self, group_id: str) -> tuple[int, Group | None]:
        error = self.coordinator_error(group_id)
        if error:
            return error, None
        if group_id in self.consumer.groups:  # as Kafka (DescribeGroups < v6): Dead; ConsumerGroupDescribe has it
            return ErrorCode.NONE, None
        return ErrorCode.NONE, self.groups.get(group_id)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        results = {}
        for group_id in group_ids:
            error = self.coordinator_error(group_id)
            group = self.groups.get(group_id)
            if error:
                results[group_id] = error
            elif group is None or group.state == GroupState.DEAD:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif not group.is_empty or self.consumer.has_members(group_id):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                # as Kafka: the offsets of open transactions go too (their commit will find nothing)
                doomed = set(group.offsets)
                for pending in group.pending_txn_offsets.values():
                    doomed.update(pending)
                entries = [(schema.encode_key(schema.OffsetKey(group_id, t, p)), None) for t, p in sorted(doomed)]
                entries.append((schema.encode_key(schema.GroupKey(group_id)), None))
                written = _Offset()
                code = await self.store.write(group.partition, entries, on_append=written)
                if not code:
                    code = await self.consumer.delete(group_id)
                if not code:
                    for tp in doomed:
                        group.remove_offset(tp, written.value)
                    group.transition(GroupState.DEAD)
                    if self.groups.get(group_id) is group:
                        del self.groups[group_id]
                    self._rehome_pending(group)
                results[group_id] = code
        return results

    async def remove_offsets_of_deleted_topics(self, topics: set[str]) -> int:
        """A deleted topic's committed offsets go with it, as Kafka's coordinator does on deletion.

        Otherwise a topic re-created under the same name would hand a group its old offsets, which
        point into a log that no longer exists (and lag tools would report them forever). Only
        groups this broker coordinates are touched; the others' coordinators see the same deletion.
        Returns how many offsets were removed.
        """
        removed = 0
        for group in list(self.groups.values()):
            if group.partition not in self.owned_partitions or group.state == GroupState.DEAD:
                continue
            doomed = {tp for tp in group.offsets if tp[0] in topics}
            for pending in group.pending_txn_offsets.values():
                doomed.update(tp for tp in pending if tp[0] in topics)
            if not doomed:
                continue
            written = _Offset()
            entries = [(schema.encode_key(schema.OffsetKey(group.group_id, t, p)), None) for t, p in sorted(doomed)]
            if await self.store.write(group.partition, entries, on_append=written):
                log.warning(
                    "could not remove the offsets of deleted topics %s from group %s; they expire with "
                    "offsets.retention.minutes",
                    sorted(topics),
                    group.group_id,
                )
                continue
            for tp in doomed:
                group.remove_offset(tp, written.value)
            removed += len(doomed)
            log.info(
                "group %s: removed %d committed offsets of deleted topics %s",
                group.group_id,
                len(doomed),
                sorted({t for t, _ in doomed}),
            )
        return removed

    def _rehome_pending(self, dead: Group) -> None:
        """Offsets a transaction wrote after the tombstones of a deleted group belong to the group
        id's next life, as a reload of the log would see them."""
        if dead.pending_txn_offsets:
            alive = self.groups.setdefault(dead.group_id, Group(dead.group_id, dead.partition))
            for producer_id, pending in dead.pending_txn_offsets.items():
                alive.pending_txn_offsets.setdefault(producer_id, {}).update(pending)
            dead.pending_txn_offsets.clear()

    async def expire_offsets(self) -> int:
        """offsets.retention.minutes, as Kafka's offset cleanup does it (KIP-211).

        An empty group's offsets expire once it has been empty that long (and the offset is that
        old); a stable consumer group's offsets of topics it no longer subscribes to expire that long
        after their commit. An empty group left with no offsets is removed (a tombstone), so it
        stops being listed. Returns how many offsets were removed.
        """
        retention_ms = self.config.offsets_retention_minutes * 60_000
        now = wall_ms()  # commit timestamps and offsets.retention.minutes are wall-clock, as in Kafka
        removed = 0
        for group in list(self.groups.values()):
            if group.partition not in self.owned_partitions or self.consumer.has_members(group.group_id):
                continue
            # An offset an open transaction (or a commit in flight) is about to replace does not
            # expire: its tombstone would delete the pending one too. A group with open
            # transactions stays, whatever its committed offsets (as in Kafka).
            if group.is_empty and group.state == GroupState.EMPTY:
                if now - group.state_timestamp < retention_ms:
                    expired = []
                else:
                    expired = [
                        tp
                        for tp, c in group.offsets.items()
                        if now - c.commit_timestamp >= retention_ms and not group.has_pending_offset(tp)
                    ]
                forget_group = len(expired) == len(group.offsets) and not group.has_pending_txn_offsets()
                # a group made a moment ago by a commit still in flight has no offsets yet: leave it be
                if not group.offsets and now - group.state_timestamp < self.config.offsets_commit_timeout_ms:
                    continue
            elif group.state == GroupState.STABLE and (subscribed := group.subscribed_topics()) is not None:
                expired = [
                    tp
                    for tp, c in group.offsets.items()
                    if tp[0] not in subscribed
                    and now - c.commit_timestamp >= retention_ms
                    and not group.has_pending_offset(tp)
                ]
                forget_group = False
            else:
                continue
            if not expired and not forget_group:
                continue
            entries = [(schema.encode_key(schema.OffsetKey(group.group_id, t, p)), None) for t, p in expired]
            if forget_group:
                entries.append((schema.encode_key(schema.GroupKey(group.group_id)), None))
            doomed = {tp: group.offsets[tp] for tp in expired}
            if await self.store.write(group.partition, entries):
                continue
            for tp, offset in doomed.items():
                if group.offsets.get(tp) is offset:  # not committed again while the tombstones were written
                    del group.offsets[tp]
            removed += len(expired)
            if (
                forget_group
                and group.is_empty
                and not group.offsets
                and not group.pending_txn_offsets
                and self.groups.get(group.group_id) is group
            ):
                log.info("group %s is empty and has no offsets left: removed", group.group_id)
                group.transition(GroupState.DEAD)
                del self.groups[group.group_id]
        return removed

    async def expire_and_log(self) -> None:
        removed = await self.expire_offsets()
        if removed:
            log.info("expired %d committed offsets", removed)
