"""One translation round of one topic, run in a worker process (never on the broker's event loop).

Read the table's committed offsets, read each partition's committed records from the segment
files from there, write them as Parquet through pyiceberg (pyarrow) and commit one snapshot whose
summary carries every partition's next offset. A commit that loses a race (another partition's
leader committed first, or a deposed leader's stale round) fails on the snapshot it was planned
from and the round starts again from the offsets that won, so nothing is written twice or skipped.
Data files of a commit that failed or a process that died before committing are orphans that no
snapshot references.

In the schema modes (strom.iceberg.schema_modes) a round also evolves the table's schema to the
schemas its records use, and the records it cannot translate go to the dead-letter table
``<topic>~dlq`` first, in a commit of their own whose summary carries that table's offsets the
same way; then the table's commit. A round that dies between the two commits, or whose second
commit loses its race, is done again from the table's offsets, and the dead-letter rows below
the dead-letter table's offsets are left out of it: each record lands in one of the two once.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from strom.iceberg import partition_spec
from strom.iceberg import table as tables
from strom.iceberg.orphan_files import Removed, purge
from strom.iceberg.schema_modes import Decoded, Decoder, Key, SchemaSet, Wait, value_arrays
from strom.iceberg.segments import Aborted, committed_records
from strom.protocol.records import BatchHeader, Record

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
    mode: str = "key_value"
    schemas: SchemaSet | None = None  # the schema modes: the registry as the broker's view knows it
    partition_spec: str = tables.DEFAULT_PARTITION_SPEC  # the topic's iceberg.partition.spec
    topic_id: str = ""  # the live topic's id (32 hex digits): a table of another id is an old topic's
    delete: bool = True  # the topic's iceberg.delete
    protobuf_name: str = ""  # value_schema_latest's protobuf_name: the message every record is read as
    mode_options: str = ""  # the whole iceberg.mode, with value_schema_latest's options (kept in the table)
    # topic ids of earlier topics of this name the broker confirmed gone (from the cluster's store,
    # not its cache): only a table of one of these is set aside
    retired: tuple[str, ...] = ()


@dataclass
class TopicResult:
    offsets: dict[int, int]  # the table's committed offsets after the round, every partition
    rows: int = 0  # rows this round committed
    commits_lost: int = 0  # commits that lost a race and were planned again
    dead_letters: int = 0  # rows this round committed to the dead-letter table
    waiting: dict[int, int] = field(default_factory=dict)  # partition -> offset whose schema id is not known yet
    spec_left_out: tuple[str, ...] = ()  # fields of iceberg.partition.spec the table cannot take, with why
    set_aside: tuple[str, ...] = ()  # what became of tables of an earlier topic of the same name
    foreign: str = ""  # a table of this topic id was found and left: the broker confirms it is gone first


Row = tuple[int, BatchHeader, Record]  # (partition, batch header, record)


def _kafka_columns(arrow_schema: Any, rows: list[Row]) -> list[Any]:
    """The ``kafka`` struct and ``key`` columns of ``rows``."""
    import pyarrow as pa

    columns: dict[str, list] = {k: [] for k in ("partition", "offset", "timestamp", "timestamp_type", "headers", "key")}
    for partition, header, record in rows:
        columns["partition"].append(partition)
        columns["offset"].append(record.offset)
        columns["timestamp"].append(record.timestamp * 1000)  # Iceberg's timestamptz is in microseconds
        columns["timestamp_type"].append(header.timestamp_type)
        columns["headers"].append([{"key": k, "value": v} for k, v in record.headers])
        columns["key"].append(record.key)
    kafka_type = arrow_schema.field("kafka").type
    kafka = pa.StructArray.from_arrays(
        [
            pa.array(columns["partition"], kafka_type.field("partition").type),
            pa.array(columns["offset"], kafka_type.field("offset").type),
            pa.array(columns["timestamp"], pa.int64()).cast(kafka_type.field("timestamp").type),
            pa.array(columns["timestamp_type"], kafka_type.field("timestamp_type").type),
            pa.array(columns["headers"], kafka_type.field("headers").type),
        ],
        fields=list(kafka_type),
    )
    return [kafka, pa.array(columns["key"], arrow_schema.field("key").type)]


def _arrow_rows(schema: Any, partition: int, records: list[tuple[BatchHeader, Record]]) -> Any:
    import pyarrow as pa

    arrow_schema = schema.as_arrow()
    rows = [(partition, header, record) for header, record in records]
    kafka, key = _kafka_columns(arrow_schema, rows)
    value = pa.array([record.value for _, record in records], arrow_schema.field("value").type)
    given = {"kafka": kafka, "key": key, "value": value}
    # a table that was in a schema mode before keeps its typed columns: null in these rows
    columns = [given[f.name] if f.name in given else pa.nulls(len(rows), f.type) for f in arrow_schema]
    return pa.Table.from_arrays(columns, schema=arrow_schema)


def _back_to_key_value(table: Any) -> None:
    """A topic switched from a schema mode to ``key_value``: its table gets a binary ``value``
    column again if it has none (before the offsets are read: this commit reloads the table)."""
    from pyiceberg.types import BinaryType

    if tables.table_mode(table) == "key_value":
        return
    if "value" not in table.schema().column_names:
        with table.update_schema() as update:
            update.add_column("value", BinaryType())
    tables.keep_mode(table, "key_value")


def _claim(catalog: Any, job: TopicJob) -> tuple[tuple[str, ...], str]:
    """Make sure the topic's tables hold this topic's records, not those of an earlier topic of the
    same name (deleted and made again between two rounds, or while this broker led none of it): a
    table that records another topic id is that topic's, and is set aside before this round makes
    the topic's own. As the deletion would have: dropped and purged when that topic's
    iceberg.delete was true, else renamed ``<table>~<its topic id>`` and kept. A table made before
    topic ids were recorded is taken as this topic's. Each step re-reads the id, so a broker that
    lost a race to another never sets aside the new topic's table. Only a table of an id in
    ``job.retired`` is set aside: a broker whose metadata is behind (it still knows the earlier
    topic) would otherwise take the new topic's table for an old one. Returns what it did, to
    log, and the id of a table it found and left (the round translates nothing then)."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    done: list[str] = []
    if not job.topic_id:
        return (), ""
    for name in (tables.identifier(job.topic), tables.dlq_identifier(job.topic)):
        table = tables.load_existing(catalog, name)
        if table is None:
            continue
        found = tables.table_topic_id(table)
        if found is None or found == job.topic_id:
            tables.keep_topic(table, job.topic_id, job.delete)
            continue
        if found not in job.retired:
            return tuple(done), found
        if table.properties.get(tables.DELETE_PROPERTY, "true") == "true":
            if purge(catalog, name, topic_id=found) is not None:  # None: another broker got there first
                done.append(f"the table {name[1]} of an earlier topic {found} was dropped (iceberg.delete=true)")
        else:
            aside = (name[0], f"{name[1]}~{found}")
            try:
                again = tables.load_existing(catalog, name)
                if again is not None and tables.table_topic_id(again) == found:
                    catalog.rename_table(name, aside)
                    done.append(f"the table of an earlier topic {found} was kept as {aside[1]} (iceberg.delete=false)")
            except (NoSuchTableError, TableAlreadyExistsError):
                pass  # another broker set it aside first
    return tuple(done), ""


