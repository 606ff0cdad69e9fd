"""A broker with iceberg.catalog.type=rest: its Iceberg topics are committed through an Iceberg REST
catalog (here the one a strom broker serves: no other REST catalog server can be installed here),
on PLAINTEXT and on SASL_SSL with an https catalog and OAuth2 client credentials of a SCRAM user;
an unreachable catalog is a counted, logged translation failure, never a crash; a bad config
stops startup naming the key."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import requests
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from strom.cluster.zookeeper_server import free_port
from strom.iceberg.table import CatalogSettings
from tests.broker_process import BrokerProcess, start_expecting_failure
from tests.iceberg.support import WAIT_S, assert_exactly, create_topic, produce, table_rows, transaction, wait_for_rows
from tests.tls_certs import make_certificates

ICEBERG = {"iceberg.enabled": "true", "iceberg.target.lag.ms": "500"}
STROM = [sys.executable, "-m", "strom.cli.main"]


def status_lags(bootstrap: str, *extra: str) -> list[tuple[str, str, str]]:
    """(topic, partition, lag in records) of each row of ``strom iceberg status``."""
    status = subprocess.run(
        [*STROM, "iceberg", "--bootstrap-server", bootstrap, "status", *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    return [(row[0], row[1], row[4]) for row in (line.split() for line in status.stdout.splitlines()[1:])]


def test_a_broker_commits_an_iceberg_topic_through_its_own_rest_catalog(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = {
        **ICEBERG,
        "iceberg.rest.catalog.listeners": url,
        "iceberg.catalog.type": "rest",
        "iceberg.rest.catalog.uri": url,
    }
    with BrokerProcess(tmp_path / "data", config) as broker:
        create_topic(broker.bootstrap, "orders", 3)
        committed = produce(broker.bootstrap, "orders", 500, "a")
        committed |= transaction(broker.bootstrap, "orders", 30, "t1", commit=True)
        aborted = transaction(broker.bootstrap, "orders", 20, "t2", commit=False)
        catalog = CatalogSettings.for_rest(url)
        wait_for_rows(catalog, "orders", len(committed))
        time.sleep(1.5)  # three more rounds: nothing more may arrive
        assert_exactly(table_rows(catalog, "orders"), committed, aborted)
        # the same table in the SQL catalog the REST catalog serves
        sql = CatalogSettings.for_broker((str(tmp_path / "data"),), None, None, 1)
        assert len(table_rows(sql, "orders")) == len(committed)
        # strom iceberg status finds the brokers' REST catalog through iceberg.rest.catalog.uri: caught up
        assert status_lags(broker.bootstrap) == [("orders", str(p), "0") for p in range(3)]
    assert "translating orders failed" not in broker.read_log()


def test_an_unreachable_rest_catalog_is_a_counted_failure_and_the_broker_goes_on(tmp_path):
    nobody = f"http://127.0.0.1:{free_port()}"
    config = {**ICEBERG, "iceberg.catalog.type": "rest", "iceberg.rest.catalog.uri": nobody}
    config["metrics.listener"] = "http://127.0.0.1:0"
    with BrokerProcess(tmp_path / "data", config) as broker:
        create_topic(broker.bootstrap, "lost", 1)
        committed = produce(broker.bootstrap, "lost", 20, "a")
        assert len(committed) == 20
        metrics = (tmp_path / "data" / "strom.metrics").read_text().strip()
        deadline = time.monotonic() + WAIT_S
        failures = 0.0
        while time.monotonic() < deadline and failures < 2:
            with urllib.request.urlopen(f"{metrics}/metrics", timeout=10) as answer:
                text = answer.read().decode()
            found = [
                ln
                for ln in text.splitlines()
                if ln.startswith('strom_iceberg_translation_failures_total{topic="lost"}')
            ]
            failures = float(found[0].split()[-1]) if found else 0.0
            time.sleep(0.2)
        assert failures >= 2
        assert broker.process is not None and broker.process.poll() is None
        assert len(produce(broker.bootstrap, "lost", 5, "b")) == 5  # still serving
    log = broker.read_log()
    assert f"the Iceberg REST catalog {nobody} (iceberg.rest.catalog.uri) cannot be used" in log
    assert "Traceback" not in log


def sasl_ssl_rest_broker(certs, plain: int, secure: int, url: str) -> dict[str, str]:
    """A broker with PLAINTEXT and SASL_SSL (SCRAM-SHA-256) listeners serving the https catalog ``url``
    and committing through it as alice (a SCRAM user the test makes)."""
    return {
        **ICEBERG,
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
        "ssl.keystore.location": str(certs.broker),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "iceberg.rest.catalog.listeners": url,
        "iceberg.catalog.type": "rest",
        "iceberg.rest.catalog.uri": url,
        "iceberg.rest.catalog.credential": "alice:alice-secret",
        "iceberg.rest.catalog.ssl.ca.location": str(certs.ca),
    }


def test_sasl_ssl_brokers_use_an_https_catalog_with_a_scram_users_client_credentials(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    plain, secure, catalog_port = free_port(), free_port(), free_port()
    url = f"https://127.0.0.1:{catalog_port}"
    config = sasl_ssl_rest_broker(certs, plain, secure, url)
    with BrokerProcess(tmp_path / "data", config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S).values():
            future.result(WAIT_S)
        secured = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "ssl.ca.location": str(certs.ca),
        }
        # the credential is a secret: DescribeConfigs reports it as null, marked sensitive
        [described] = admin.describe_configs([ConfigResource("broker", "0")], request_timeout=WAIT_S).values()
        entries = described.result(WAIT_S)
        secret = entries["iceberg.rest.catalog.credential"]
        assert (secret.value, secret.is_sensitive) == (None, True)
        assert entries["iceberg.rest.catalog.uri"].value == url
        create_topic(broker.bootstrap, "secure", 2)
        committed = produce(f"127.0.0.1:{secure}", "secure", 300, "s", **secured)
        catalog = CatalogSettings.for_rest(url, credential="alice:alice-secret", ca_location=str(certs.ca))
        wait_for_rows(catalog, "secure", len(committed))
        time.sleep(1.5)
        assert_exactly(table_rows(catalog, "secure"), committed, {})

        # no login, a wrong password, an unknown token: 401; HTTP Basic of a SCRAM user: served
        config_url = f"{url}/v1/namespaces"
        for auth in ({}, {"auth": ("alice", "wrong")}, {"headers": {"Authorization": "Bearer made-up"}}):
            refused = requests.get(config_url, verify=str(certs.ca), timeout=10, **auth)
            assert refused.status_code == 401, auth
            assert refused.json()["error"]["type"] == "NotAuthorizedException"
        allowed = requests.get(config_url, verify=str(certs.ca), auth=("alice", "alice-secret"), timeout=10)
        assert allowed.status_code == 200 and ["strom"] in allowed.json()["namespaces"]
        token = requests.post(
            f"{url}/v1/oauth/tokens",
            data={"grant_type": "client_credentials", "client_id": "alice", "client_secret": "wrong"},
            verify=str(certs.ca),
            timeout=10,
        )
        assert (token.status_code, token.json()["error"]) == (401, "invalid_client")
        # strom iceberg status over SASL_SSL logs in to the catalog with --catalog-credential
        properties = tmp_path / "client.properties"
        properties.write_text("".join(f"{k}={v}\n" for k, v in secured.items()))
        command = ["--command-config", str(properties), "--catalog-credential", "alice:alice-secret"]
        assert status_lags(f"127.0.0.1:{secure}", *command) == [("secure", str(p), "0") for p in range(2)]
        refused = subprocess.run(
            [*STROM, "iceberg", "--bootstrap-server", f"127.0.0.1:{secure}", "status", "--command-config"]
            + [str(properties)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 1 and f"cannot open the Iceberg REST catalog {url}" in refused.stderr
        # plain HTTP to the https listener gets nothing served
        try:
            requests.get(f"http://127.0.0.1:{catalog_port}/v1/config", timeout=5)
            raise AssertionError("served over plain HTTP")
        except requests.RequestException:
            pass
    log = broker.read_log()
    assert "alice-secret" not in log


def test_a_bad_rest_catalog_config_stops_startup_naming_the_key(tmp_path):
    result = start_expecting_failure(tmp_path / "a", "iceberg.catalog.type=rest")
    assert result.returncode != 0
    assert "iceberg.rest.catalog.uri" in result.stderr and "iceberg.catalog.type=rest" in result.stderr
    result = start_expecting_failure(tmp_path / "b", "iceberg.catalog.type=glue")
    assert result.returncode != 0 and "iceberg.catalog.type" in result.stderr
    result = start_expecting_failure(
        tmp_path / "c", "iceberg.catalog.type=rest", "iceberg.rest.catalog.uri=ftp://catalog:8181"
    )
    assert result.returncode != 0 and "iceberg.rest.catalog.uri" in result.stderr
    result = start_expecting_failure(tmp_path / "d", "iceberg.rest.catalog.credential=no-colon-secret")
    assert result.returncode != 0 and "iceberg.rest.catalog.credential" in result.stderr
    assert "no-colon-secret" not in result.stderr + result.stdout
    result = start_expecting_failure(tmp_path / "e", "iceberg.rest.catalog.listeners=tcp://127.0.0.1:0")
    assert result.returncode != 0 and "iceberg.rest.catalog.listeners" in result.stderr
    # the SQL catalog it would serve cannot be opened: startup stops naming its key, no traceback
    result = start_expecting_failure(
        tmp_path / "f",
        "iceberg.rest.catalog.listeners=http://127.0.0.1:0",
        f"iceberg.catalog.uri=sqlite:///{tmp_path}/no/such/dir/catalog.db",
    )
    assert result.returncode != 0 and "iceberg.catalog.uri: cannot open the SQL catalog" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_catalog_port_in_use_stops_startup_naming_the_key(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = start_expecting_failure(tmp_path / "a", f"iceberg.rest.catalog.listeners=http://127.0.0.1:{port}")
    assert result.returncode != 0 and "iceberg.rest.catalog.listeners" in result.stderr
