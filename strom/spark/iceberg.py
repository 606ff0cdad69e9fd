"""``read_topic``: a topic's history from its Iceberg table at Parquet speed, its newest records from the log.

    from strom.spark import read_topic
    df = read_topic(spark, "orders", catalog_uri="sqlite:////data/iceberg-catalog.db",
                    bootstrap_servers="127.0.0.1:9092")

pyiceberg plans the table's current snapshot (its data file list and the offsets it covers,
from the snapshot summary) and Spark's own Parquet reader scans the files: no Iceberg jar and no
row through a Python worker. With ``bootstrap_servers``, the records past the snapshot's offsets
up to the latest committed offsets at the call are read through the ``strom`` source
(read_committed) and unioned, so every committed record appears once. The columns are those of
the ``strom`` source with headers.

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
from typing import Any

from strom.iceberg.schema_modes import MODES as SCHEMA_MODES
from strom.iceberg.schema_modes import value_names
from strom.iceberg.table import CatalogSettings, committed_offsets, identifier, open_catalog, table_mode


def planned_files(catalog_uri: str, topic: str, warehouse: str = "file:///tmp") -> tuple[list[str], dict[int, int]]:
    """The data files of the table's current snapshot and the offsets that snapshot covers."""
    files, offsets, _, _ = _plan(catalog_uri, topic, warehouse)
    return files, offsets


def _plan(catalog_uri: str, topic: str, warehouse: str = "file:///tmp") -> tuple[list[str], dict[int, int], Any, str]:
    """(data files, offsets, the table's Arrow schema, its mode) of the current snapshot."""
    table = open_catalog(CatalogSettings(catalog_uri, warehouse)).load_table(identifier(topic))
    snapshot = table.current_snapshot()
    arrow_schema = table.schema().as_arrow()
    mode = table_mode(table)
    if snapshot is None:
        return [], {}, arrow_schema, mode
    files = [task.file.file_path for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()]
    return files, committed_offsets(table), arrow_schema, mode


def _value_column(arrow_schema: Any):
    """The ``value`` column of a schema-mode table's rows: a struct of its value columns (the
    column itself for a single column ``value``, a value that is not a record)."""
    from pyspark.sql import functions as F

    names = value_names(arrow_schema)
    if names == ["value"]:
        return F.col("value")
    return F.struct(*[F.col(f"`{name}`") for name in names]).alias("value")


def _from_table(spark, topic: str, files: list[str], arrow_schema: Any = None, mode: str = "key_value"):
    from pyspark.sql import functions as F

    from strom.spark.schema import kafka_schema

    if not files:
        if mode in SCHEMA_MODES:
            raise ValueError(f"the table of {topic} has no data files yet: nothing tells the value's Spark type")
        return spark.createDataFrame([], kafka_schema(include_headers=True))
    if mode in SCHEMA_MODES:
        from pyspark.sql.pandas.types import from_arrow_schema

        # the table's current schema, not one file's: files written before the schema evolved lack
        # its newer columns (read as nulls) and hold narrower types (widened by the reader)
        df = spark.read.schema(from_arrow_schema(arrow_schema)).parquet(*files)
    else:
        df = spark.read.parquet(*files)
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


def _partitions(bootstrap_servers: str, topic: str, options: dict[str, str] | None = None) -> list[int]:
    """The topic's partitions, asked with the connection and security settings of the ``kafka.*``
    options (a SASL_SSL listener's, say), as the strom source's own clients take them."""
    from confluent_kafka.admin import AdminClient

    from strom.spark.options import client_config_from_options, connection_config

    config = connection_config(client_config_from_options(options or {}))
    metadata = AdminClient({**config, "bootstrap.servers": bootstrap_servers}).list_topics(topic, timeout=30)
    found = metadata.topics[topic]
    if found.error is not None:
        raise ValueError(f"topic {topic}: {found.error}")
    return sorted(found.partitions)


def read_topic(
    spark,
    topic: str,
    *,
    catalog_uri: str,
    bootstrap_servers: str | None = None,
    options: dict[str, str] | None = None,
    schema_registry_url: str | None = None,
    schema_registry_config: dict[str, str] | None = None,
):
    """The topic's committed records as one DataFrame: the table's, plus (with ``bootstrap_servers``)
    the log's past the table's offsets. ``options`` go to the ``strom`` source (``kafka.*`` client
    settings); ``schema_registry_url`` decodes the log's records of a schema-mode topic, with
    ``schema_registry_config`` any other setting of confluent-kafka's SchemaRegistryClient
    (``basic.auth.user.info``, ``ssl.ca.location``...)."""
    files, offsets, arrow_schema, mode = _plan(catalog_uri, topic)
    df = _from_table(spark, topic, files, arrow_schema, mode)
    if bootstrap_servers is None:
        return df
    is_typed = mode in SCHEMA_MODES
    if is_typed and schema_registry_url is None:
        raise ValueError(
            f"{topic} is in a schema mode: read_topic needs schema_registry_url to decode its newest records"
        )
    from strom.spark import register

    register(spark)
    starting = {str(p): offsets.get(p, -2) for p in _partitions(bootstrap_servers, topic, options)}
    reader = (
        spark.read.format("strom")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("assign", json.dumps({topic: [int(p) for p in starting]}))
        .option("startingOffsets", json.dumps({topic: starting}))
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    live = reader.load()
    if is_typed:
        assert schema_registry_url is not None
        live = _decoded(
            live, df.schema, arrow_schema, mode, _registry_schemas(schema_registry_url, topic, schema_registry_config)
        )
    return df.unionByName(live)


def _registry_schemas(url: str, topic: str, config: dict[str, str] | None = None):
    """Every schema of the registry by id, and the latest of ``<topic>-value``, read on the driver
    (confluent-kafka's client): what the brokers' translation is given (a SchemaSet)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from strom.iceberg.schema_modes import RegisteredSchema, SchemaSet

    client = SchemaRegistryClient({**(config or {}), "url": url})
    by_id: dict[int, RegisteredSchema] = {}
    latest = None
    subject_name = f"{topic}-value"
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


def _decoded(live, spark_schema, table_arrow: Any, mode: str, schemas):
    """The log's records with ``value`` decoded as the table's columns (mapInArrow in Python workers)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    zone = live.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    out_schema = to_arrow_schema(spark_schema, timezone=zone)
    value_type = out_schema.field("value").type
    single = value_names(table_arrow) == ["value"]

    def decode(batches):
        from strom.iceberg.schema_modes import Decoded, Decoder, value_arrays

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
            names = value_names(table_arrow)
            if single:
                column = arrays[0].cast(value_type)
            else:
                column = pa.StructArray.from_arrays(arrays, names=names).cast(value_type)
            columns = [column if name == "value" else rows.column(name) for name in out_schema.names]
            yield pa.RecordBatch.from_arrays(columns, schema=out_schema)

    return live.mapInArrow(decode, spark_schema)
