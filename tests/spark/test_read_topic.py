"""strom.spark.read_topic: a topic's history from its Iceberg table through Spark's own Parquet
reader (files planned by pyiceberg), and the records past the table's offsets from the log, every
committed record once."""

from __future__ import annotations

import time

from strom.spark import read_topic
from tests.broker_process import BrokerProcess
from tests.iceberg.support import assert_exactly, create_topic, produce, transaction, wait_for_rows
from tests.iceberg.test_translator import ICEBERG, catalog_of


def spark_rows(df) -> list[dict]:
    return [
        {
            "partition": row.partition,
            "offset": row.offset,
            "timestamp": round(row.timestamp.timestamp() * 1000),
            "headers": [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers or []],
            "key": None if row.key is None else bytes(row.key),
            "value": None if row.value is None else bytes(row.value),
        }
        for row in df.collect()
    ]


def test_read_topic_from_the_table_and_past_it_from_the_log(spark, tmp_path):
    data = tmp_path / "data"
    catalog = catalog_of(data)
    broker = BrokerProcess(data, ICEBERG).start()
    try:
        create_topic(broker.bootstrap, "history", 2)
        committed = produce(broker.bootstrap, "history", 400, "a")
        committed |= transaction(broker.bootstrap, "history", 20, "t1", commit=True)
        aborted = transaction(broker.bootstrap, "history", 20, "t2", commit=False)
        wait_for_rows(catalog, "history", len(committed))
        time.sleep(1.0)

        from_table = read_topic(spark, "history", catalog_uri=catalog.uri)
        assert from_table.inputFiles() and all(f.endswith(".parquet") for f in from_table.inputFiles())
        assert_exactly(spark_rows(from_table), committed, aborted)
        assert {row.topic for row in from_table.select("topic").distinct().collect()} == {"history"}

        # translation off: what is produced now is only in the log
        broker.stop()
        broker.overrides["iceberg.enabled"] = "false"
        broker.start()
        newer = produce(broker.bootstrap, "history", 150, "b")
        aborted |= transaction(broker.bootstrap, "history", 10, "t3", commit=False)
        newer |= transaction(broker.bootstrap, "history", 10, "t4", commit=True)
        both = read_topic(spark, "history", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
        assert_exactly(spark_rows(both), committed | newer, aborted)
        assert from_table.count() == len(committed)  # the table did not move: the newest came from the log
    finally:
        broker.stop()
