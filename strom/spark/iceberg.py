"""``read_topic``: a topic's history from its Iceberg table at Parquet speed, its newest records from the log.

    from strom.spark import read_topic
    df = read_topic(spark, "orders", catalog_uri="sqlite:////data/iceberg-catalog.db",
                    bootstrap_servers="127.0.0.1:9092")

pyiceberg plans the table's current snapshot (its data file list and the offsets it covers,
from the snapshot summary) and Spark's own Parquet reader scans the files: no Iceberg jar and no
row through a Python worker. With ``bootstrap_servers``, the records past the snapshot's offsets
up to the latest committed offsets at the call (read_committed) are unioned, so every committed
record appears once. The columns are those of the ``strom`` source with headers.

The tail is planned once, here: a Spark job of the ``strom`` source costs half a second to a
second before its first record (its planning runs in a Python worker, its tasks start more), which
at a small tail is most of what read_topic adds to the table's scan. So no tail (the table covers
the latest offsets) adds nothing, a short one is read on the driver with the source's own reader
(``kafka_io.read_range``) and handed to Spark as Arrow, and only a long one runs the source.

A topic in a schema mode (``value_schema_id_prefix``, ``value_schema_latest``) has typed columns:
``value`` is then a struct of the table's value columns (the column itself for a value that is not
a record), as the ``strom`` source's ``value.format=avro`` gives it. The records from the log are
decoded the same way the brokers translate them (strom.iceberg.schema_modes, in Python workers
through ``mapInArrow``) with the schemas read from the Schema Registry on the driver
(``schema_registry_url``); a record the brokers would put in the dead-letter table is left out,
as it is not in the table either.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from strom.iceberg.schema_modes import MODES as SCHEMA_MODES
from strom.iceberg.schema_modes import value_names
from strom.iceberg.table import (
    CatalogSettings,
    committed_offsets,
    identifier,
    open_catalog,
    table_mode_options,
    table_topic_id,
)
from strom.storage.iceberg_mode import parse_mode


def planned_files(
    catalog_uri: str, topic: str, warehouse: str = "file:///tmp", catalog_config: dict[str, str] | None = None
) -> tuple[list[str], dict[int, int]]:
    """The data files of the table's current snapshot and the offsets that snapshot covers."""
    files, offsets, _, _, _ = _plan(catalog_uri, topic, warehouse, catalog_config)
    return files, offsets


# Catalogs opened by this process, by (uri, warehouse, REST login): opening one builds a SQLAlchemy
# engine and checks the catalog's tables (or asks a REST catalog's config and a token), which cost
# more than planning a small table; the table itself is loaded anew at every call, so a cached
# catalog never serves an old snapshot.
_catalogs: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}
_catalogs_lock = threading.Lock()
REST_CATALOG_CONFIG = ("credential", "token", "warehouse", "ssl.ca.location")


def _settings(catalog_uri: str, warehouse: str, config: dict[str, str]) -> CatalogSettings:
    """A SQLAlchemy URL is a SQL catalog; an http(s) URL a REST catalog, logged in with ``config``."""
    unknown = sorted(set(config) - set(REST_CATALOG_CONFIG))
    if unknown:
        raise ValueError(f"catalog_config takes {', '.join(REST_CATALOG_CONFIG)}, not {', '.join(unknown)}")
    if not catalog_uri.startswith(("http://", "https://")):
        if config:
            raise ValueError("catalog_config is a REST catalog's: catalog_uri is a SQL catalog's URL")
        return CatalogSettings(catalog_uri, warehouse)
    return CatalogSettings.for_rest(
        catalog_uri,
        credential=config.get("credential"),
        token=config.get("token"),
        warehouse=config.get("warehouse"),
        ca_location=config.get("ssl.ca.location"),
    )


def _catalog(catalog_uri: str, warehouse: str, config: dict[str, str] | None = None) -> Any:
    key = (catalog_uri, warehouse, tuple(sorted((config or {}).items())))
    with _catalogs_lock:
        found = _catalogs.get(key)
        if found is None:
            found = _catalogs[key] = open_catalog(_settings(catalog_uri, warehouse, config or {}))
        return found


def _plan(
    catalog_uri: str, topic: str, warehouse: str = "file:///tmp", catalog_config: dict[str, str] | None = None
) -> tuple[list[str], dict[int, int], Any, str, str | None]:
    """(data files, offsets, the table's Arrow schema, its mode with value_schema_latest's options,
    the id of the topic it was made for) of the current snapshot."""
    table = _catalog(catalog_uri, warehouse, catalog_config).load_table(identifier(topic))
    snapshot = table.current_snapshot()
    arrow_schema = table.schema().as_arrow()
    mode = table_mode_options(table)
    if snapshot is None:
        return [], {}, arrow_schema, mode, table_topic_id(table)
    files = [task.file.file_path for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()]
    return files, committed_offsets(table), arrow_schema, mode, table_topic_id(table)


