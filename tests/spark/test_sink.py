"""The strom sink: DataFrames produced into a topic and read back through the source."""

from __future__ import annotations

import pytest

from tests.spark.conftest import create_topic, strom_reader


def test_sink_round_trip(spark, broker, tmp_path):
    from pyspark.sql import functions as F

    create_topic(broker.bootstrap, "copy", 3)
    create_topic(broker.bootstrap, "routed", 2)
    rows = [(f"k{i}", f"value {i}", i % 3) for i in range(500)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    with_headers = df.withColumn(
        "headers", F.array(F.struct(F.lit("n").alias("key"), F.col("value").cast("binary").alias("value")))
    )
    (
        with_headers.write.format("strom")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "copy")
        .save()
    )

    back = strom_reader(spark, broker.bootstrap, subscribe="copy", includeHeaders="true").collect()
    assert sorted((r.key.decode(), r.value.decode(), r.partition) for r in back) == sorted(rows)
    assert all(r.headers[0].key == "n" and r.headers[0].value == r.value for r in back)

    # streaming: the topic column routes each row; binary values pass through unchanged
    source = strom_reader(spark, broker.bootstrap, streaming=True, subscribe="copy", startingOffsets="earliest")
    routed = source.select(
        F.when(F.col("partition") == 0, "routed").otherwise("copy-odd").alias("topic"), "key", "value"
    )
    create_topic(broker.bootstrap, "copy-odd", 1)
    query = (
        routed.writeStream.format("strom")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    to_routed = strom_reader(spark, broker.bootstrap, subscribe="routed").collect()
    to_odd = strom_reader(spark, broker.bootstrap, subscribe="copy-odd").count()
    assert sorted(r.key.decode() for r in to_routed) == sorted(k for k, _, p in rows if p == 0)
    assert to_odd == sum(1 for _, _, p in rows if p != 0)


def test_sink_rejects_missing_value_column_and_fails_on_delivery_error(spark, broker):
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(Exception, match="value"):
        df.write.format("strom").mode("append").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "x"
        ).save()
    # a partition that does not exist: the broker never acknowledges, so the task (and job) fails
    create_topic(broker.bootstrap, "small", 1)
    bad = spark.createDataFrame([("v", 7)], "value string, partition int")
    with pytest.raises(Exception, match="delivery failed|Unknown partition|UNKNOWN_PARTITION"):
        (
            bad.write.format("strom")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "small")
            .option("kafka.message.timeout.ms", "3000")
            .save()
        )