def translate_topic(job: TopicJob) -> TopicResult:
    """One round for the partitions of ``job`` this broker leads."""
    if job.mode != "key_value":
        return _translate_typed(job)
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException

    catalog = tables.open_catalog(job.catalog)
    aside, foreign = _claim(catalog, job)
    if foreign:
        return TopicResult({}, set_aside=aside, foreign=foreign)
    lost = 0
    for _attempt in range(COMMIT_ATTEMPTS):
        table = tables.load_or_create(
            catalog, job.topic, job.catalog.target_file_size_bytes, partition_spec=job.partition_spec, **_made(job)
        )
        _back_to_key_value(table)
        try:
            left_out = tuple(partition_spec.evolve(table, job.partition_spec))
        except CommitFailedException:
            lost += 1  # another broker changed the table's spec or schema first
            continue
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
            return TopicResult(committed, 0, lost, spec_left_out=left_out, set_aside=aside)  # nothing new
        # no rows but offsets moved (past aborted records or markers): a snapshot of offsets only,
        # so that the table's offsets reach the last stable offset
        rows = pa.concat_tables(pieces) if pieces else table.schema().as_arrow().empty_table()
        try:
            table.append(rows, snapshot_properties=tables.offset_properties(offsets))
        except CommitFailedException as exc:
            lost += 1
            log.info("%s: a commit lost a race (%s); planning again from the table's offsets", job.topic, exc)
            continue
        return TopicResult(offsets, rows.num_rows, lost, spec_left_out=left_out, set_aside=aside)
    raise RuntimeError(f"{job.topic}: {COMMIT_ATTEMPTS} commits in a row lost their race")


