"""Committed offsets: OffsetCommit, TxnOffsetCommit (KIP-98) and their markers, OffsetFetch,
OffsetDelete, and what removes offsets without a request (deleted topics, offsets.retention.minutes).

Offsets are records in __consumer_offsets, kept in memory by the classic ``Group`` of their group
id, whichever protocol its members speak: a consumer group (KIP-848) has such a holder too, and
its members' commits are checked against their member epochs instead of a generation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from strom.clock import wall_ms
from strom.group import records as schema
from strom.group.consumer_group import ConsumerGroupCoordinator
from strom.group.coordinator_config import GroupCoordinatorConfig
from strom.group.group import CommittedOffset, Group, GroupState, validate_member
from strom.group.offset_store import OFFSETS_TOPIC, OffsetStore
from strom.group.rebalance import Rebalancer
from strom.protocol.errors import ErrorCode

log = logging.getLogger("strom.group")

# the transaction coordinator's verify_partitions(transactional id, producer id, epoch, partitions):
# error codes by partition (KIP-890 part 1)
VerifyTxnPartitions = Callable[[str, int, int, list[tuple[str, int]]], Awaitable[dict[tuple[str, int], int]]]


# Transaction coordinator errors of a verification that the client should retry.
_RETRIABLE_VERIFICATION = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}

OFFSET_METADATA_MAX_BYTES = 4096


class AppendOffset:
    """An ``on_append`` callback for OffsetStore.write that remembers where the batch went."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = -1

    def __call__(self, offset: int) -> None:
        self.value = offset


class GroupOffsets:
    """The offsets of the groups in ``groups`` (the coordinator's table of classic groups, which
    hold every group's offsets) whose partitions are in ``owned_partitions``; ``coordinator_error``
    says whether this broker coordinates a group, ``consumer`` answers for consumer groups'
    members, and ``verify_txn_partitions`` asks the transaction coordinator about a TxnOffsetCommit."""

    def __init__(
        self,
        config: GroupCoordinatorConfig,
        store: OffsetStore,
        groups: dict[str, Group],
        owned_partitions: set[int],
        coordinator_error: Callable[[str], int],
        rebalancer: Rebalancer,
        consumer: ConsumerGroupCoordinator,
        verify_txn_partitions: VerifyTxnPartitions,
    ):
        self.config = config
        self.store = store
        self.groups = groups
        self.owned_partitions = owned_partitions
        self.coordinator_error = coordinator_error
        self.rebalancer = rebalancer
        self.consumer = consumer
        self._verify_txn_partitions = verify_txn_partitions
        # (offsets partition, producer id) -> groups holding that producer's pending offsets,
        # so that a marker (complete_txn) finds them without scanning every group
        self.txn_groups: dict[tuple[int, int], set[str]] = {}

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
            error = validate_member(group, member_id, instance_id, generation)
            if error:
                return everywhere(error)
            assert group is not None  # validate_member answers UNKNOWN_MEMBER_ID for no group
            if group.state == GroupState.COMPLETING_REBALANCE:
                return everywhere(ErrorCode.REBALANCE_IN_PROGRESS)
            self.rebalancer.schedule_session_expiry(group, group.members[member_id])
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
            self.txn_groups.setdefault((partition, producer_id), set()).add(group_id)

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
            self.rehome_pending(group)
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
            return validate_member(group, member_id, instance_id, generation)
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
        for group_id in self.txn_groups.pop((offsets_partition, producer_id), ()):
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
            written = AppendOffset()
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
            written = AppendOffset()
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

    def rehome_pending(self, dead: Group) -> None:
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
