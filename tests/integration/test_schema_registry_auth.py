"""The Schema Registry of a broker with SASL/SCRAM: HTTP Basic credentials of the SCRAM users, a
super user for global config and mode changes, Confluent's 401/403 JSON errors; confluent-kafka's
SchemaRegistryClient logs in with basic.auth.user.info."""

from __future__ import annotations

import base64
import json

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from strom.cluster.zookeeper_server import free_port
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S
from tests.integration.test_schema_registry import USER_V1, call, registry_url

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    with BrokerProcess(
        tmp_path_factory.mktemp("registry-auth") / "data",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "super.users": "User:admin",
            "schema.registry.listeners": "http://127.0.0.1:0",
        },
    ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), password.encode()
            )
            for user, password in USERS.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts, request_timeout=WAIT_S).values():
            future.result(timeout=WAIT_S)
        yield registry_url(broker)


def as_user(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def request(url: str, method: str, path: str, headers: dict[str, str], body: dict | None = None):
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, response.getheader("WWW-Authenticate"), json.loads(response.read())
    finally:
        conn.close()


def test_requests_need_a_scram_users_password(url):
    status, _, body = call(url, "GET", "/subjects")
    assert (status, body["error_code"]) == (401, 40101)
    status, challenge, _ = request(url, "GET", "/subjects", as_user("alice", "wrong"))
    assert status == 401 and challenge and challenge.startswith("Basic")
    assert request(url, "GET", "/subjects", as_user("mallory", "alice-secret"))[0] == 401
    assert request(url, "GET", "/subjects", {"Authorization": "Basic !!!"})[0] == 401
    assert request(url, "GET", "/subjects", as_user("alice", "alice-secret"))[:1] == (200,)


def test_confluent_client_with_basic_auth_and_super_user_only_global_changes(url):
    alice = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret"})
    schema_id = alice.register_schema("auth-value", Schema(json.dumps(USER_V1), "AVRO"))
    assert json.loads(alice.get_schema(schema_id).schema_str) == USER_V1
    alice.set_compatibility("auth-value", "FULL")  # a subject's own level: any user
    with pytest.raises(SchemaRegistryError) as refused:
        alice.set_compatibility(level="NONE")  # the global level: a super user only
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    status, _, body = request(url, "PUT", "/mode", as_user("alice", "alice-secret"), {"mode": "READONLY"})
    assert (status, body["error_code"]) == (403, 40301)

    admin = SchemaRegistryClient({"url": url, "basic.auth.user.info": "admin:admin-secret"})
    assert admin.set_compatibility(level="FULL") == {"compatibility": "FULL"}
    assert request(url, "GET", "/config", as_user("alice", "alice-secret"))[2] == {"compatibilityLevel": "FULL"}
    nobody = SchemaRegistryClient({"url": url})
    with pytest.raises(SchemaRegistryError) as unauthorized:
        nobody.get_subjects()
    assert unauthorized.value.http_status_code == 401


def test_strom_schemas_sends_credentials(url):
    import subprocess
    import sys

    def strom(*args: str, env: dict | None = None, input: str | None = None) -> subprocess.CompletedProcess:
        import os

        return subprocess.run(
            [sys.executable, "-m", "strom.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            input=input,
            env={**os.environ, **(env or {})},
        )

    refused = strom("schemas", "--registry-url", url, "list")
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr and "40101" in refused.stderr
    listed = strom("schemas", "--registry-url", url, "--user-info", "alice:alice-secret", "list")
    assert listed.returncode == 0, listed.stderr
    from_env = strom("schemas", "--registry-url", url, "list", env={"SCHEMA_REGISTRY_USER_INFO": "alice:alice-secret"})
    assert from_env.stdout == listed.stdout


def test_json_and_protobuf_serializers_log_in(url):
    """confluent-kafka's JSON and Protobuf serializers with basic.auth.user.info: registration,
    and the Protobuf deserializer's ?format=serialized read, as a SCRAM user."""
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.integration.test_schema_types import ORDER_V1, reading_class

    alice = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret"})
    context = SerializationContext("auth-typed", MessageField.VALUE)
    order = {"id": 7, "item": "book"}
    data = JSONSerializer(json.dumps(ORDER_V1), alice)(order, context)
    assert JSONDeserializer(json.dumps(ORDER_V1), schema_registry_client=alice)(data, context) == order
    reading = reading_class()
    context = SerializationContext("auth-proto", MessageField.VALUE)
    data = ProtobufSerializer(reading, alice)(reading(sensor="a", value=1.0), context)
    assert ProtobufDeserializer(reading, {}, alice)(data, context) == reading(sensor="a", value=1.0)
    nobody = SchemaRegistryClient({"url": url})
    with pytest.raises(SchemaRegistryError) as unauthorized:
        nobody.get_schema(alice.get_latest_version("auth-proto-value").schema_id, fmt="serialized")
    assert unauthorized.value.http_status_code == 401
