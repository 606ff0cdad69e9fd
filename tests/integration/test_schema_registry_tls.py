"""The Schema Registry over HTTPS (schema.registry.listeners=https://...) with the broker's PEM
keystore: confluent-kafka's client trusting the CA registers and reads; one that does not trust
it, or speaks plain HTTP to it, gets nothing."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.broker_process import BrokerProcess
from tests.integration.test_schema_registry import USER_V1, registry_url
from tests.tls_certs import make_certificates


def tls_overrides(certs) -> dict[str, str]:
    return {
        "schema.registry.listeners": "https://127.0.0.1:0",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
    }


def test_https_with_the_brokers_keystore(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    with BrokerProcess(tmp_path / "broker", tls_overrides(certs)) as broker:
        url = registry_url(broker)
        assert url.startswith("https://127.0.0.1:")
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca)})
        schema_id = client.register_schema("tls-value", Schema(json.dumps(USER_V1), "AVRO"))
        assert json.loads(client.get_schema(schema_id).schema_str) == USER_V1

        with pytest.raises(urllib.error.URLError) as untrusted:  # the system's CAs do not know the test CA
            urllib.request.urlopen(f"{url}/subjects", timeout=10, context=ssl.create_default_context())
        assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)
        trusted = ssl.create_default_context(cafile=str(certs.ca))
        with urllib.request.urlopen(f"{url}/subjects", timeout=10, context=trusted) as response:
            assert json.loads(response.read()) == ["tls-value"]
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):  # plain HTTP to the TLS port
            urllib.request.urlopen(url.replace("https://", "http://") + "/subjects", timeout=10)

        # strom's tools: strom schemas --ca-file, the console tools' schema.registry.ssl.ca.location
        untrusting = strom("schemas", "--registry-url", url, "list")
        assert untrusting.returncode == 1 and "CERTIFICATE_VERIFY_FAILED" in untrusting.stderr
        listed = strom("schemas", "--registry-url", url, "--ca-file", str(certs.ca), "list")
        assert (listed.returncode, listed.stdout) == (0, "tls-value\n"), listed.stderr
        registry = [
            "--property",
            f"schema.registry.url={url}",
            "--property",
            f"schema.registry.ssl.ca.location={certs.ca}",
            "--value-format",
            "avro",
        ]
        line = '{"name": "ada", "age": 36}'
        sent = strom(
            "console-producer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "tls-topic",
            *registry,
            "--property",
            f"value.schema.id={schema_id}",
            input=line + "\n",
        )
        assert sent.returncode == 0, sent.stderr
        read = strom(
            "console-consumer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "tls-topic",
            "--from-beginning",
            "--max-messages",
            "1",
            "--timeout-ms",
            "15000",
            *registry,
        )
        assert (read.returncode, read.stdout) == (0, line + "\n"), read.stderr


def strom(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        input=input,
    )
