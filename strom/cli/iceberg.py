"""``strom iceberg``: the Iceberg tables that brokers keep for topics, and how far behind they are.

    strom iceberg --bootstrap-server 127.0.0.1:9092 list [--topic T] [--catalog-uri URI]
    strom iceberg --bootstrap-server 127.0.0.1:9092 status [--topic T] [--catalog-uri URI]
    strom iceberg --bootstrap-server 127.0.0.1:9092 remove-orphan-files --topic T [--older-than-ms N] [--dry-run]

``list`` prints a line per Iceberg topic (``iceberg.mode`` other than disabled): its mode, the
table's location, current snapshot and rows. ``status`` prints a line per partition: the offset
the table holds up to (from its snapshot's summary, the same offsets the translator resumes
from), the partition's committed end (the last stable offset: what a read_committed consumer
reads up to, and so what translation can reach), the lag in records, and in seconds (how old the
oldest committed record that is not in the table yet is). ``remove-orphan-files`` deletes the
files in the topic's tables' locations that no metadata references and that are older than
``--older-than-ms`` (default: the topic's ``iceberg.orphan.files.older.than.ms``, Iceberg's 3 days
when that is -1), as Iceberg's removeOrphanFiles does (strom.iceberg.orphan_files), printing each;
``--dry-run`` prints them and deletes nothing.

The catalog is the brokers' own: ``iceberg.catalog.uri`` as the broker describes it, or, when
that is unset, the SQLite catalog in the broker's first log dir, which this tool can open when it
runs on the broker's host. ``--catalog-uri`` names another.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    add_timeout_argument,
    client_config,
    command_properties,
    ensure_reachable,
    error_text,
)

ACTIONS = ("list", "status", "remove-orphan-files")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker(s) to connect to")
    add_command_config_argument(parser)
    parser.add_argument(
        "action",
        choices=ACTIONS,
        help="list: tables; status: translation lag per partition; remove-orphan-files: delete the files "
        "of a topic's tables that no metadata references",
    )
    parser.add_argument("--topic", help="only this topic (remove-orphan-files: the topic, required)")
    parser.add_argument(
        "--older-than-ms",
        type=int,
        metavar="MS",
        help="remove-orphan-files: only files last modified longer ago than this (default: the topic's "
        "iceberg.orphan.files.older.than.ms)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="remove-orphan-files: print the files it would delete, delete none"
    )
    parser.add_argument(
        "--catalog-uri",
        metavar="URI",
        help="the Iceberg catalog: a SQL catalog's SQLAlchemy URL or a REST catalog's http(s) URL; default: "
        "the brokers' (iceberg.rest.catalog.uri with iceberg.catalog.type=rest, else iceberg.catalog.uri, or "
        "the SQLite catalog in the first log dir)",
    )
    parser.add_argument(
        "--catalog-credential",
        metavar="ID:SECRET",
        help="a REST catalog's OAuth2 client credentials (against strom's catalog on SASL brokers: a SCRAM user "
        "and its password); an https catalog is checked against the --command-config's ssl.ca.location",
    )
    add_timeout_argument(parser, default_ms=10_000)


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    table_offset: int  # the next offset the table lacks
    committed_end: int  # the last stable offset
    lag_seconds: float | None  # None: nothing behind, or its timestamp could not be read

    @property
    def lag_records(self) -> int:
        return max(0, self.committed_end - self.table_offset)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AdminClient

    props = command_properties(args.command_config)
    config = client_config(args.bootstrap_server, overrides=props)
    admin = AdminClient(config)
    timeout_s = args.timeout / 1000
    try:
        ensure_reachable(admin, args.bootstrap_server, timeout_s)
        topics = iceberg_topics(admin, args.topic, timeout_s)
        if args.topic and args.topic not in topics:
            raise ToolError(f"topic {args.topic} is not an Iceberg topic (its iceberg.mode is disabled)")
        rest = RestAccess(args.catalog_credential, props.get("ssl.ca.location"))
        catalog = open_brokers_catalog(admin, args.catalog_uri, timeout_s, rest)
        if args.action == "list":
            print_tables(catalog, topics)
        elif args.action == "remove-orphan-files":
            remove_orphan_files(admin, catalog, args, timeout_s)
        else:
            print_lag(admin, config, catalog, topics, timeout_s)
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0


def iceberg_topics(admin, only: str | None, timeout_s: float) -> dict[str, str]:
    """Topic -> its iceberg.mode, for every topic (or ``only``) whose mode is not disabled."""
    from confluent_kafka.admin import ConfigResource

    names = [only] if only else [t for t in admin.list_topics(timeout=timeout_s).topics if not t.startswith("_")]
    if not names:
        return {}
    futures = admin.describe_configs([ConfigResource("topic", name) for name in names], request_timeout=timeout_s)
    modes = {}
    for resource, future in futures.items():
        try:
            entries = future.result(timeout_s)
        except Exception as exc:
            raise ToolError(f"describe configs of topic {resource.name}: {error_text(exc)}") from None
        entry = entries.get("iceberg.mode")
        if entry is not None and entry.value not in (None, "disabled"):
            modes[resource.name] = entry.value
    return dict(sorted(modes.items()))


@dataclass(frozen=True)
class RestAccess:
    """How to log in to a REST catalog: the brokers' own credentials are secrets DescribeConfigs hides."""

    credential: str | None = None
    ca_location: str | None = None


