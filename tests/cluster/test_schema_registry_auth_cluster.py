"""HTTP Basic on a 3-broker cluster with SASL/SCRAM: a registration sent to a broker that is not the
registry's writer is forwarded with the user's credentials, which the writer checks again."""

from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.cluster.conftest import Cluster, wait_until
from tests.integration.clients import WAIT_S
from tests.integration.test_schema_registry import USER_V1, USER_V2, registry_url
from tests.integration.test_schema_registry_auth import as_user, request


def test_a_forwarded_registration_carries_the_users_credentials(tmp_path, zookeeper):
    cluster = Cluster(
        tmp_path / "cluster",
        zookeeper,
        3,
        {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "schema.registry.listeners": "http://127.0.0.1:0"},
        0,
    )
    for process in cluster.brokers.values():  # a SASL listener beside each broker's PLAINTEXT one
        process.overrides["listeners"] += ",SASL_PLAINTEXT://127.0.0.1:0"
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S).values():
            future.result(timeout=WAIT_S)
        urls = {broker_id: registry_url(process) for broker_id, process in cluster.brokers.items()}

        def client(broker_id: int) -> SchemaRegistryClient:
            return SchemaRegistryClient({"url": urls[broker_id], "basic.auth.user.info": "alice:alice-secret"})

        # every broker learns alice's credential from ZooKeeper; then the first write makes _schemas
        wait_until(
            lambda: all(
                request(url, "GET", "/subjects", as_user("alice", "alice-secret"))[0] == 200 for url in urls.values()
            ),
            20,
            "every broker to know alice",
        )
        first = client(0).register_schema("auth-value", Schema(json.dumps(USER_V1), "AVRO"))
        writer = cluster.leader("_schemas", 0)
        other = next(broker_id for broker_id in urls if broker_id != writer)
        second = client(other).register_schema("auth-value", Schema(json.dumps(USER_V2), "AVRO"))
        assert second != first
        assert [v for v in client(writer).get_versions("auth-value")] == [1, 2]
        status, _, body = request(
            urls[other], "POST", "/subjects/x-value/versions", as_user("alice", "bad"), {"schema": '"string"'}
        )
        assert (status, body["error_code"]) == (401, 40101)
    finally:
        cluster.close()