def _value_column(arrow_schema: Any):
    """The ``value`` column of a schema-mode table's rows: a struct of its value columns (the
    column itself for a single column ``value``, a value that is not a record)."""
    from pyspark.sql import functions as F

    names = value_names(arrow_schema)
    if names == ["value"]:
        return F.col("value")
    return F.struct(*[F.col(f"`{name}`") for name in names]).alias("value")


def _from_table(spark, topic: str, files: list[str], arrow_schema: Any, mode: str = "key_value"):
    from pyspark.sql import functions as F

    from strom.spark.schema import kafka_schema

    if not files:
        if mode in SCHEMA_MODES:
            raise ValueError(f"the table of {topic} has no data files yet: nothing tells the value's Spark type")
        return spark.createDataFrame([], kafka_schema(include_headers=True))
    from pyspark.sql.pandas.types import from_arrow_schema

    # the table's current schema, not one file's: files written before the schema evolved lack
    # its newer columns (read as nulls) and hold narrower types (widened by the reader); and,
    # given the schema, Spark reads no file footer on the driver to infer one
    df = spark.read.schema(from_arrow_schema(arrow_schema)).parquet(*files)
    value = _value_column(arrow_schema) if mode in SCHEMA_MODES else F.col("value")
    return df.select(
        F.col("key"),
        value,
        F.lit(topic).alias("topic"),
        F.col("kafka.partition").alias("partition"),
        F.col("kafka.offset").alias("offset"),
        F.col("kafka.timestamp").alias("timestamp"),
        F.col("kafka.timestamp_type").alias("timestampType"),
        F.col("kafka.headers").alias("headers"),
    )


# Tails of at most this many records in all are read on the driver (strom's Fetch reader, or its
# consumer for SSL/SASL) and handed to Spark as Arrow: a Spark job of the strom source costs about
# half a second before its first record (Python data source planning and workers). Measured here
# (2 shared cores, 100-byte records, 4 partitions, a table of 190k-200k records, query times):
# a 10k tail read on the driver 0.24-0.39 s against 0.55-0.68 s through the source; a 100k tail
# 0.66-0.78 s against 0.55-0.56 s (the driver's read is ~1 us a record, but Spark then ships the
# LocalRelation's rows with its tasks). They cross at roughly 60k; this stays below.
LOCAL_TAIL_RECORDS = 50_000
# ... and while their Arrow columns stay below this many bytes (the count alone does not bound the
# driver's memory: records may be large); past it the driver's read is dropped and the tail goes
# to the source's tasks.
LOCAL_TAIL_BYTES = 64 * 1024 * 1024


def _source_options(bootstrap_servers: str, options: dict[str, str] | None) -> dict[str, str]:
    """The ``strom`` source options of the tail read: read_committed, with headers, the user's
    ``kafka.*`` settings (a SASL_SSL listener's, say) on top."""
    return {
        "kafka.bootstrap.servers": bootstrap_servers,
        "includeHeaders": "true",
        "kafka.isolation.level": "read_committed",
        **(options or {}),
    }


def _tail_ranges(opts: Any, topic: str, offsets: dict[int, int], made_for: str | None = None) -> list[Any]:
    """The offset ranges past the table, per partition: from the table's next offset (the log's
    earliest for a partition the table has not seen) to the latest committed offset now (the
    last stable offset: the tail is read read_committed). One ListOffsets round, through the
    admin client the strom source keeps for the process. A table ``made_for`` another topic id
    than the live topic's is an earlier topic's of the same name: refused, never mixed in."""
    from strom.spark.kafka_io import Admin
    from strom.spark.options import EARLIEST, LATEST, OffsetRange

    admin = Admin(opts)
    tps = admin.subscribed()
    if not tps:
        raise ValueError(f"topic {topic} does not exist on {opts.bootstrap_servers}")
    live = admin.topic_id(topic) if made_for else None
    if live is not None and live != made_for:
        raise ValueError(
            f"the table of {topic} holds the records of an earlier topic of that name (topic id {made_for}; "
            f"the topic's is {live}): it was deleted and made again, and the brokers' next translation round "
            "sets that table aside"
        )
    latest = admin.offsets(tps, LATEST)
    unseen = [tp for tp in tps if tp[1] not in offsets]
    earliest = admin.offsets(unseen, EARLIEST) if unseen else {}
    ranges = []
    for tp in tps:
        start = offsets[tp[1]] if tp[1] in offsets else earliest[tp]
        if start > latest[tp]:
            raise ValueError(
                f"the table of {topic} holds partition {tp[1]} up to offset {start}, past the log's latest "
                f"committed offset {latest[tp]} (was the topic deleted and made again?)"
            )
        if start < latest[tp]:
            ranges.append(OffsetRange(topic, tp[1], start, latest[tp]))
    return ranges