def _made(job: TopicJob, name: tuple[str, str] | None = None) -> dict[str, Any]:
    """What a table this round makes records of its topic, and where it lives."""
    name = name or tables.identifier(job.topic)
    location = tables.topic_location(job.catalog, name, job.topic_id)
    return {"topic_id": job.topic_id, "delete": job.delete, "location": location}


def _dead_letter_rows(table: Any, rows: list[tuple[Row, str]]) -> Any:
    import pyarrow as pa

    arrow_schema = table.schema().as_arrow()  # the catalog numbers a new table's fields afresh
    plain = [row for row, _ in rows]
    return pa.Table.from_arrays(
        [
            *_kafka_columns(arrow_schema, plain),
            pa.array([record.value for _, _, record in plain], arrow_schema.field("value").type),
            pa.array([reason for _, reason in rows], arrow_schema.field("reason").type),
        ],
        schema=arrow_schema,
    )


def _typed_rows(table: Any, good: list[tuple[Row, Decoded]]) -> tuple[Any, list[tuple[Row, str]]]:
    """The Arrow table of the decoded rows in the table's schema, and the rows whose values do not
    fit their columns (a decimal wider than its precision...) with the reason."""
    import pyarrow as pa

    arrow_schema = table.schema().as_arrow()

    def build(part: list[tuple[Row, Decoded]]) -> Any:
        columns = value_arrays(arrow_schema, [decoded.value for _, decoded in part])
        return pa.Table.from_arrays(
            [*_kafka_columns(arrow_schema, [r for r, _ in part]), *columns], schema=arrow_schema
        )

    try:
        return build(good), []
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        pass
    kept, dead = [], []  # find the rows that do not fit, one at a time
    for item in good:
        try:
            build([item])
            kept.append(item)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            dead.append((item[0], f"schema id {item[1].schema_id}: the value does not fit the table's columns: {exc}"))
    return build(kept), dead


def _evolve(table: Any, decoder: Decoder, keys: list[Key]) -> dict[Key, str]:
    """Add the columns of ``keys`` (schemas, and Protobuf messages) to the table (widening types
    Iceberg can widen); returns those that cannot be added, with why. A CommitFailedException
    (another broker evolved it first) goes up: the round plans again."""
    from pyiceberg.exceptions import ValidationError
    from pyiceberg.schema import Schema

    refused: dict[Key, str] = {}
    for key in keys:
        fields = decoder.fields(key)
        if isinstance(fields, str):
            refused[key] = fields
            continue
        try:
            with table.update_schema() as update:
                update.union_by_name(Schema(*fields))
        except (ValidationError, ValueError) as exc:
            refused[key] = f"{decoder.label(key)} does not fit the table's columns: {exc}"
    return refused


def _snapshot_id(table: Any) -> int | None:
    snapshot = table.current_snapshot()
    return None if snapshot is None else snapshot.snapshot_id


