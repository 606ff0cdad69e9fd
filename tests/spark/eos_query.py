"""The streaming query of the exactly-once test, in its own process so that the test can kill -9 it.

    python tests/spark/eos_query.py BOOTSTRAP INPUT OUTPUT CHECKPOINT [--max-offsets N]

Reads INPUT read_committed through the strom source (the Fetch path) and writes key and value
to OUTPUT with ``deliveryGuarantee=exactly-once``. Runs until killed; every start resumes from
CHECKPOINT.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("checkpoint")
    parser.add_argument("--max-offsets", type=int, default=200)
    args = parser.parse_args()

    from strom.spark import register, use_this_python

    use_this_python()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    print(f"{time.time():.2f} starting Spark", flush=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("strom-eos-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        # the test starts this driver six times: the JVM's quick compiler alone starts faster
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    source = (
        spark.readStream.format("strom")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("key", "value")
    )
    query = (
        source.writeStream.format("strom")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("deliveryGuarantee", "exactly-once")
        # one record per request, one request at a time: a task's transaction stays open
        # for a round trip per record, long enough for the test to kill the query inside it
        .option("kafka.batch.num.messages", "1")
        .option("kafka.max.in.flight.requests.per.connection", "1")
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    print(f"{time.time():.2f} query {query.id} started", flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
