"""Log compaction: keep only the latest record of every key in the cleanable part of a log.

As in Kafka: the *dirty* section (from the cleaner checkpoint up to the first uncleanable
offset: the active segment or the high watermark, whichever is lower) is scanned to build a
key → latest-offset map; then every cleanable segment is rewritten, keeping a record only if no
later record has its key. Offsets are preserved, so compacted logs have gaps. Groups of
segments are rewritten into one ``.cleaned`` segment and swapped in by Log.replace_segments.

Tombstones (null value) are kept for ``delete.retention.ms`` after their batch's timestamp so
that consumers that are behind still see the delete; after that they are dropped. (Kafka
measures the same horizon from segment modification times; timestamps make it deterministic.)

Transactions: cleaning stops at the last stable offset, so an open transaction is never
compacted; records of aborted transactions are removed and never win a key (otherwise an
aborted offset commit in __consumer_offsets would replace a committed one). Markers are kept,
with the .txnindex entries of the segments they are in.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from strom.protocol.records import BatchHeader, decode_batch_records, iter_batch_headers, rebuild_batch
from strom.storage.log import Log
from strom.storage.segment import CLEANED_SUFFIX, LogSegment
from strom.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from strom.protocol.records import Record

log = logging.getLogger("strom.storage.cleaner")


@dataclass
class CleanResult:
    first_dirty_offset: int  # where the next cleaning starts
    bytes_before: int
    bytes_after: int
    records_removed: int


def first_uncleanable_offset(log_: Log) -> int:
    return min(log_.active_segment.base_offset, log_.last_stable_offset)


class _AbortedRanges:
    """Which transactional batches belong to aborted transactions, from the txn indexes."""

    def __init__(self, aborted: list[AbortedTxn]):
        self.by_producer: dict[int, list[tuple[int, int]]] = {}
        for entry in aborted:
            self.by_producer.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))

    def __contains__(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        ranges = self.by_producer.get(header.producer_id)
        return ranges is not None and any(first <= header.base_offset <= last for first, last in ranges)


def cleanable_segments(log_: Log, min_compaction_lag_ms: int = 0) -> list[LogSegment]:
    """Non-active segments wholly below the first uncleanable offset (and old enough)."""
    limit = first_uncleanable_offset(log_)
    now = log_.now_ms()
    result = []
    for i, segment in enumerate(log_.segments[:-1]):
        next_base = log_.segments[i + 1].base_offset
        if next_base > limit:
            break
        if min_compaction_lag_ms and segment.max_timestamp >= 0 and now - segment.max_timestamp < min_compaction_lag_ms:
            break
        result.append(segment)
    return result


def dirty_ratio(log_: Log, first_dirty_offset: int) -> float:
    segments = cleanable_segments(log_, log_.config.min_compaction_lag_ms)
    total = sum(s.size for s in segments)
    if total == 0:
        return 0.0
    # After a cleaning the dirty section starts at a segment boundary (the old active segment).
    dirty = sum(s.size for s in segments if s.base_offset >= first_dirty_offset)
    return dirty / total


def _build_offset_map(segments: list[LogSegment], first_dirty_offset: int,
                      aborted: _AbortedRanges) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for header, data in segment.iter_batches(with_data=True):
            if header.last_offset < first_dirty_offset or header.is_control or header in aborted:
                continue
            header.position = 0
            for record in decode_batch_records(data, header):
                if record.key is not None and record.offset >= first_dirty_offset:
                    latest[record.key] = record.offset
    return latest


def _group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments whose combined size and offset span still fit one segment."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            span = segment.read_next_offset() - group[0].base_offset
            if size <= max_bytes and span < 2**31 - 1:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def clean_log(log_: Log, first_dirty_offset: int, crash_hook: Callable[[str], None] | None = None) -> CleanResult:
    """Compact ``log_`` once; returns where the dirty section will start next time."""
    segments = cleanable_segments(log_, log_.config.min_compaction_lag_ms)
    if not segments:
        return CleanResult(first_dirty_offset, 0, 0, 0)
    aborted = _AbortedRanges(log_.aborted_transactions(segments[0].base_offset, first_uncleanable_offset(log_)))
    offset_map = _build_offset_map(segments, first_dirty_offset, aborted)
    tombstone_horizon = log_.now_ms() - log_.config.delete_retention_ms
    bytes_before = sum(s.size for s in segments)
    removed = 0
    for group in _group_segments(segments, log_.config.segment_bytes):
        cleaned = LogSegment(log_.directory, group[0].base_offset,
                             index_interval_bytes=log_.config.index_interval_bytes,
                             max_index_size=log_.config.segment_index_bytes, suffix=CLEANED_SUFFIX, active=True)
        for segment in group:
            for header, data in segment.iter_batches(with_data=True):
                header.position = 0
                if header.is_control:
                    kept_bytes = bytes(data)
                elif header in aborted:
                    removed += header.records_count
                    continue
                else:
                    records = decode_batch_records(data, header)
                    kept = [r for r in records if _retain(r, offset_map, header.max_timestamp, tombstone_horizon)]
                    removed += len(records) - len(kept)
                    if not kept:
                        continue
                    kept_bytes = bytes(data) if len(kept) == len(records) else rebuild_batch(header, kept)
                cleaned.append(kept_bytes, list(iter_batch_headers(kept_bytes)))
        cleaned.txn_index.replace([e for segment in group for e in segment.txn_index.entries])
        log_.replace_segments(cleaned, group, crash_hook)
    bytes_after = sum(s.size for s in cleanable_segments(log_))
    next_dirty = first_uncleanable_offset(log_)
    log.info("cleaned %s: %d -> %d bytes, %d records removed", log_.directory, bytes_before, bytes_after, removed)
    return CleanResult(next_dirty, bytes_before, bytes_after, removed)


def _retain(record: Record, offset_map: dict[bytes, int], batch_timestamp: int, tombstone_horizon: int) -> bool:
    if record.key is None:
        return True
    latest = offset_map.get(record.key)
    if latest is not None and record.offset < latest:
        return False
    if record.value is None and batch_timestamp < tombstone_horizon:
        return False
    return True
