"""The group coordinator: the groups of the __consumer_offsets partitions this broker leads.

It loads a partition's groups and offsets when this broker becomes its leader (as Kafka's
GroupMetadataManager does) and drops them when it stops, answers whether it coordinates a group id,
and sends each request to the side that serves it: classic groups (classic_protocol.py, moved by
rebalance.py), consumer groups of KIP-848 (consumer_group.py) including classic members living
inside one (classic_members.py), and committed offsets, which both kinds keep the same way
(offset_commits.py). It composes those parts; none of them imports it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.group import records as schema
from strom.group.classic_protocol import ClassicProtocol
from strom.group.consumer_group import ConsumerGroupCoordinator
from strom.group.consumer_records import ConsumerKey
from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import CommittedOffset, Group, GroupState, restore_group
from strom.group.group_config import GroupConfigs
from strom.group.join import JoinRequest, JoinResult, join_error
from strom.group.offset_commits import AppendOffset, GroupOffsets, VerifyTxnPartitions
from strom.group.offset_store import OFFSETS_TOPIC, OffsetStore
from strom.group.rebalance import Rebalancer
from strom.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.partition import Partition
    from strom.replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.group")


class GroupCoordinator:
    """Coordinates the groups of the __consumer_offsets partitions this broker leads (``replicas``,
    which also says whether it is fenced); ``metadata`` has the topics that groups subscribe to;
    ``verify_txn_partitions`` asks the transaction coordinator about a TxnOffsetCommit; ``store``
    (by default over ``replicas``) writes and reads __consumer_offsets."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        *,
        verify_txn_partitions: VerifyTxnPartitions,
        store: OffsetStore | None = None,
    ):
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.store = store if store is not None else OffsetStore(replicas, metadata, config)
        self.groups: dict[str, Group] = {}  # classic groups, and the offsets holder of every group
        self.owned_partitions: set[int] = set()
        self.configs = GroupConfigs(None, self.config)  # group-level configs; the broker starts it
        self.rebalancer = Rebalancer(config, self.store)
        self.classic = ClassicProtocol(config, self.store, self.groups, self.rebalancer)
        self.consumer = ConsumerGroupCoordinator(  # KIP-848 groups, beside the classic ones
            config,
            metadata,
            self.store,
            self.groups,
            self.rebalancer,
            self.configs,
            self.coordinator_error,
            self.owned_partitions,
        )
        self.offsets = GroupOffsets(
            config,
            self.store,
            self.groups,
            self.owned_partitions,
            self.coordinator_error,
            self.rebalancer,
            self.consumer,
            verify_txn_partitions,
        )

    @property
    def completed_rebalances(self) -> int:
        """Generations handed to members (a metric)."""
        return self.rebalancer.completed_rebalances

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
                self.rebalancer.unload(self.groups.pop(group_id))
            for key in [k for k in self.offsets.txn_groups if k[0] == partition.index]:
                del self.offsets.txn_groups[key]
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
                    restore_group(group_of(key.group), schema.decode_group_value(value))
        for producer_id, txn in pending.items():
            for (group_id, topic, index), committed in txn.items():
                group_of(group_id).pending_txn_offsets.setdefault(producer_id, {})[(topic, index)] = committed
                self.offsets.txn_groups.setdefault((partition.index, producer_id), set()).add(group_id)
        for group_id, group in loaded.items():
            self.groups[group_id] = group
            for member in group.members.values():
                self.rebalancer.schedule_session_expiry(group, member)
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
            return join_error(error, member_id)
        if not all(
            schema.fits(s) for s in (instance_id or "", request.protocol_type, *(name for name, _ in protocols))
        ):
            return join_error(ErrorCode.INVALID_REQUEST, member_id)  # it could never be stored
        if not (
            self.config.group_min_session_timeout_ms <= session_timeout_ms <= self.config.group_max_session_timeout_ms
        ):
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        live = self.consumer.groups.get(group_id)
        if live is not None and live.members:  # a classic member of a consumer group (Kafka 4)
            return await self.consumer.classic_members.join(live, request)
        error = await self.consumer.before_classic_join(group_id)
        if error:
            return join_error(error, member_id)
        return await self.classic.join(request)

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
        if error:
            return error, b"", None, None
        live = self.consumer.groups.get(group_id)
        if live is not None:
            return await self.consumer.classic_members.sync(
                live, generation, member_id, instance_id, protocol_type, protocol_name
            )
        return await self.classic.sync(
            group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments
        )

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> int:
        error = self.coordinator_error(group_id)
        if error:
            return error
        live = self.consumer.groups.get(group_id)
        if live is not None:
            return self.consumer.classic_members.heartbeat(live, generation, member_id, instance_id)
        return self.classic.heartbeat(group_id, generation, member_id, instance_id)

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """LeaveGroup of either kind of group: a consumer group's classic members leave by writing
        records, a classic group's at once."""
        error = self.coordinator_error(group_id)
        if error:
            return error, []
        live = self.consumer.groups.get(group_id)
        if live is not None:
            return ErrorCode.NONE, await self.consumer.classic_members.leave(live, leaving)
        return self.classic.leave_group(group_id, leaving)

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
                written = AppendOffset()
                code = await self.store.write(group.partition, entries, on_append=written)
                if not code:
                    code = await self.consumer.delete(group_id)
                if not code:
                    for tp in doomed:
                        group.remove_offset(tp, written.value)
                    group.transition(GroupState.DEAD)
                    if self.groups.get(group_id) is group:
                        del self.groups[group_id]
                    self.offsets.rehome_pending(group)
                results[group_id] = code
        return results
