"""read_topic through an Iceberg REST catalog: a broker on SASL_SSL commits the topic through the
https catalog it serves (iceberg.catalog.type=rest), and read_topic plans the table through the
same catalog, logged in as a SCRAM user (catalog_config), then reads the log's records past it:
every committed record once."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from strom.cluster.zookeeper_server import free_port
from strom.iceberg.table import CatalogSettings
from strom.spark import read_topic
from tests.broker_process import BrokerProcess
from tests.iceberg.support import WAIT_S, assert_exactly, create_topic, produce, transaction, wait_for_rows
from tests.iceberg.test_rest_catalog_topics import sasl_ssl_rest_broker
from tests.spark.test_read_topic import spark_rows, tail_read_by
from tests.tls_certs import make_certificates


def test_read_topic_plans_the_table_through_a_secured_rest_catalog(spark, tmp_path):
    certs = make_certificates(tmp_path / "certs")
    plain, secure, catalog_port = free_port(), free_port(), free_port()
    url = f"https://127.0.0.1:{catalog_port}"
    login = {"credential": "alice:alice-secret", "ssl.ca.location": str(certs.ca)}
    broker = BrokerProcess(tmp_path / "data", sasl_ssl_rest_broker(certs, plain, secure, url)).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S).values():
            future.result(WAIT_S)
        create_topic(broker.bootstrap, "history", 2)
        committed = produce(broker.bootstrap, "history", 300, "a")
        aborted = transaction(broker.bootstrap, "history", 20, "t", commit=False)
        catalog = CatalogSettings.for_rest(url, credential=login["credential"], ca_location=str(certs.ca))
        wait_for_rows(catalog, "history", len(committed))
        time.sleep(1.0)

        from_table = read_topic(spark, "history", catalog_uri=url, catalog_config=login)
        assert from_table.inputFiles() and all(f.endswith(".parquet") for f in from_table.inputFiles())
        assert_exactly(spark_rows(from_table), committed, aborted)

        # translation off: the newest records are only in the log, read past the table's offsets
        broker.stop()
        broker.overrides["iceberg.enabled"] = "false"
        broker.start()
        newer = produce(broker.bootstrap, "history", 100, "b")
        both = read_topic(spark, "history", catalog_uri=url, catalog_config=login, bootstrap_servers=broker.bootstrap)
        assert_exactly(spark_rows(both), committed | newer, aborted)
        assert tail_read_by(both) == "driver"
    finally:
        broker.stop()
