"""``strom schemas`` against a real broker's Schema Registry, run as a user runs it (a subprocess),
each answer checked against what confluent-kafka's SchemaRegistryClient sees."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import USER_BAD, USER_V1, USER_V2, registry_url


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    data = tmp_path_factory.mktemp("schemas-cli") / "broker"
    with BrokerProcess(data, {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        yield registry_url(broker)


def strom_schemas(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "schemas", "--registry-url", url, "--timeout", "20", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ok(url: str, *args: str) -> str:
    done = strom_schemas(url, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_register_list_get_check_and_delete(url, tmp_path):
    client = SchemaRegistryClient({"url": url})
    (tmp_path / "v1.avsc").write_text(json.dumps(USER_V1))
    first = json.loads(ok(url, "register", "--subject", "cli-users-value", "--schema-file", str(tmp_path / "v1.avsc")))
    assert first["id"] == client.get_latest_version("cli-users-value").schema_id
    second = json.loads(ok(url, "register", "--subject", "cli-users-value", "--schema", json.dumps(USER_V2)))
    assert second["id"] != first["id"]
    ok(url, "register", "--subject", "cli-other-value", "--schema", json.dumps(USER_V1))

    assert ok(url, "list", "--prefix", "cli-").split() == ["cli-other-value", "cli-users-value"]
    assert ok(url, "list", "--subject", "cli-users-value").split() == ["1", "2"]
    latest = json.loads(ok(url, "get", "--subject", "cli-users-value"))
    assert (latest["version"], latest["id"], json.loads(latest["schema"])) == (2, second["id"], USER_V2)
    assert json.loads(ok(url, "get", "--subject", "cli-users-value", "--schema-version", "1"))["id"] == first["id"]
    by_id = json.loads(ok(url, "get", "--id", str(first["id"])))
    assert json.loads(by_id["schema"]) == USER_V1

    # check: compatible exits 0, incompatible exits 1 and says why with --verbose
    assert json.loads(ok(url, "check", "--subject", "cli-users-value", "--schema", json.dumps(USER_V2))) == {
        "is_compatible": True
    }
    bad = strom_schemas(url, "check", "--subject", "cli-users-value", "--schema", json.dumps(USER_BAD), "--verbose")
    assert bad.returncode == 1
    answer = json.loads(bad.stdout)
    assert answer["is_compatible"] is False and any("level" in message for message in answer["messages"])
    refused = strom_schemas(url, "register", "--subject", "cli-users-value", "--schema", json.dumps(USER_BAD))
    assert refused.returncode == 1 and "HTTP 409" in refused.stderr
    assert ok(url, "list", "--subject", "cli-users-value").split() == ["1", "2"]

    # delete a version, soft then hard; then the subject
    assert json.loads(ok(url, "delete", "--subject", "cli-users-value", "--schema-version", "1")) == 1
    assert ok(url, "list", "--subject", "cli-users-value").split() == ["2"]
    assert ok(url, "list", "--subject", "cli-users-value", "--deleted").split() == ["1", "2"]
    assert json.loads(ok(url, "delete", "--subject", "cli-users-value", "--schema-version", "1", "--permanent")) == 1
    assert ok(url, "list", "--subject", "cli-users-value", "--deleted").split() == ["2"]
    assert json.loads(ok(url, "delete", "--subject", "cli-other-value")) == [1]
    assert ok(url, "list", "--prefix", "cli-").split() == ["cli-users-value"]
    assert client.get_subjects() == ["cli-users-value"]

    missing = strom_schemas(url, "get", "--subject", "cli-nothing-value")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "Error: GET /subjects/cli-nothing-value/versions/latest: HTTP 404: "
        "Subject 'cli-nothing-value' not found. (error code 40401)"
    )


def test_config_and_mode(url):
    client = SchemaRegistryClient({"url": url})
    ok(url, "register", "--subject", "cli-mode-value", "--schema", json.dumps(USER_V1))
    assert json.loads(ok(url, "config")) == {"compatibilityLevel": "BACKWARD"}
    assert json.loads(ok(url, "config", "--subject", "cli-mode-value", "--set", "full")) == {"compatibility": "FULL"}
    assert client.get_compatibility("cli-mode-value") == "FULL"
    assert json.loads(ok(url, "config", "--subject", "cli-mode-value")) == {"compatibilityLevel": "FULL"}
    ok(url, "config", "--subject", "cli-mode-value", "--delete")
    assert json.loads(ok(url, "config", "--subject", "cli-mode-value")) == {"compatibilityLevel": "BACKWARD"}

    assert json.loads(ok(url, "mode", "--subject", "cli-mode-value", "--set", "READONLY")) == {"mode": "READONLY"}
    refused = strom_schemas(url, "register", "--subject", "cli-mode-value", "--schema", json.dumps(USER_V2))
    assert refused.returncode == 1 and "error code 42205" in refused.stderr
    ok(url, "mode", "--subject", "cli-mode-value", "--delete")
    assert json.loads(ok(url, "mode")) == {"mode": "READWRITE"}
    ok(url, "register", "--subject", "cli-mode-value", "--schema", json.dumps(USER_V2))


def test_import_mode_keeps_ids_and_versions(url):
    client = SchemaRegistryClient({"url": url})
    subject = "cli-import-value"
    assert json.loads(ok(url, "mode", "--subject", subject, "--set", "import")) == {"mode": "IMPORT"}
    body = ok(
        url, "register", "--subject", subject, "--schema", json.dumps(USER_V1), "--id", "700", "--schema-version", "3"
    )
    assert json.loads(body) == {"id": 700, "version": 3}
    assert client.get_latest_version(subject).version == 3 and client.get_schema(700).schema_str
    refused = strom_schemas(url, "register", "--subject", subject, "--schema", json.dumps(USER_V2))
    assert refused.returncode == 1 and "error code 42205" in refused.stderr  # IMPORT mode: an id is needed
    ok(url, "mode", "--subject", subject, "--delete")
    # the registry holds subjects: the global mode becomes IMPORT only with --force
    refused = strom_schemas(url, "mode", "--set", "IMPORT")
    assert refused.returncode == 1 and "error code 42205" in refused.stderr
    try:
        assert json.loads(ok(url, "mode", "--set", "IMPORT", "--force")) == {"mode": "IMPORT"}
    finally:
        ok(url, "mode", "--set", "READWRITE")
    new_schema = json.dumps({**USER_V1, "name": "AfterImport"})
    fresh = json.loads(ok(url, "register", "--subject", "cli-after-import-value", "--schema", new_schema))
    assert fresh["id"] > 700  # a new schema's id is above the imported one


def test_an_unreachable_registry_is_one_line():
    done = strom_schemas("http://127.0.0.1:9", "list")
    assert done.returncode == 1
    assert done.stderr.startswith("Error: cannot reach the Schema Registry at http://127.0.0.1:9:")
    assert len(done.stderr.strip().splitlines()) == 1


def test_json_and_protobuf_schema_types(url, tmp_path):
    """--schema-type JSON and PROTOBUF (any case): registered as their type, checked by its rules."""
    proto = 'syntax = "proto3";\npackage cli;\n\nmessage Reading {\n  string sensor = 1;\n}\n'
    (tmp_path / "reading.proto").write_text(proto)
    args = [
        "--subject",
        "cli-proto-value",
        "--schema-type",
        "protobuf",
        "--schema-file",
        str(tmp_path / "reading.proto"),
    ]
    registered = json.loads(ok(url, "register", *args))
    got = json.loads(ok(url, "get", "--id", str(registered["id"])))
    assert (got["schemaType"], got["schema"]) == ("PROTOBUF", proto)
    retyped = proto.replace("string sensor", "int32 sensor")
    bad = strom_schemas(
        url, "check", "--subject", "cli-proto-value", "--schema-type", "PROTOBUF", "--schema", retyped, "--verbose"
    )
    assert bad.returncode == 1 and "FIELD_SCALAR_KIND_CHANGED" in bad.stdout, bad.stdout + bad.stderr

    order = {"type": "object", "properties": {"id": {"type": "integer"}}}
    json_args = ["--subject", "cli-json-value", "--schema-type", "JSON"]
    first = json.loads(ok(url, "register", *json_args, "--schema", json.dumps(order)))
    assert json.loads(ok(url, "register", *json_args, "--schema", json.dumps(order, indent=2))) == first
    assert SchemaRegistryClient({"url": url}).get_schema(first["id"]).schema_type == "JSON"
    refused = strom_schemas(url, "register", *json_args[:2], "--schema-type", "XML", "--schema", "{}")
    assert refused.returncode == 2 and "invalid choice" in refused.stderr
