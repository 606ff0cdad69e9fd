"""HTTPS on a 3-broker cluster: a registration sent to a broker that is not the writer is forwarded
over TLS, the forwarding broker checking the writer's certificate against its truststore."""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.integration.test_schema_registry import USER_V1, USER_V2, registry_url
from tests.integration.test_schema_registry_tls import tls_overrides
from tests.tls_certs import make_certificates


def test_a_registration_is_forwarded_over_tls(cluster_factory, tmp_path):
    certs = make_certificates(tmp_path / "certs")
    cluster = cluster_factory(overrides=tls_overrides(certs))
    urls = {broker_id: registry_url(process) for broker_id, process in cluster.brokers.items()}
    assert all(url.startswith("https://") for url in urls.values())

    def client(broker_id: int) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": urls[broker_id], "ssl.ca.location": str(certs.ca)})

    first = client(0).register_schema("tls-value", Schema(json.dumps(USER_V1), "AVRO"))
    writer = cluster.leader("_schemas", 0)
    other = next(broker_id for broker_id in urls if broker_id != writer)
    second = client(other).register_schema("tls-value", Schema(json.dumps(USER_V2), "AVRO"))
    assert second != first
    assert client(writer).get_versions("tls-value") == [1, 2]
