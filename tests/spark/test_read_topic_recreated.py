"""read_topic of a topic deleted and made again while its brokers had not translated yet: the
table still holds the earlier topic's records, and read_topic refuses it (the table's topic id is
not the live topic's) rather than mix the two topics' records; once a round has set that table
aside, read_topic returns the new topic's records, every one once."""

from __future__ import annotations

import time

import pytest

from strom.spark import read_topic
from tests.iceberg.support import assert_exactly, create_topic, produce, wait_for_rows
from tests.iceberg.test_recreated_topic import recreate
from tests.iceberg.test_translator import ICEBERG
from tests.spark.conftest import translation_off
from tests.spark.test_read_topic import spark_rows


def test_read_topic_never_mixes_an_earlier_topics_table_with_the_new_topics_log(spark, iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "orders", 1)
    old = produce(broker.bootstrap, "orders", 30, "old")
    wait_for_rows(catalog, "orders", len(old))
    translation_off(broker)  # the table stays as it is: the earlier topic's
    recreate(broker.bootstrap, "orders", 1)
    new = produce(broker.bootstrap, "orders", 45, "new")  # more than the old table's offsets
    with pytest.raises(ValueError, match="holds the records of an earlier topic of that name"):
        read_topic(spark, "orders", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
    broker.stop()
    broker.overrides["iceberg.enabled"] = "true"
    broker.start()
    wait_for_rows(catalog, "orders", len(new))
    time.sleep(1.0)
    df = read_topic(spark, "orders", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
    assert_exactly(spark_rows(df), new, {})
