"""The Iceberg tables of a topic: their schemas, their catalog, and their offsets.

Columns in ``key_value`` mode: ``kafka`` (a struct of partition, offset, timestamp, timestamp_type
and headers, a list of key/value structs), ``key`` and ``value`` as binary; partitioned by the topic's
``iceberg.partition.spec`` (strom.iceberg.partition_spec), by default ``hour(kafka.timestamp)``. In the schema modes ``kafka`` and ``key`` are followed by the value's
columns (strom.iceberg.avro_columns), and the records that cannot be translated go to the
dead-letter table ``<topic>~dlq``: the ``key_value`` columns and a ``reason``.

Exactly once rests on the snapshot summary: every snapshot strom commits carries
``strom.offsets.<partition>`` = the next offset to translate for *every* partition the table
covers (copied forward from the snapshot it replaces), so the current snapshot alone says where
each partition resumes. A commit is conditional on the snapshot it was planned from (pyiceberg's
``AssertRefSnapshotId``) and pyiceberg's own commit retries are switched off for these tables
(``commit.retry.num-retries=0``): a retry would re-apply the same files onto a newer snapshot
whose offsets already cover them. The translator instead re-reads the offsets and starts over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strom.storage.iceberg_spec import DEFAULT_PARTITION_SPEC

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

NAMESPACE = "strom"
OFFSET_PREFIX = "strom.offsets."
MODE_PROPERTY = "strom.iceberg.mode"  # the topic's iceberg.mode, as its last translation round had it
# the topic id (KIP-516, 32 hex digits) of the topic whose records the table holds: a topic deleted
# and made again under the same name has another id, so its brokers know the table is the old one's
TOPIC_ID_PROPERTY = "strom.topic.id"
# value_schema_latest's options as the topic's iceberg.mode gave them (readers decode the log's
# newest records as the brokers do: read_topic)
MODE_OPTIONS_PROPERTY = "strom.iceberg.mode.options"
DELETE_PROPERTY = "strom.iceberg.delete"  # that topic's iceberg.delete, for whoever finds the table orphaned
CATALOG_NAME = "strom"
# pyiceberg's automatic commit retry re-applies an append onto a newer snapshot: never for ours
NO_RETRY = {"commit.retry.num-retries": "0"}


@dataclass(frozen=True)
class CatalogSettings:
    """Where the tables live: an Iceberg SQL catalog (SQLAlchemy URL) and the warehouse new tables use,
    or (``kind="rest"``) an Iceberg REST catalog at ``uri``, ``rest`` holding the properties of
    pyiceberg's RestCatalog (credential, token, warehouse, ssl), the warehouse being the server's."""

    uri: str
    warehouse: str
    target_file_size_bytes: int = 512 * 1024 * 1024
    kind: str = "sql"
    rest: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def for_broker(
        cls, log_dirs: tuple[str, ...], uri: str | None, warehouse: str | None, target_file_size_bytes: int
    ) -> CatalogSettings:
        first = os.path.abspath(log_dirs[0])
        if uri is None:
            uri = "sqlite:///" + os.path.join(first, "iceberg-catalog.db")
        if warehouse is None:
            warehouse = os.path.join(os.path.dirname(first.rstrip("/")), "iceberg-warehouse")
        if "://" not in warehouse:
            warehouse = "file://" + os.path.abspath(warehouse)
        return cls(uri, warehouse, target_file_size_bytes)

    @classmethod
    def for_rest(
        cls,
        uri: str,
        target_file_size_bytes: int = 512 * 1024 * 1024,
        credential: str | None = None,
        token: str | None = None,
        warehouse: str | None = None,
        ca_location: str | None = None,
    ) -> CatalogSettings:
        """An Iceberg REST catalog, with pyiceberg's properties: ``credential`` (OAuth2 client
        credentials ``id:secret``, exchanged for a token at the catalog's /v1/oauth/tokens),
        ``token`` (a bearer token), ``warehouse`` (sent to the catalog's /v1/config), and the CA
        certificates (PEM) an https catalog's certificate is checked against."""
        given: dict[str, Any] = {"credential": credential, "token": token, "warehouse": warehouse}
        properties: list[tuple[str, Any]] = [(k, v) for k, v in given.items() if v is not None]
        if credential is not None:  # the catalog's own token endpoint, named (pyiceberg warns otherwise)
            properties.append(("oauth2-server-uri", uri.rstrip("/") + "/v1/oauth/tokens"))
        if ca_location is not None:
            properties.append(("ssl", (("cabundle", ca_location),)))
        return cls(uri, warehouse or "", target_file_size_bytes, "rest", tuple(properties))


def open_catalog(settings: CatalogSettings) -> Catalog:
    if settings.kind == "rest":
        from strom.iceberg.rest_client import open_rest_catalog

        return open_rest_catalog(settings.uri, settings.rest)
    from pyiceberg.catalog.sql import SqlCatalog

    if settings.warehouse.startswith("file://"):
        os.makedirs(settings.warehouse.removeprefix("file://"), exist_ok=True)
    return SqlCatalog(CATALOG_NAME, uri=settings.uri, warehouse=settings.warehouse)


DLQ_SUFFIX = "~dlq"  # "~" is no character of a topic name: the dead-letter table's name is no topic's
FIRST_VALUE_ID = 11  # the value columns' field ids in the schema modes start after kafka's and key's


def identifier(topic: str) -> tuple[str, str]:
    """A tuple, not "strom.<topic>": a topic name may hold dots, which a dotted name would split."""
    return NAMESPACE, topic


def dlq_identifier(topic: str) -> tuple[str, str]:
    return NAMESPACE, topic + DLQ_SUFFIX


def _kafka_field() -> Any:
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    header = StructType(
        NestedField(8, "key", StringType(), required=False), NestedField(9, "value", BinaryType(), required=False)
    )
    kafka = StructType(
        NestedField(2, "partition", IntegerType(), required=True),
        NestedField(3, "offset", LongType(), required=True),
        NestedField(4, "timestamp", TimestamptzType(), required=True),
        NestedField(5, "timestamp_type", IntegerType(), required=True),
        NestedField(6, "headers", ListType(7, header, element_required=True), required=False),
    )
    return NestedField(1, "kafka", kafka, required=True)


def key_value_schema() -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import BinaryType, NestedField

    return Schema(
        _kafka_field(),
        NestedField(10, "key", BinaryType(), required=False),
        NestedField(11, "value", BinaryType(), required=False),
    )


def dead_letter_schema() -> Any:
    """``key_value``'s columns (the raw key and value) and why the record was not translated."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StringType

    return Schema(*key_value_schema().fields, NestedField(12, "reason", StringType(), required=False))


def typed_schema(value_fields: list[Any]) -> Any:
    """A schema mode's columns: ``kafka``, ``key`` as binary, then the value's columns (ids from 11)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import BinaryType, NestedField

    return Schema(_kafka_field(), NestedField(10, "key", BinaryType(), required=False), *value_fields)


def load_existing(catalog: Catalog, name: tuple[str, str]) -> Table | None:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return _without_retries(catalog.load_table(name))
    except NoSuchTableError:
        return None


def load_or_create(
    catalog: Catalog,
    topic: str,
    target_file_size_bytes: int,
    schema: Any = None,
    name: tuple[str, str] | None = None,
    partition_spec: str = DEFAULT_PARTITION_SPEC,
    topic_id: str = "",
    delete: bool = True,
    location: str | None = None,
) -> Table:
    """The topic's table (``name``: another of its tables), made with ``schema`` (``key_value``'s by
    default) and the fields of ``partition_spec`` its columns take, on first use; brokers racing to
    make it all end with the one that won. A new table records ``topic_id`` and ``delete`` (the
    topic's iceberg.delete) and lives at ``location`` (None: where the catalog puts it)."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError

    from strom.iceberg.partition_spec import build

    name = name or identifier(topic)
    found = load_existing(catalog, name)
    if found is not None:
        return found
    try:
        catalog.create_namespace(NAMESPACE)
    except NamespaceAlreadyExistsError:
        pass
    properties = {**NO_RETRY, "write.target-file-size-bytes": str(target_file_size_bytes)}
    if topic_id:
        properties |= {TOPIC_ID_PROPERTY: topic_id, DELETE_PROPERTY: str(delete).lower()}
    schema = schema or key_value_schema()
    spec, _left_out = build(schema, partition_spec)  # the round's evolve() reports what was left out
    try:
        return catalog.create_table(name, schema=schema, location=location, partition_spec=spec, properties=properties)
    except TableAlreadyExistsError:
        return catalog.load_table(name)


def _without_retries(table: Table) -> Table:
    """A table whose commit retries someone switched back on (another engine, by hand) gets them off
    again before strom commits to it: exactly once depends on it (see the module docstring)."""
    if all(table.properties.get(key) == value for key, value in NO_RETRY.items()):
        return table
    with table.transaction() as transaction:
        transaction.set_properties(NO_RETRY)
    return table


def topic_location(settings: CatalogSettings, name: tuple[str, str], topic_id: str) -> str | None:
    """Where a table of the topic with ``topic_id`` lives in a SQL catalog's warehouse: a directory
    of its own under the table name's, so that a table of an earlier topic of the same name, kept
    aside (iceberg.delete=false), never shares its files' directory (one table's orphan pass or
    purge would take the other's files). None for a REST catalog: its server places tables."""
    if settings.kind != "sql" or not topic_id:
        return None
    return f"{settings.warehouse.rstrip('/')}/{name[0]}.db/{name[1]}/{topic_id}"


def table_topic_id(table: Table) -> str | None:
    """The topic id a table was made for (None: a table made before strom recorded it)."""
    found = table.properties.get(TOPIC_ID_PROPERTY)
    return str(found) if found else None


def keep_topic(table: Table, topic_id: str, delete: bool) -> None:
    """Record the topic id and iceberg.delete of the topic whose records the table holds."""
    wanted = {TOPIC_ID_PROPERTY: topic_id, DELETE_PROPERTY: str(delete).lower()}
    if any(table.properties.get(key) != value for key, value in wanted.items()):
        with table.transaction() as transaction:
            transaction.set_properties(wanted)


def table_mode(table: Table) -> str:
    """The iceberg.mode a table was last written in (key_value for tables made before it was kept)."""
    return str(table.properties.get(MODE_PROPERTY, "key_value"))


def keep_mode(table: Table, mode: str) -> None:
    """Record ``mode`` (with value_schema_latest's options, if any) in the table's properties
    (readers such as read_topic decode by it): the mode's name, and the whole of it."""
    wanted = {MODE_PROPERTY: mode.partition(":")[0], MODE_OPTIONS_PROPERTY: mode}
    if any(table.properties.get(key) != value for key, value in wanted.items()):
        with table.transaction() as transaction:
            transaction.set_properties(wanted)


def table_mode_options(table: Table) -> str:
    """The iceberg.mode a table was last written in, with value_schema_latest's options."""
    return str(table.properties.get(MODE_OPTIONS_PROPERTY) or table_mode(table))


def committed_offsets(table: Table) -> dict[int, int]:
    """Partition -> the next offset to translate, as the table's current snapshot records it."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    found: dict[int, int] = {}
    for name, value in snapshot.summary.additional_properties.items():
        if name.startswith(OFFSET_PREFIX):
            found[int(name[len(OFFSET_PREFIX) :])] = int(value)
    return found


def offset_properties(offsets: dict[int, int]) -> dict[str, str]:
    return {f"{OFFSET_PREFIX}{partition}": str(offset) for partition, offset in sorted(offsets.items())}
