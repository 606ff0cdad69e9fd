"""A broker with a PLAINTEXT and a SASL_SSL (SCRAM-SHA-256) listener, its Schema Registry on, and
the user alice: what the typed Spark tests read and write through, with the ``kafka.*`` options
of the strom source and sink that log in as alice."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.broker_process import BrokerProcess
from tests.spark.conftest import WAIT_S

ALICE = "alice:alice-secret"  # schema.registry.basic.auth.user.info


@contextmanager
def sasl_ssl_broker(
    tmp_path: Path, overrides: dict[str, str] | None = None, data: Path | None = None
) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    """(the broker, the strom source's and sink's kafka.* options for its SASL_SSL listener as alice);
    ``overrides``: more broker configs; ``data``: its data dir (default ``tmp_path / "secured"``)."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from strom.cluster.zookeeper_server import free_port
    from tests.tls_certs import make_certificates

    certs = make_certificates(tmp_path / "certs")
    plain, secure = free_port(), free_port()
    config = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}",
        "ssl.keystore.location": str(certs.broker),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "schema.registry.listeners": "http://127.0.0.1:0",
        **(overrides or {}),
    }
    with BrokerProcess(data or tmp_path / "secured", config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
        )
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=WAIT_S).values():
            future.result(WAIT_S)
        yield (
            broker,
            {
                "kafka.bootstrap.servers": f"127.0.0.1:{secure}",
                "kafka.security.protocol": "SASL_SSL",
                "kafka.sasl.mechanism": "SCRAM-SHA-256",
                "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="alice" password="alice-secret";',
                "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.truststore.location": str(certs.ca),
            },
        )
