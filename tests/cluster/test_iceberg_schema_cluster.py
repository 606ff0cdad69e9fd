"""An Iceberg topic in value_schema_id_prefix mode on a 3-broker cluster (RF=3) sharing one SQL
catalog, fed by confluent-kafka's AvroSerializer with two schema versions and some bad records,
idempotently and in committed and aborted transactions: after the leader of a partition is killed
with kill -9 mid-way and restarted, the table holds each good committed record once with its typed
columns, ``<topic>~dlq`` each bad committed one once with its reason, and neither an aborted one."""

from __future__ import annotations

import time

from strom.iceberg.table import identifier
from tests.cluster.conftest import create_topic, wait_until
from tests.iceberg.avro_support import AvroProducer, assert_exactly_once, registry_url, scan, wait_for_tables


def test_a_new_leader_continues_both_tables_without_gap_or_duplicate(iceberg_cluster):
    cluster, catalog = iceberg_cluster(registry=True)
    create_topic(cluster, "typed", partitions=3, configs={"iceberg.mode": "value_schema_id_prefix"})
    victim = cluster.leader("typed", 0)
    survivor = next(b for b in cluster.brokers if b != victim)
    producer = AvroProducer(cluster.bootstrap, registry_url(cluster.brokers[survivor].data_dir), "typed", acks="all")
    producer.orders(300, version=1)
    producer.orders(100, version=2, start=300)  # both versions registered before the kill
    producer.flush()
    v1 = producer.client.get_version("typed-value", 1).schema_id
    producer.bad_records(v1)
    producer.flush()
    producer.transaction(True, 30, 2, 1000, v1)  # committed: its good and bad records count
    producer.transaction(False, 30, 1, 2000, v1)  # aborted: in neither table
    # the first leader has committed part of typed-0, so its successor must resume mid-partition
    wait_until(
        lambda: any(r["kafka"]["partition"] == 0 for r in scan(catalog, identifier("typed"))), 30, "rows of typed-0"
    )
    cluster.kill(victim)
    wait_until(lambda: cluster.leader("typed", 0) not in (-1, victim), 30, "a new leader of typed-0")
    producer.orders(200, version=2, start=400)
    producer.bad_records(v1)
    producer.flush()
    producer.transaction(False, 20, 2, 3000, v1)
    producer.transaction(True, 20, 1, 4000, v1)
    cluster.restart(victim)
    producer.orders(100, version=1, start=600)
    producer.flush()
    wait_for_tables(catalog, "typed", len(producer.good), len(producer.bad), timeout_s=90)
    time.sleep(1.5)  # a few more rounds on every leader: nothing more may arrive
    rows, dead = wait_for_tables(catalog, "typed", 0, 0)
    assert_exactly_once(rows, dead, producer)
    assert {r["kafka"]["partition"] for r in rows} == {0, 1, 2} and len(producer.aborted) == 2 * 4 + 50