def open_brokers_catalog(admin, catalog_uri: str | None, timeout_s: float, rest: RestAccess | None = None):
    """The catalog the brokers commit to (``catalog_uri``: another); None when it is the default SQL
    catalog and not made yet."""
    from confluent_kafka.admin import ConfigResource

    from strom.iceberg.table import CatalogSettings, open_catalog

    broker_id = next(iter(admin.list_topics(timeout=timeout_s).brokers))
    [future] = admin.describe_configs([ConfigResource("broker", str(broker_id))], request_timeout=timeout_s).values()
    try:
        entries = future.result(timeout_s)
    except Exception as exc:
        raise ToolError(f"describe configs of broker {broker_id}: {error_text(exc)}") from None

    def value(key: str) -> str | None:
        entry = entries.get(key)
        return entry.value if entry is not None else None

    rest_uri = catalog_uri if catalog_uri and catalog_uri.startswith(("http://", "https://")) else None
    if catalog_uri is None and value("iceberg.catalog.type") == "rest":
        rest_uri = value("iceberg.rest.catalog.uri")
    if rest_uri is not None:
        access = rest or RestAccess()
        try:
            return open_catalog(
                CatalogSettings.for_rest(rest_uri, credential=access.credential, ca_location=access.ca_location)
            )
        except Exception as exc:  # CatalogUnreachable names the key; pyiceberg's own errors: one line
            raise ToolError(f"cannot open the Iceberg REST catalog {rest_uri}: {exc}") from None
    log_dirs = tuple((value("log.dirs") or value("log.dir") or "").split(","))
    settings = CatalogSettings.for_broker(
        log_dirs, catalog_uri or value("iceberg.catalog.uri"), value("iceberg.warehouse"), 512 * 1024 * 1024
    )
    if settings.uri.startswith("sqlite:///"):
        import os

        path = "/" + settings.uri.removeprefix("sqlite:///").lstrip("/")
        if not os.path.exists(path):
            if os.path.isdir(os.path.dirname(path)):
                return None  # the broker's log dir, before its first table: nothing translated yet
            raise ToolError(
                f"no Iceberg catalog at {settings.uri}: run this on the broker's host, or name the catalog "
                "with --catalog-uri"
            )
    try:
        return open_catalog(settings)
    except Exception as exc:  # SQLAlchemy's and pyiceberg's own errors: one line
        raise ToolError(f"cannot open the Iceberg catalog {settings.uri}: {exc}") from None


def load(catalog, topic: str):
    from pyiceberg.exceptions import NoSuchTableError

    from strom.iceberg.table import identifier

    if catalog is None:
        return None
    try:
        return catalog.load_table(identifier(topic))
    except NoSuchTableError:
        return None  # not translated yet: the first commit creates it


def remove_orphan_files(admin, catalog, args: argparse.Namespace, timeout_s: float) -> None:
    """Delete (or, ``--dry-run``, list) the orphan files of the topic's table and dead-letter table."""
    from confluent_kafka.admin import ConfigResource
    from pyiceberg.exceptions import NoSuchTableError

    from strom.iceberg.orphan_files import DEFAULT_OLDER_THAN_MS, remove_orphans
    from strom.iceberg.table import dlq_identifier, identifier

    if not args.topic:
        raise ToolError("remove-orphan-files needs --topic")
    older_than = args.older_than_ms
    if older_than is None:
        [future] = admin.describe_configs([ConfigResource("topic", args.topic)], request_timeout=timeout_s).values()
        entry = future.result(timeout_s).get("iceberg.orphan.files.older.than.ms")
        older_than = int(entry.value) if entry is not None and entry.value is not None else DEFAULT_OLDER_THAN_MS
        if older_than < 0:  # the topic's periodic pass is off; by hand, Iceberg's margin
            older_than = DEFAULT_OLDER_THAN_MS
    if older_than < 0:
        raise ToolError(f"--older-than-ms must be at least 0, not {older_than}")
    count = size = 0
    for name in (identifier(args.topic), dlq_identifier(args.topic)):
        try:
            table = catalog.load_table(name) if catalog is not None else None
        except NoSuchTableError:
            table = None
        if table is None:
            continue
        try:
            removed = remove_orphans(catalog, table, older_than, dry_run=args.dry_run)
        except Exception as exc:  # a manifest that cannot be read: nothing is deleted
            raise ToolError(f"listing the orphan files of {name[1]} failed, nothing deleted: {exc}") from None
        for path in removed.paths or []:
            print(f"{'would delete' if args.dry_run else 'deleted'} {path}")
        count += removed.orphan_files
        size += removed.orphan_bytes
    done = "would be deleted (dry run)" if args.dry_run else "deleted"
    print(f"{count} orphan files ({size} bytes) older than {older_than} ms {done} from the tables of {args.topic}")


