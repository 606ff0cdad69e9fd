"""One translation round of one topic, run in a worker process (never on the broker's event loop).

Read the table's committed offsets, read each partition's committed records from the segment
files from there, write them as Parquet through pyiceberg (pyarrow) and commit one snapshot whose
summary carries every partition's next offset. A commit that loses a race (another partition's
leader committed first, or a deposed leader's stale round) fails on the snapshot it was planned
from and the round starts again from the offsets that won, so nothing is written twice or skipped.
Data files of a commit that failed or a process that died before committing are orphans that no
snapshot references.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from strom.iceberg import table as tables
from strom.iceberg.segments import Aborted, committed_records

log = logging.getLogger("strom.iceberg")

COMMIT_ATTEMPTS = 8
MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024  # one round reads at most this much of a partition


@dataclass(frozen=True)
class PartitionJob:
    partition: int
    directory: str
    log_start_offset: int
    upper: int  # the last stable offset: translate below it
    aborted_from: int  # ``aborted`` lists every aborted transaction overlapping [aborted_from, upper)
    aborted: tuple[Aborted, ...] = ()


@dataclass(frozen=True)
class TopicJob:
    topic: str
    catalog: tables.CatalogSettings
    partitions: tuple[PartitionJob, ...] = field(default_factory=tuple)


@dataclass
class TopicResult:
    offsets: dict[int, int]  # the table's committed offsets after the round, every partition
    rows: int = 0  # rows this round committed
    commits_lost: int = 0  # commits that lost a race and were planned again


def _arrow_rows(schema, partition: int, records) -> object:  # noqa: ANN001
    import pyarrow as pa

    columns: dict[str, list] = {k: [] for k in ("offset", "timestamp", "timestamp_type", "headers", "key", "value")}
    for header, record in records:
        columns["offset"].append(record.offset)
        columns["timestamp"].append(record.timestamp * 1000)  # Iceberg's timestamptz is in microseconds
        columns["timestamp_type"].append(header.timestamp_type)
        columns["headers"].append([{"key": k, "value": v} for k, v in record.headers])
        columns["key"].append(record.key)
        columns["value"].append(record.value)
    arrow_schema = schema.as_arrow()
    kafka_type = arrow_schema.field("kafka").type
    kafka = pa.StructArray.from_arrays(
        [
            pa.array([partition] * len(columns["offset"]), kafka_type.field("partition").type),
            pa.array(columns["offset"], kafka_type.field("offset").type),
            pa.array(columns["timestamp"], pa.int64()).cast(kafka_type.field("timestamp").type),
            pa.array(columns["timestamp_type"], kafka_type.field("timestamp_type").type),
            pa.array(columns["headers"], kafka_type.field("headers").type),
        ],
        fields=list(kafka_type),
    )
    return pa.Table.from_arrays(
        [
            kafka,
            pa.array(columns["key"], arrow_schema.field("key").type),
            pa.array(columns["value"], arrow_schema.field("value").type),
        ],
        schema=arrow_schema,
    )


def translate_topic(job: TopicJob) -> TopicResult:
    """One round for the partitions of ``job`` this broker leads."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException

    catalog = tables.open_catalog(job.catalog)
    lost = 0
    for _attempt in range(COMMIT_ATTEMPTS):
        table = tables.load_or_create(catalog, job.topic, job.catalog.target_file_size_bytes)
        committed = tables.committed_offsets(table)
        offsets = dict(committed)
        pieces = []
        for part in job.partitions:
            start = max(committed.get(part.partition, 0), part.log_start_offset)
            if start < part.aborted_from:
                # the table is behind what the broker told the aborts for (a table made again):
                # the next round brings the aborts from here
                continue
            if start >= part.upper:
                continue
            records, resume = committed_records(
                part.directory, start, part.upper, list(part.aborted), MAX_BYTES_PER_PARTITION
            )
            if records:
                pieces.append(_arrow_rows(table.schema(), part.partition, records))
            offsets[part.partition] = resume
        if offsets == committed:
            return TopicResult(committed, 0, lost)  # nothing new: no snapshot
        # no rows but offsets moved (past aborted records or markers): a snapshot of offsets only,
        # so that the table's offsets reach the last stable offset
        rows = pa.concat_tables(pieces) if pieces else table.schema().as_arrow().empty_table()
        try:
            table.append(rows, snapshot_properties=tables.offset_properties(offsets))
        except CommitFailedException as exc:
            lost += 1
            log.info("%s: a commit lost a race (%s); planning again from the table's offsets", job.topic, exc)
            continue
        return TopicResult(offsets, rows.num_rows, lost)
    raise RuntimeError(f"{job.topic}: {COMMIT_ATTEMPTS} commits in a row lost their race")


def table_offsets(catalog: tables.CatalogSettings, topic: str) -> dict[int, int]:
    """The committed offsets of a topic's table (empty when it has none yet)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return tables.committed_offsets(tables.open_catalog(catalog).load_table(tables.identifier(topic)))
    except NoSuchTableError:
        return {}


def drop_table(catalog: tables.CatalogSettings, topic: str) -> None:
    """Drop a deleted topic's table (its metadata; pyiceberg leaves the files in the warehouse)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        tables.open_catalog(catalog).drop_table(tables.identifier(topic))
    except NoSuchTableError:
        pass  # another broker that led one of its partitions dropped it first


def init_worker() -> None:
    """The pool's initializer: exit with the broker, then a lower priority than the event loop's."""
    from strom.storage.cleaner_process import CLEANER_NICENESS, exit_with_the_broker

    exit_with_the_broker()
    try:
        os.nice(CLEANER_NICENESS)
    except OSError:
        pass
