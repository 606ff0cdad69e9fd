"""Certificates made at test time (trustme): a CA, a broker certificate for 127.0.0.1/localhost, client certificates.

Nothing here is committed: every test session makes its own keys in a temporary directory.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the CA certificate: the broker's truststore and the clients' ssl.ca.location
    broker: Path  # the broker's PEM keystore: private key and certificate chain in one file
    client_cert: Path  # CN=alice,OU=clients,O=strom-tests
    client_key: Path
    stranger_cert: Path  # a client certificate from another CA
    stranger_key: Path
    expired_cert: Path  # signed by the CA, expired yesterday
    expired_key: Path


def make_certificates(directory: Path) -> Certificates:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="strom-tests")
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(directory / "broker.pem"))

    def leaf(issuer: trustme.CA, name: str, **kwargs) -> tuple[Path, Path]:
        cert = issuer.issue_cert(
            f"{name}@clients.example",
            common_name=name,
            organization_name="strom-tests",
            organization_unit_name="clients",
            **kwargs,
        )
        cert.cert_chain_pems[0].write_to_path(str(directory / f"{name}.pem"))
        cert.private_key_pem.write_to_path(str(directory / f"{name}.key"))
        return directory / f"{name}.pem", directory / f"{name}.key"

    now = datetime.datetime.now(datetime.UTC)
    client = leaf(ca, "alice")
    stranger = leaf(trustme.CA(), "mallory")
    expired = leaf(ca, "old", not_before=now - datetime.timedelta(days=30), not_after=now - datetime.timedelta(days=1))
    return Certificates(directory / "ca.pem", directory / "broker.pem", *client, *stranger, *expired)


PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def sasl_ssl_plain(certs: Certificates) -> tuple[dict[str, str], dict[str, str]]:
    """Brokers whose one SASL_SSL listener (PLAIN) also carries replication, as the broker user
    ``admin``, and a client's librdkafka settings for it as ``alice``: (broker overrides, client)."""
    users = 'user_admin="admin-secret" user_alice="alice-secret"'
    brokers = {
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN} username="admin" password="admin-secret" {users};',
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
    }
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(certs.ca),
    }
    return brokers, client