@dataclass(frozen=True)
class TableView:
    location: str | None  # None: no table yet
    snapshot_id: int | None
    rows: int


def table_view(catalog, topic: str) -> TableView:
    table = load(catalog, topic)
    if table is None:
        return TableView(None, None, 0)
    snapshot = table.current_snapshot()
    rows = 0
    if snapshot is not None and snapshot.summary is not None:
        rows = int(snapshot.summary.additional_properties.get("total-records", "0"))
    return TableView(table.location(), snapshot.snapshot_id if snapshot is not None else None, rows)


def print_tables(catalog, topics: dict[str, str]) -> None:
    rows = [("TOPIC", "MODE", "SNAPSHOT", "ROWS", "LOCATION")]
    for topic, mode in topics.items():
        view = table_view(catalog, topic)
        snapshot = str(view.snapshot_id) if view.snapshot_id is not None else "-"
        rows.append((topic, mode, snapshot, str(view.rows), view.location or "- (no table yet)"))
    print_columns(rows)


def print_lag(admin, config: dict, catalog, topics: dict[str, str], timeout_s: float) -> None:
    rows = [("TOPIC", "PARTITION", "TABLE-OFFSET", "COMMITTED-END", "LAG", "LAG-SECONDS")]
    for topic in topics:
        for lag in partition_lags(admin, config, catalog, topic, timeout_s):
            seconds = "-" if lag.lag_seconds is None else f"{lag.lag_seconds:.1f}"
            rows.append(
                (
                    topic,
                    str(lag.partition),
                    str(lag.table_offset),
                    str(lag.committed_end),
                    str(lag.lag_records),
                    seconds,
                )
            )
    print_columns(rows)


def partition_lags(admin, config: dict, catalog, topic: str, timeout_s: float) -> list[PartitionLag]:
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from strom.iceberg.table import committed_offsets

    table = load(catalog, topic)
    in_table = committed_offsets(table) if table is not None else {}
    partitions = sorted(admin.list_topics(topic, timeout=timeout_s).topics[topic].partitions)
    wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    starts = {TopicPartition(topic, p): OffsetSpec.earliest() for p in partitions}
    try:
        ends = {
            tp.partition: f.result(timeout_s).offset
            for tp, f in admin.list_offsets(
                wanted, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout_s
            ).items()
        }
        log_starts = {
            tp.partition: f.result(timeout_s).offset
            for tp, f in admin.list_offsets(starts, request_timeout=timeout_s).items()
        }
    except Exception as exc:
        raise ToolError(f"list offsets of {topic}: {error_text(exc)}") from None
    behind = {
        p: max(in_table.get(p, log_starts[p]), log_starts[p])
        for p in partitions
        if ends[p] > in_table.get(p, log_starts[p])
    }
    oldest = oldest_timestamps_ms(config, topic, behind, timeout_s) if behind else {}
    lags = []
    for partition in partitions:
        table_offset = in_table.get(partition, log_starts[partition])  # where translation starts
        seconds = max(0.0, time.time() - oldest[partition] / 1000) if partition in oldest else None
        lags.append(PartitionLag(topic, partition, table_offset, ends[partition], seconds))
    return lags


def oldest_timestamps_ms(config: dict, topic: str, offsets: dict[int, int], timeout_s: float) -> dict[int, int]:
    """Partition -> the timestamp of its first committed record at or after ``offsets[partition]``,
    read by one consumer for all of them (a partition with none within the timeout is left out)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": "strom-iceberg-status",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    found: dict[int, int] = {}
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in offsets.items()])
        deadline = time.monotonic() + timeout_s
        while len(found) < len(offsets) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                partition = message.partition()
                if partition is not None and partition not in found:
                    found[partition] = message.timestamp()[1]
                    consumer.pause([TopicPartition(topic, partition)])
        return found
    finally:
        consumer.close()


def print_columns(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
