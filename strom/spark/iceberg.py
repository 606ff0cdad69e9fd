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
"""

from __future__ import annotations

import json

from strom.iceberg.table import CatalogSettings, committed_offsets, identifier, open_catalog


def planned_files(catalog_uri: str, topic: str, warehouse: str = "file:///tmp") -> tuple[list[str], dict[int, int]]:
    """The data files of the table's current snapshot and the offsets that snapshot covers."""
    table = open_catalog(CatalogSettings(catalog_uri, warehouse)).load_table(identifier(topic))
    snapshot = table.current_snapshot()
    if snapshot is None:
        return [], {}
    files = [task.file.file_path for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()]
    return files, committed_offsets(table)


def _from_table(spark, topic: str, files: list[str]):
    from pyspark.sql import functions as F

    from strom.spark.schema import kafka_schema

    if not files:
        return spark.createDataFrame([], kafka_schema(include_headers=True))
    df = spark.read.parquet(*files)
    return df.select(
        F.col("key"),
        F.col("value"),
        F.lit(topic).alias("topic"),
        F.col("kafka.partition").alias("partition"),
        F.col("kafka.offset").alias("offset"),
        F.col("kafka.timestamp").alias("timestamp"),
        F.col("kafka.timestamp_type").alias("timestampType"),
        F.col("kafka.headers").alias("headers"),
    )


def _partitions(bootstrap_servers: str, topic: str) -> list[int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(topic, timeout=30)
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
):
    """The topic's committed records as one DataFrame: the table's, plus (with ``bootstrap_servers``)
    the log's past the table's offsets. ``options`` go to the ``strom`` source (``kafka.*`` client settings)."""
    files, offsets = planned_files(catalog_uri, topic)
    df = _from_table(spark, topic, files)
    if bootstrap_servers is None:
        return df
    from strom.spark import register

    register(spark)
    starting = {str(p): offsets.get(p, -2) for p in _partitions(bootstrap_servers, topic)}
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
    return df.unionByName(reader.load())
