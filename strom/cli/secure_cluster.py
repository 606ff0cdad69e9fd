"""What ``strom cluster start --secure`` adds: a CA, broker certificates, SCRAM users, SASL_SSL listeners.

Everything lives in the cluster's directory, made once and reused by later starts::

    secrets/ca.pem              the CA certificate (the brokers' and clients' truststore)
    secrets/ca.key              the CA's private key (0600; only needed to issue more certificates)
    secrets/broker-<id>.pem     a broker's PEM keystore: private key, certificate, CA (0600)
    secrets/users.json          the admin and inter-broker passwords (0600)
    secrets/password-encoder.secret  every broker's password.encoder.secret (0600): secrets set
                                as dynamic broker configs (KIP-226) are stored encoded with it
    config/client.properties    Kafka client properties for the admin user (--command-config)

Every broker has two SASL_SSL listeners: CLIENT (the port printed in the bootstrap) and INTERNAL
(inter.broker.listener.name), on which brokers replicate and send transaction markers logged in
as User:broker with SCRAM-SHA-512. Both users' SCRAM credentials are written to ZooKeeper under
/config/users before the brokers start, as ``kafka-configs.sh --zookeeper`` would: the brokers
need them to log in to each other. The ACL authorizer is on with User:broker and User:admin as
super users, so every other principal needs ACLs (``strom acls --command-config ...``).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from dataclasses import dataclass

ADMIN_USER = "admin"
BROKER_USER = "broker"
MECHANISM = "SCRAM-SHA-512"
CLIENT_LISTENER = "CLIENT"
INTERNAL_LISTENER = "INTERNAL"
SCRAM_LOGIN = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'
VALID_DAYS = 825  # the longest validity clients (Apple's, browsers') still accept for a server certificate


@dataclass(frozen=True)
class Secrets:
    directory: str
    passwords: dict[str, str]
    encoder_secret: str = ""  # password.encoder.secret, the same on every broker

    @property
    def ca(self) -> str:
        return os.path.join(self.directory, "ca.pem")

    def keystore(self, broker_id: int) -> str:
        return os.path.join(self.directory, f"broker-{broker_id}.pem")


def _write_private(path: str, data: bytes) -> None:
    """Written 0600 from the start: a key must never be readable by others, even briefly."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "strom local cluster"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _make_ca(directory: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name("strom local CA")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(
        os.path.join(directory, "ca.key"),
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    with open(os.path.join(directory, "ca.pem"), "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def _load_ca(directory: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    with open(os.path.join(directory, "ca.key"), "rb") as handle:
        key = serialization.load_pem_private_key(handle.read(), password=None)
    with open(os.path.join(directory, "ca.pem"), "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    return key, cert


def _issue_broker_keystore(path: str, broker_id: int, ca_key, ca_cert) -> None:
    """Names 127.0.0.1 and localhost: brokers check each other's certificate against the host they dial."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"broker-{broker_id}"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(
        path,
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM),
    )


def reissue_keystore(secret_dir: str, broker_id: int, path: str) -> None:
    """A new key and certificate for a broker, from the cluster's CA, at ``path`` (certificate rotation:
    ``strom configs --entity-type brokers --entity-name ID --alter --add-config
    listener.name.<listener>.ssl.keystore.location=PATH`` puts it in service without a restart)."""
    ca_key, ca_cert = _load_ca(secret_dir)
    _issue_broker_keystore(path, broker_id, ca_key, ca_cert)


def prepare(directory: str, broker_ids: list[int]) -> Secrets:
    """The cluster's CA, a keystore per broker and the two users' passwords; what exists is kept."""
    secret_dir = os.path.join(directory, "secrets")
    os.makedirs(secret_dir, mode=0o700, exist_ok=True)
    if os.path.exists(os.path.join(secret_dir, "ca.key")):
        ca_key, ca_cert = _load_ca(secret_dir)
    else:
        ca_key, ca_cert = _make_ca(secret_dir)
    made = Secrets(secret_dir, {})
    for broker_id in broker_ids:
        if not os.path.exists(made.keystore(broker_id)):
            _issue_broker_keystore(made.keystore(broker_id), broker_id, ca_key, ca_cert)
    users_path = os.path.join(secret_dir, "users.json")
    if os.path.exists(users_path):
        with open(users_path) as handle:
            passwords = json.load(handle)
    else:
        passwords = {ADMIN_USER: secrets.token_urlsafe(18), BROKER_USER: secrets.token_urlsafe(18)}
        _write_private(users_path, (json.dumps(passwords, indent=2) + "\n").encode())
    encoder_path = os.path.join(secret_dir, "password-encoder.secret")
    if not os.path.exists(encoder_path):  # a cluster made before it existed gets one too
        _write_private(encoder_path, (secrets.token_urlsafe(32) + "\n").encode())
    with open(encoder_path) as handle:
        encoder_secret = handle.read().strip()
    return Secrets(secret_dir, passwords, encoder_secret)


def broker_overrides(made: Secrets, broker_id: int, port: int, internal_port: int) -> dict[str, str]:
    """The broker keys of a secured broker (a user's --override still wins over them)."""
    jaas = SCRAM_LOGIN.format(BROKER_USER, made.passwords[BROKER_USER])
    return {
        "listeners": f"{CLIENT_LISTENER}://127.0.0.1:{port},{INTERNAL_LISTENER}://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": f"{CLIENT_LISTENER}:SASL_SSL,{INTERNAL_LISTENER}:SASL_SSL",
        "inter.broker.listener.name": INTERNAL_LISTENER,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        f"listener.name.{INTERNAL_LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": made.keystore(broker_id),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": made.ca,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        "password.encoder.secret": made.encoder_secret,
    }


def write_users(zookeeper: str, made: Secrets) -> None:
    """Both users' SCRAM credentials (salted, never the password) under /config/users, as Kafka keeps them."""
    from kazoo.client import KazooClient

    from strom.cluster import model
    from strom.security.scram import ScramCredential

    hosts, _, chroot = zookeeper.partition("/")
    prefix = "/" + chroot.strip("/") if chroot.strip("/") else ""
    client = KazooClient(hosts=hosts, timeout=10)
    client.start(timeout=30)
    try:
        for name, password in sorted(made.passwords.items()):
            configs = {
                mechanism: ScramCredential.from_password(mechanism, password).to_text()
                for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            }
            data = json.dumps({"version": 1, "config": configs}, separators=(",", ":")).encode()
            path = prefix + model.user_config_path(name)
            if client.exists(path):
                client.set(path, data)
            else:
                client.create(path, data, makepath=True)
    finally:
        client.stop()
        client.close()


def write_client_properties(path: str, made: Secrets, bootstrap: str) -> None:
    """Kafka's client keys (as for kafka-*.sh --command-config); ``client_props.from_java_keys`` turns
    them into librdkafka's."""
    lines = [
        "# written by `strom cluster start --secure`: the admin user, a super user of this cluster",
        f"bootstrap.servers={bootstrap}",
        "security.protocol=SASL_SSL",
        f"sasl.mechanism={MECHANISM}",
        "sasl.jaas.config=" + SCRAM_LOGIN.format(ADMIN_USER, made.passwords[ADMIN_USER]),
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={made.ca}",
    ]
    _write_private(path, ("\n".join(lines) + "\n").encode())
