"""Every client-making ``strom`` tool works against a SASL_SSL (SCRAM-SHA-512) listener with --command-config.

The properties file is the one a Kafka user already has (security.protocol, sasl.mechanism, the
JAAS line, a PEM truststore); the broker's only other listener (PLAINTEXT) is used for set-up alone.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from strom.cluster.zookeeper_server import free_port
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, Msg, confluent_produce
from tests.tls_certs import make_certificates

TOPIC = "secured"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    plain, sasl_ssl = free_port(), free_port()
    with BrokerProcess(
        tmp_path_factory.mktemp("broker") / "data",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
            "ssl.keystore.location": str(certs.broker),
            "ssl.truststore.location": str(certs.ca),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        },
    ) as broker:
        from confluent_kafka.admin import (
            AdminClient,
            NewTopic,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"admin-secret"
                )
            ],
            request_timeout=WAIT_S,
        ).values():
            future.result(timeout=WAIT_S)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=WAIT_S)
        confluent_produce(broker.bootstrap, TOPIC, [Msg(None, f"m{i}".encode(), (), None) for i in range(5)])
        properties = tmp_path_factory.mktemp("client") / "client.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="admin-secret";\n'
            f"ssl.truststore.location={certs.ca}\n"
            "ssl.truststore.type=PEM\n"
        )
        broker.secure = f"127.0.0.1:{sasl_ssl}"
        broker.properties = str(properties)
        broker.tmp = tmp_path_factory.mktemp("files")
        yield broker


# tool -> (arguments after the subcommand, stdin, what stdout must contain)
TOOLS = {
    "topics": (["--list"], None, TOPIC),
    "configs-topic": (["--describe", "--entity-type", "topics", "--entity-name", TOPIC], None, "configs for topic"),
    "configs-quota": (
        ["--alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1048576"],
        None,
        "Completed updating config for client app.",
    ),
    "consumer-groups": (["--list"], None, ""),
    "console-producer": (["--topic", TOPIC], "hello\n", ""),
    "console-consumer": (["--topic", TOPIC, "--from-beginning", "--max-messages", "1"], None, "m0"),
    "producer-perf-test": (
        ["--topic", TOPIC, "--num-records", "10", "--record-size", "10", "--throughput", "-1"],
        None,
        "10 records sent",
    ),
    "consumer-perf-test": (["--topic", TOPIC, "--messages", "3"], None, ""),
    "transactions": (["list"], None, "TransactionalId"),
    "features": (["describe"], None, "Feature: transaction.version"),
    "reassign-partitions": (["--list"], None, ""),
    "acls": (["--list"], None, ""),
    "leader-election": (["--election-type", "preferred", "--all-topic-partitions"], None, ""),
    "ingest": (["--topic", TOPIC, "--file", "{tmp}/lines.log", "--state-file", "{tmp}/ingest-state.json"], None, ""),
}


@pytest.mark.parametrize("case", sorted(TOOLS))
def test_tool_logs_in_with_command_config(secured, case):
    args, stdin, expected = TOOLS[case]
    tool = case.split("-")[0] if case.startswith("configs") else case
    (secured.tmp / "lines.log").write_text("one\ntwo\n")
    args = [a.replace("{tmp}", str(secured.tmp)) for a in args]
    if tool in ("transactions", "features"):  # their options come before the command
        command = [tool, "--bootstrap-server", secured.secure, "--command-config", secured.properties, *args]
    else:
        command = [tool, *args, "--bootstrap-server", secured.secure, "--command-config", secured.properties]
    done = subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *command],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    assert expected in done.stdout


def test_without_command_config_the_secured_listener_refuses_the_tool(secured):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "topics",
            "--list",
            "--bootstrap-server",
            secured.secure,
            "--timeout",
            "3000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and TOPIC not in done.stdout
