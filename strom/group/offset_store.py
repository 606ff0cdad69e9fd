"""Writing group state to, and loading it from, the __consumer_offsets topic.

Every committed offset and every group's metadata is a record in the compacted partition
``partition_for_group(group) % offsets.topic.num.partitions``; a write is acknowledged only once
that partition's high watermark has passed it (acks=all), so a committed offset survives the
loss of the leader. Loading replays the partition, last write wins, tombstones delete.

Transactional offset commits (TxnOffsetCommit) are transactional batches of the producer (its id
and epoch, base sequence -1: the coordinator, not the producer, writes them, so there is no
sequence to check); the transaction coordinator's commit or abort marker, a control batch in
the same partition, decides later whether they count. Replay therefore hands out whole batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from strom.clock import wall_ms
from strom.group import records as schema
from strom.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    NotLeaderError,
    RequestTimedOutError,
)
from strom.protocol.records import NO_PRODUCER_ID, NewRecord, build_batch, decode_batch_records, read_control_record

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.group.consumer_records import ConsumerKey
    from strom.replication.partition import Partition
    from strom.replication.replica_manager import ReplicaManager

log = logging.getLogger("strom.group")

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass
class StoredBatch:
    """One batch of __consumer_offsets as loading needs it."""

    base_offset: int
    producer_id: int  # NO_PRODUCER_ID unless the batch is transactional
    marker: bool | None = None  # a control batch: True commits the producer's transaction, False aborts it
    records: list[tuple[schema.OffsetKey | schema.GroupKey | ConsumerKey, bytes | None]] = field(default_factory=list)

    @property
    def transactional(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


class OffsetStoreConfig(Protocol):
    """The broker configs the offset store follows (``BrokerConfig`` has them)."""

    @property
    def offsets_topic_num_partitions(self) -> int: ...
    @property
    def offsets_commit_timeout_ms(self) -> int: ...


class OffsetStore:
    """Group state in __consumer_offsets: written through ``replicas`` (this broker's leaders),
    its partition count read from ``metadata`` (the config's until the topic exists)."""

    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, config: OffsetStoreConfig):
        self._replicas = replicas
        self.metadata = metadata
        self.config = config

    @property
    def num_partitions(self) -> int:
        info = self.metadata.topics.get(OFFSETS_TOPIC)
        return info.partition_count if info else self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return schema.partition_for_group(group_id, self.num_partitions)

    def producer_status(self, partition: int, producer_id: int) -> tuple[int | None, bool]:
        """(the producer's epoch in that partition or None, whether it has an open transaction there)."""
        held = self._replicas.partitions.get((OFFSETS_TOPIC, partition))
        if held is None:
            return None, False
        state = held.log.producer_state
        return state.producer_epoch(producer_id), producer_id in state.ongoing

    async def write(
        self,
        partition: int,
        entries: Iterable[tuple[bytes, bytes | None]],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        on_append: Callable[[int], None] | None = None,
    ) -> int:
        """Append key/value records (None value = tombstone) and wait until they are committed.

        With a ``producer_id`` the batch is that producer's transactional batch. ``on_append``
        gets the offset of the batch's first record as soon as it is in the log, before the wait:
        a transaction marker may follow it at once, and the caller's state must already know the
        write it settles. Returns an error code (NONE on success) rather than raising, since every
        caller turns it into per-partition results.
        """
        now = wall_ms()
        records = [NewRecord(value, key=key, timestamp=now) for key, value in entries]
        if producer_id == NO_PRODUCER_ID:
            batch = build_batch(records)
        else:
            batch = build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch, transactional=True)
        replicas = self._replicas
        timeout_s = self.config.offsets_commit_timeout_ms / 1000
        try:
            if replicas.epochs_pending:
                await replicas.until_epochs_durable([(OFFSETS_TOPIC, partition)], timeout_s)
            info = replicas.append(OFFSETS_TOPIC, partition, batch, -1)
        except KafkaError as exc:
            log.warning("could not write group state to %s-%d: %s", OFFSETS_TOPIC, partition, exc)
            return _coordinator_error(exc.error_code)
        if on_append is not None:
            on_append(info.first_offset)
        try:
            await replicas.wait_committed(OFFSETS_TOPIC, partition, info.last_offset, timeout_s)
        except NotLeaderError:
            return ErrorCode.NOT_COORDINATOR
        except RequestTimedOutError:
            return ErrorCode.REQUEST_TIMED_OUT
        return ErrorCode.NONE

    @staticmethod
    def replay(partition: Partition) -> Iterator[StoredBatch]:
        """Every batch of a partition, in offset order, for loading.

        Control batches come as markers (their key is not a group record key); a record whose key
        is not one of Kafka's group keys is skipped with a warning, as Kafka's loader does.
        """
        log_ = partition.log
        for header, chunk in log_.iter_batches():
            producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
            if header.is_control:
                try:
                    commit, _ = read_control_record(chunk, header)
                except (CorruptRecordError, InvalidRecordError) as exc:  # Kafka ignores unknown control types
                    log.debug("skipping control batch at %d in %s: %s", header.base_offset, log_.directory, exc)
                    continue
                yield StoredBatch(header.base_offset, producer_id, marker=commit)
                continue
            batch = StoredBatch(header.base_offset, producer_id)
            for record in decode_batch_records(chunk, header):
                if record.key is None:
                    continue
                try:
                    batch.records.append((schema.decode_key(record.key), record.value))
                except schema.RecordFormatError as exc:
                    log.warning("skipping unreadable record at %d in %s: %s", record.offset, log_.directory, exc)
            yield batch


def _coordinator_error(code: int) -> int:
    """Storage errors become coordinator errors the client retries on, as in Kafka."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR  # a failed log dir: the partition moves to another broker
    if code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code
