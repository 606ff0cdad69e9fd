"""Writing group state to, and loading it from, the __consumer_offsets topic.

Every committed offset and every group's metadata is a record in the compacted partition
``partition_for_group(group) % offsets.topic.num.partitions``; a write is acknowledged only once
that partition's high watermark has passed it (acks=all), so a committed offset survives the
loss of the leader. Loading replays the partition, last write wins, tombstones delete.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterable

from strom.group import records as schema
from strom.protocol.errors import ErrorCode, KafkaError
from strom.protocol.records import NewRecord, build_batch, iter_records

if TYPE_CHECKING:
    from strom.replication.partition import Partition
    from strom.server.broker import Broker

log = logging.getLogger("strom.group")

OFFSETS_TOPIC = "__consumer_offsets"


class OffsetStore:
    def __init__(self, broker: "Broker"):
        self.broker = broker

    @property
    def num_partitions(self) -> int:
        info = self.broker.metadata.topics.get(OFFSETS_TOPIC)
        return info.partition_count if info else self.broker.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return schema.partition_for_group(group_id, self.num_partitions)

    async def write(self, partition: int, entries: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Append key/value records (None value = tombstone) and wait until they are committed.

        Returns an error code (NONE on success) rather than raising, since every caller turns it
        into per-partition results.
        """
        now = int(time.time() * 1000)
        batch = build_batch([NewRecord(value, key=key, timestamp=now) for key, value in entries])
        replicas = self.broker.replica_manager
        try:
            info = replicas.append(OFFSETS_TOPIC, partition, batch, -1)
        except KafkaError as exc:
            log.warning("could not write group state to %s-%d: %s", OFFSETS_TOPIC, partition, exc)
            return _coordinator_error(exc.error_code)
        target = info.last_offset + 1
        timeout_s = self.broker.config.offsets_commit_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        key = (OFFSETS_TOPIC, partition)
        while True:
            held = replicas.partitions.get(key)
            if held is None or not held.is_leader:
                return ErrorCode.NOT_COORDINATOR
            if held.log.high_watermark >= target:
                return ErrorCode.NONE
            left = deadline - time.monotonic()
            if left <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            await replicas.purgatory.wait([key], left)

    @staticmethod
    def replay(partition: "Partition"):
        """Every (key, value-or-None) of a partition, in offset order, for loading."""
        log_ = partition.log
        offset = log_.log_start_offset
        while offset < log_.log_end_offset:
            data = log_.read(offset, 4 * 1024 * 1024, log_.log_end_offset)
            if not data.slices:
                break
            chunk = b"".join(s.read() for s in data.slices)
            last = offset
            for record in iter_records(chunk):
                if record.offset < offset:
                    continue
                last = record.offset
                if record.key is None:
                    continue
                try:
                    yield schema.decode_key(record.key), record.value
                except schema.RecordFormatError as exc:
                    log.warning("skipping unreadable record at %d in %s: %s", record.offset, log_.directory, exc)
            if last < offset:
                break
            offset = last + 1


def _coordinator_error(code: int) -> int:
    """Storage errors become coordinator errors the client retries on, as in Kafka."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return code