def _tail_on_driver(opts: Any, ranges: list[Any]) -> Any:
    """The records of ``ranges`` as one Arrow table of the ``strom`` source's columns (with headers),
    read here with the reader the source's tasks use (``kafka_io.read_range``: the same
    read_committed filtering, the same data-loss checks); None once they pass LOCAL_TAIL_BYTES."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from strom.spark.kafka_io import read_range
    from strom.spark.schema import kafka_schema

    arrow_schema = to_arrow_schema(kafka_schema(include_headers=True), timezone="UTC")
    batches, size = [], 0
    for r in ranges:
        for batch in read_range(opts, r, arrow_schema):
            size += batch.nbytes
            if size > LOCAL_TAIL_BYTES:
                return None
            batches.append(batch)
    return pa.Table.from_batches(batches, schema=arrow_schema)


def read_topic(
    spark,
    topic: str,
    *,
    catalog_uri: str,
    catalog_config: dict[str, str] | None = None,
    bootstrap_servers: str | None = None,
    options: dict[str, str] | None = None,
    schema_registry_url: str | None = None,
    schema_registry_config: dict[str, str] | None = None,
    local_tail_records: int = LOCAL_TAIL_RECORDS,
):
    """The topic's committed records as one DataFrame: the table's, plus (with ``bootstrap_servers``)
    the log's past the table's offsets. ``catalog_uri``: the SQL catalog's SQLAlchemy URL, or an
    Iceberg REST catalog's http(s) URL (such as a broker's iceberg.rest.catalog.listeners), with
    ``catalog_config`` its login: ``credential`` (OAuth2 client credentials id:secret), ``token``,
    ``warehouse``, ``ssl.ca.location``. ``options`` go to the ``strom`` source (``kafka.*`` client
    settings); ``schema_registry_url`` decodes the log's records of a schema-mode topic, with
    ``schema_registry_config`` any other setting of confluent-kafka's SchemaRegistryClient
    (``basic.auth.user.info``, ``ssl.ca.location``...).

    The tail past the table is planned here, once: when the table already covers the latest
    committed offsets, the DataFrame is the table's alone; a tail of at most ``local_tail_records``
    records (and LOCAL_TAIL_BYTES of columns) is read on the driver and added as Arrow (no Python
    data source job); a longer one is read by the ``strom`` source's tasks, up to the offsets
    planned here."""
    files, offsets, arrow_schema, mode_options, made_for = _plan(catalog_uri, topic, catalog_config=catalog_config)
    latest = parse_mode(mode_options)  # the subject and message value_schema_latest may name
    mode = latest.name
    df = _from_table(spark, topic, files, arrow_schema, mode)
    if bootstrap_servers is None:
        return df
    is_typed = mode in SCHEMA_MODES
    if is_typed and schema_registry_url is None:
        raise ValueError(
            f"{topic} is in a schema mode: read_topic needs schema_registry_url to decode its newest records"
        )
    from strom.spark.options import SourceOptions

    source_options = _source_options(bootstrap_servers, options)
    opts = SourceOptions.parse({**source_options, "subscribe": topic}, streaming=False)
    ranges = _tail_ranges(opts, topic, offsets, made_for)
    if not ranges:
        return df
    schemas = None
    if is_typed:
        assert schema_registry_url is not None
        schemas = _registry_schemas(schema_registry_url, topic, schema_registry_config, latest.subject)
    tail = _tail_on_driver(opts, ranges) if sum(r.end - r.start for r in ranges) <= local_tail_records else None
    if tail is not None:
        if is_typed:
            import pyarrow as pa

            typed = _arrow_schema_of(spark, df.schema)
            tail = pa.Table.from_batches(
                list(_decode_batches(tail.to_batches(), typed, arrow_schema, mode_options, schemas)), schema=typed
            )
        if tail.num_rows == 0:  # only aborted records and markers past the table
            return df
        return df.unionByName(spark.createDataFrame(tail, schema=df.schema if is_typed else None))
    from strom.spark import register

    register(spark)
    reader = spark.read.format("strom")
    for key, value in source_options.items():
        reader = reader.option(key, value)
    reader = reader.option("assign", json.dumps({topic: [r.partition for r in ranges]}))
    reader = reader.option("startingOffsets", json.dumps({topic: {str(r.partition): r.start for r in ranges}}))
    reader = reader.option("endingOffsets", json.dumps({topic: {str(r.partition): r.end for r in ranges}}))
    live = reader.load()
    if is_typed:
        live = _decoded(live, df.schema, arrow_schema, mode_options, schemas)
    return df.unionByName(live)


def _registry_schemas(url: str, topic: str, config: dict[str, str] | None = None, subject: str = ""):
    """Every schema of the registry by id, and the latest of ``subject`` (``<topic>-value`` by
    default), read on the driver (confluent-kafka's client): what the brokers' translation is given
    (a SchemaSet)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from strom.iceberg.schema_modes import RegisteredSchema, SchemaSet

    client = SchemaRegistryClient({**(config or {}), "url": url})
    by_id: dict[int, RegisteredSchema] = {}
    latest = None
    subject_name = subject or f"{topic}-value"
    for subject in client.get_subjects():
        for version in client.get_versions(subject):
            registered = client.get_version(subject, version)
            schema = registered.schema
            if registered.schema_id is None or schema is None:
                continue
            if registered.schema_id in by_id:
                continue
            referenced = tuple(_text(client, r.subject, r.version) for r in schema.references or [])
            descriptors: tuple[bytes, ...] = ()
            if schema.schema_type == "PROTOBUF":
                from strom.spark.protobuf_types import ProtobufTypeError
                from strom.spark.protobuf_types import registered as protobuf_schema

                try:
                    descriptors = protobuf_schema(client, schema).files
                except ProtobufTypeError:
                    pass  # no descriptors: its records are dead letters, as the brokers found
            by_id[registered.schema_id] = RegisteredSchema(
                schema.schema_type or "AVRO", schema.schema_str or "", referenced, descriptors
            )
    try:
        latest = client.get_latest_version(subject_name).schema_id
    except SchemaRegistryError:
        latest = None
    return SchemaSet(by_id, latest, subject_name, settled=True)


def _text(client, subject: str | None, version: int | None) -> str:
    found = client.get_version(subject or "", version if version is not None else "latest").schema
    return (found.schema_str if found is not None else None) or ""


def _arrow_schema_of(spark, spark_schema) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    zone = spark.conf.get("spark.sql.session.timeZone") or "UTC"
    return to_arrow_schema(spark_schema, timezone=zone)


def _decoded(live, spark_schema, table_arrow: Any, mode: str, schemas):
    """The log's records with ``value`` decoded as the table's columns (mapInArrow in Python workers)."""
    out_schema = _arrow_schema_of(live.sparkSession, spark_schema)

    def decode(batches):
        return _decode_batches(batches, out_schema, table_arrow, mode, schemas)

    return live.mapInArrow(decode, spark_schema)


def _decode_batches(batches, out_schema: Any, table_arrow: Any, mode: str, schemas):
    """Batches of the ``strom`` source's columns with ``value`` decoded as the table's columns
    (``out_schema``), each record as the brokers translate it; dead letters are left out, as they
    are not in the table either. Run in Python workers (a long tail) or on the driver (a short one)."""
    import pyarrow as pa

    from strom.iceberg.schema_modes import Decoded, Decoder, value_arrays

    value_type = out_schema.field("value").type
    names = value_names(table_arrow)
    single = names == ["value"]
    decoder = Decoder(mode, schemas)
    for batch in batches:
        values = batch.column("value").to_pylist()
        keep, decoded = [], []
        for index, value in enumerate(values):
            verdict = decoder.decode(value)
            if isinstance(verdict, Decoded):  # the others are dead letters: not in the table either
                keep.append(index)
                decoded.append(verdict.value)
        rows = batch.take(pa.array(keep, pa.int64()))
        try:
            arrays = value_arrays(table_arrow, decoded)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                "records in the log past the table's snapshot do not fit the table's columns (written with "
                f"a schema version the table has not evolved to yet; its next translation round will): {exc}"
            ) from None
        if single:
            column = arrays[0].cast(value_type)
        else:
            column = pa.StructArray.from_arrays(arrays, names=names).cast(value_type)
        columns = [column if name == "value" else rows.column(name) for name in out_schema.names]
        yield pa.RecordBatch.from_arrays(columns, schema=out_schema)
