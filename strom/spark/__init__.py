"""strom for Apache Spark: a ``strom`` data source (reader and writer) for pyspark >= 4.2.

    from strom.spark import register
    register(spark)                                    # spark.dataSource.register(...)
    df = (spark.readStream.format("strom")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

The data source is a Python data source: its reads and writes run in Python workers, so every
executor's Python (``PYSPARK_PYTHON``) must be an interpreter with strom installed. Spark's
built-in Kafka source is not used because it needs JVM jars. Options, columns and offsets
follow Spark's Kafka source; see ``strom.spark.source`` and ``strom.spark.sink``.
"""

from __future__ import annotations

import os
import sys


def python_env() -> dict[str, str]:
    """Environment for a Spark launched from this interpreter: workers run this Python too."""
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def use_this_python() -> None:
    """Make Spark's Python workers this interpreter (call before the SparkSession is created)."""
    for key, value in python_env().items():
        os.environ.setdefault(key, value)


def register(spark) -> None:
    """Register the ``strom`` format with ``spark`` (idempotent)."""
    from strom.spark.source import StromDataSource

    spark.dataSource.register(StromDataSource)


def read_topic(spark, topic: str, **kwargs):
    """A topic's history from its Iceberg table, its newest records from the log (strom.spark.iceberg)."""
    from strom.spark.iceberg import read_topic as read

    return read(spark, topic, **kwargs)


__all__ = ["register", "use_this_python", "python_env", "read_topic"]
