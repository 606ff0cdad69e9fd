"""``strom configs --entity-type users``: SCRAM credentials as kafka-configs.sh manages them, checked by logging in."""

import subprocess
import sys

import pytest

from strom.cluster.zookeeper_server import free_port
from tests.broker_process import BrokerProcess


@pytest.fixture
def scram_broker(tmp_path):
    plain, sasl = free_port(), free_port()
    with BrokerProcess(
        tmp_path / "data",
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        },
    ) as broker:
        broker.sasl = f"127.0.0.1:{sasl}"
        yield broker


def configs(broker, *args):
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def logs_in(broker, mechanism: str, password: str) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(
        {
            "bootstrap.servers": broker.sasl,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": "alice",
            "sasl.password": password,
            "logger": None,
            "log_level": 0,
        }
    )
    try:
        admin.list_topics(timeout=3)
        return True
    except KafkaException:
        return False


def test_add_describe_and_delete_scram_credentials(scram_broker):
    added = configs(
        scram_broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for user alice.\n"
    assert logs_in(scram_broker, "SCRAM-SHA-256", "alice-secret")  # no restart needed
    assert logs_in(scram_broker, "SCRAM-SHA-512", "alice-secret")
    assert not logs_in(scram_broker, "SCRAM-SHA-512", "wrong")

    described = configs(scram_broker, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert described.returncode == 0, described.stderr
    assert described.stdout == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )

    deleted = configs(
        scram_broker, "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "SCRAM-SHA-512"
    )
    assert deleted.returncode == 0, deleted.stderr
    assert not logs_in(scram_broker, "SCRAM-SHA-512", "alice-secret")
    assert logs_in(scram_broker, "SCRAM-SHA-256", "alice-secret")
    everyone = configs(scram_broker, "--describe", "--entity-type", "users")
    assert everyone.stdout == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"


def test_refusals(scram_broker):
    few = configs(
        scram_broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--add-config",
        "SCRAM-SHA-256=[iterations=100,password=x]",
    )
    assert few.returncode == 1 and "Too few iterations" in few.stderr
    unknown = configs(
        scram_broker,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--add-config",
        "bytes_per_fortnight=1024",
    )  # quota keys are accepted (tests/security/test_quotas.py)
    assert unknown.returncode == 1 and "bytes_per_fortnight" in unknown.stderr
    missing = configs(
        scram_broker, "--alter", "--entity-type", "users", "--entity-name", "bob", "--delete-config", "SCRAM-SHA-512"
    )
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    nobody = configs(scram_broker, "--describe", "--entity-type", "users", "--entity-name", "bob")
    assert (nobody.returncode, nobody.stdout) == (0, "")
