"""IMPORT mode on a 3-broker cluster: imported ids and versions are written once by the writer
(through any broker), read by every broker, and survive the writer's kill -9 and restart; the
ids the registry hands out afterwards stay above every imported one."""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.cluster.conftest import wait_until
from tests.integration.test_schema_registry import call, registry_url


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "string"}]})


def test_imported_ids_survive_the_writers_kill_and_restart(cluster_factory):
    cluster = cluster_factory(overrides={"schema.registry.listeners": "http://127.0.0.1:0"})
    urls = {broker_id: registry_url(process) for broker_id, process in cluster.brokers.items()}
    status, _, body = call(urls[1], "PUT", "/mode", {"mode": "IMPORT"}, timeout_s=30)
    assert (status, body) == (200, {"mode": "IMPORT"})
    imported = {"Alpha": (900, 1), "Beta": (12, 4), "Gamma": (5000, 2), "Delta": (0, 1)}  # 0 is an id too
    for index, (name, (schema_id, version)) in enumerate(imported.items()):
        through = urls[index % 3]  # two of three are forwarded to the writer
        body = {"schema": schema(name), "id": schema_id, "version": version}
        status, _, reply = call(through, "POST", f"/subjects/{name.lower()}-value/versions", body, timeout_s=30)
        assert (status, reply) == (200, {"id": schema_id, "version": version})
    cluster.wait_full_isr("_schemas")
    for url in urls.values():
        client = SchemaRegistryClient({"url": url})
        for name, (schema_id, version) in imported.items():
            assert json.loads(client.get_schema(schema_id).schema_str)["name"] == name
            latest = client.get_latest_version(f"{name.lower()}-value")
            assert (latest.schema_id, latest.version) == (schema_id, version)

    writer = cluster.leader("_schemas", 0)
    cluster.kill(writer)
    survivors = [b for b in cluster.brokers if b != writer]
    wait_until(lambda: cluster.leader("_schemas", 0) in survivors, 30, "a new leader of _schemas")
    # the survivors learn the new writer within moments (50004 until their metadata says who)
    wait_until(
        lambda: call(urls[survivors[0]], "PUT", "/mode", {"mode": "READWRITE"}, timeout_s=30)[0] == 200,
        30,
        "the mode set through a survivor",
    )
    client = SchemaRegistryClient({"url": urls[survivors[1]]})
    fresh = client.register_schema("fresh-value", Schema(schema("Fresh"), "AVRO"))
    assert fresh == 5001  # above every imported id, under the new writer too

    cluster.restart(writer)
    urls[writer] = registry_url(cluster.brokers[writer])

    def restarted_sees_everything() -> bool:
        status, _, subjects = call(urls[writer], "GET", "/subjects")
        return status == 200 and len(subjects) == 5

    wait_until(restarted_sees_everything, 30, "the restarted broker's registry to read _schemas again")
    client = SchemaRegistryClient({"url": urls[writer]})
    assert json.loads(client.get_schema(900).schema_str)["name"] == "Alpha"
    assert json.loads(client.get_schema(0).schema_str)["name"] == "Delta"
    assert client.get_latest_version("beta-value").version == 4
    assert call(urls[writer], "GET", "/mode")[2] == {"mode": "READWRITE"}
    assert client.register_schema("after-value", Schema(schema("After"), "AVRO")) == 5002