def _translate_typed(job: TopicJob) -> TopicResult:
    """One round of a schema mode: the table's rows and the dead-letter table's (see the module docstring)."""
    from pyiceberg.exceptions import CommitFailedException

    schemas = job.schemas or SchemaSet(settled=False)
    catalog = tables.open_catalog(job.catalog)
    aside, foreign = _claim(catalog, job)
    if foreign:
        return TopicResult({}, set_aside=aside, foreign=foreign)
    lost = 0
    for _attempt in range(COMMIT_ATTEMPTS):
        decoder = Decoder(job.mode, schemas, job.protobuf_name)
        base: list[Any] = []
        latest = decoder.base()
        if latest is not None and not isinstance(decoder.fields(latest), str):
            base = list(decoder.fields(latest))
        table = tables.load_or_create(
            catalog,
            job.topic,
            job.catalog.target_file_size_bytes,
            schema=tables.typed_schema(base),
            partition_spec=job.partition_spec,
            **_made(job),
        )
        tables.keep_mode(table, job.mode_options or job.mode)
        committed = tables.committed_offsets(table)
        planned_from = _snapshot_id(table)
        dlq = tables.load_existing(catalog, tables.dlq_identifier(job.topic))
        dlq_committed = tables.committed_offsets(dlq) if dlq is not None else {}
        offsets, dlq_offsets = dict(committed), dict(dlq_committed)
        good: list[tuple[Row, Decoded]] = []
        dead: list[tuple[Row, str]] = []
        waiting: dict[int, int] = {}
        for part in job.partitions:
            start = max(committed.get(part.partition, 0), part.log_start_offset)
            if start < part.aborted_from or start >= part.upper:
                continue
            records, resume = committed_records(
                part.directory, start, part.upper, list(part.aborted), MAX_BYTES_PER_PARTITION
            )
            for header, record in records:
                verdict = decoder.decode(record.value)
                if isinstance(verdict, Wait):
                    resume = record.offset  # its schema is registered but not read here yet
                    waiting[part.partition] = record.offset
                    break
                row = (part.partition, header, record)
                if isinstance(verdict, Decoded):
                    good.append((row, verdict))
                else:
                    dead.append((row, verdict))
            offsets[part.partition] = resume
        if offsets == committed:
            return TopicResult(committed, 0, lost, waiting=waiting, set_aside=aside)
        try:
            refused = _evolve(table, decoder, sorted({d.columns for _, d in good}))
            # after the schema: a field on a value column the table has only now can be added
            left_out = tuple(partition_spec.evolve(table, job.partition_spec))
            if _snapshot_id(table) != planned_from:
                # evolving reloaded the table, and another broker's commit came with it: the append
                # would now be checked against that snapshot, not the one the offsets were read from
                raise CommitFailedException("the table moved on while its schema evolved")
            if refused:
                dead += [(row, refused[d.columns]) for row, d in good if d.columns in refused]
                good = [(row, d) for row, d in good if d.columns not in refused]
            rows, unfit = _typed_rows(table, good)
            dead += unfit
            # a dead letter below the dead-letter table's offsets is there already (a round that died
            # between the two commits, or whose table commit lost its race)
            dead = [(row, why) for row, why in dead if row[2].offset >= dlq_committed.get(row[0], 0)]
            if dead:
                for partition in {row[0] for row, _ in dead}:
                    dlq_offsets[partition] = offsets[partition]
                if dlq is None:
                    dlq = tables.load_or_create(
                        catalog,
                        job.topic,
                        job.catalog.target_file_size_bytes,
                        schema=tables.dead_letter_schema(),
                        name=tables.dlq_identifier(job.topic),
                        **_made(job, tables.dlq_identifier(job.topic)),
                    )
                    if _snapshot_id(dlq) is not None:  # another broker made it and committed to it first
                        raise CommitFailedException("the dead-letter table was made and written meanwhile")
                dead.sort(key=lambda item: (item[0][0], item[0][2].offset))
                dlq.append(_dead_letter_rows(dlq, dead), snapshot_properties=tables.offset_properties(dlq_offsets))
            table.append(rows, snapshot_properties=tables.offset_properties(offsets))
        except CommitFailedException as exc:
            lost += 1
            log.info("%s: a commit lost a race (%s); planning again from the tables' offsets", job.topic, exc)
            continue
        return TopicResult(offsets, rows.num_rows, lost, len(dead), waiting, left_out, aside)
    raise RuntimeError(f"{job.topic}: {COMMIT_ATTEMPTS} commits in a row lost their race")


def table_offsets(catalog: tables.CatalogSettings, topic: str) -> dict[int, int]:
    """The committed offsets of a topic's table (empty when it has none yet)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return tables.committed_offsets(tables.open_catalog(catalog).load_table(tables.identifier(topic)))
    except NoSuchTableError:
        return {}


def drop_table(catalog: tables.CatalogSettings, topic: str, topic_id: str = "") -> list[Removed]:
    """Drop a deleted topic's table and its dead-letter table and purge their files, as Iceberg's
    DROP TABLE ... PURGE (strom.iceberg.orphan_files): what each dropped table's purge deleted.
    Only tables of ``topic_id`` (when given): a table of a topic made again under the name stays."""
    opened = tables.open_catalog(catalog)
    purged = []
    for name in (tables.identifier(topic), tables.dlq_identifier(topic)):
        # None: another broker that led one of its partitions dropped it first (or it had no dead
        # letters), or the table is a newer topic's of the same name
        removed = purge(opened, name, topic_id=topic_id or None)
        if removed is not None:
            purged.append(removed)
    return purged


def init_worker() -> None:
    """The pool's initializer: exit with the broker, then a lower priority than the event loop's."""
    from strom.storage.cleaner_process import CLEANER_NICENESS, exit_with_the_broker

    exit_with_the_broker()
    try:
        os.nice(CLEANER_NICENESS)
    except OSError:
        pass
