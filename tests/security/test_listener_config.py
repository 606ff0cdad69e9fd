"""The security keys of server.properties: what a listener needs, and errors that name the key at fault."""

import ssl
import subprocess
import sys

import pytest

from strom.security.listeners import inter_broker_security, listener_security
from strom.security.tls import openssl_cipher_name
from strom.server.config import BrokerConfig
from strom.storage.log_config import ConfigError
from tests.tls_certs import make_certificates

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def ssl_config(certs, **extra) -> dict:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.location": str(certs.broker),
        **extra,
    }


def context_error(mapping: dict, listener: str = "SSL") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        listener_security(BrokerConfig.from_mapping(mapping), listener)
    return info.value


def test_an_ssl_listener_gets_a_server_context(certs):
    security = listener_security(
        BrokerConfig.from_mapping(
            ssl_config(certs, **{"ssl.client.auth": "required", "ssl.truststore.location": str(certs.ca)})
        ),
        "SSL",
    )
    assert security.tls and not security.sasl
    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert security.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_a_missing_or_unreadable_certificate_names_its_key(certs, tmp_path):
    assert (
        context_error(ssl_config(certs, **{"ssl.keystore.location": str(tmp_path / "nope.pem")})).key
        == "ssl.keystore.location"
    )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    error = context_error(ssl_config(certs, **{"listener.name.ssl.ssl.keystore.location": str(garbage)}))
    assert error.key == "listener.name.ssl.ssl.keystore.location"  # the per-listener key that supplied it
    assert str(garbage) in str(error)
    error = context_error(ssl_config(certs, **{"ssl.truststore.location": str(tmp_path / "no-ca.pem")}))
    assert error.key == "ssl.truststore.location"


def test_client_auth_needs_a_truststore(certs):
    assert context_error(ssl_config(certs, **{"ssl.client.auth": "required"})).key == "ssl.client.auth"


def test_inline_pem_keystore_and_truststore(certs):
    text = certs.broker.read_text()
    key = text[: text.index("-----END") + text[text.index("-----END") :].index("\n") + 1]
    chain = text[len(key) :]
    security = listener_security(
        BrokerConfig.from_mapping(
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.certificate.chain": chain.replace("\n", " "),
                "ssl.keystore.key": key,
                "ssl.truststore.certificates": certs.ca.read_text(),
                "ssl.client.auth": "requested",
            }
        ),
        "SSL",
    )
    assert security.ssl_context.verify_mode == ssl.CERT_OPTIONAL


def test_protocols_and_cipher_suites(certs):
    only12 = listener_security(
        BrokerConfig.from_mapping(
            ssl_config(
                certs,
                **{
                    "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
                },
            )
        ),
        "SSL",
    )
    assert only12.ssl_context.maximum_version == ssl.TLSVersion.TLSv1_2  # no TLS 1.3 suite listed
    names = {c["name"] for c in only12.ssl_context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"}
    assert openssl_cipher_name("TLS_RSA_WITH_AES_128_CBC_SHA") == "AES128-SHA"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-RSA-CHACHA20-POLY1305"
    assert (
        context_error(ssl_config(certs, **{"ssl.cipher.suites": "TLS_NO_SUCH_SUITE_WITH_ROT13"})).key
        == "ssl.cipher.suites"
    )
    assert context_error(ssl_config(certs, **{"ssl.enabled.protocols": "TLSv9"})).key == "ssl.enabled.protocols"


@pytest.mark.parametrize(
    "mapping, key",
    [
        (
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "sasl.enabled.mechanisms"),  # Kafka's default GSSAPI only
        (
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            },
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
        ),  # no username/password to log in with
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
            },
            "sasl.mechanism.inter.broker.protocol",
        ),
        (
            {
                "listeners": "PLAINTEXT://127.0.0.1:0,B://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,B:PLAINTEXT",
                "inter.broker.listener.name": "B",
                "security.inter.broker.protocol": "PLAINTEXT",
            },
            "security.inter.broker.protocol",
        ),
        ({"listener.name.ssl.ssl.client.auth": "sometimes"}, "listener.name.ssl.ssl.client.auth"),
    ],
)
def test_config_errors_name_the_key(mapping, key):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_mapping(mapping)
    assert info.value.key == key


def test_sasl_listener_settings_and_inter_broker_credentials():
    config = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.enabled.mechanisms": "GSSAPI,PLAIN,SCRAM-SHA-512",  # GSSAPI is dropped with a warning
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";',
        }
    )
    security = listener_security(config, "INTERNAL")
    assert security.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert security.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    client = inter_broker_security(config)
    assert (client.mechanism, client.username, client.password) == ("PLAIN", "admin", "admin-secret")
    assert "admin-secret" not in repr(client)
    assert config.items()["listeners"] == "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"


def test_security_inter_broker_protocol_picks_the_listener_so_named():
    config = BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS.replace(
                "required", 'required username="u" password="p"'
            ),
        }
    )
    assert config.inter_broker_listener_name == "SASL_PLAINTEXT"


def test_secrets_are_null_in_describe_configs_values(certs):
    config = BrokerConfig.from_mapping(ssl_config(certs, **{"ssl.key.password": "hunter2"}))
    assert config.ssl_key_password == "hunter2"
    assert config.items()["ssl.key.password"] is None
    assert config.items()["ssl.keystore.location"] == str(certs.broker)


def test_server_start_refuses_a_missing_certificate_naming_the_key(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "server-start",
            "--override",
            "listeners=SSL://127.0.0.1:0",
            "--override",
            f"ssl.keystore.location={tmp_path / 'missing.pem'}",
            "--override",
            f"log.dirs={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"strom server-start: invalid configuration: ssl.keystore.location: {tmp_path / 'missing.pem'} does not exist\n"
    )


def test_session_lifetime_per_listener_and_mechanism_falls_back_to_the_broker_key():
    config = BrokerConfig.from_mapping(
        {
            "listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
            "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
            "inter.broker.listener.name": "A",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.a.scram-sha-512.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="p";',
            "listener.name.a.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.b.plain.sasl.jaas.config": PLAIN_JAAS,
            "connections.max.reauth.ms": "5000",
            "listener.name.b.scram-sha-512.connections.max.reauth.ms": "60000",
        }
    )
    assert listener_security(config, "A").max_reauth_ms == {"PLAIN": 5000, "SCRAM-SHA-512": 5000}
    assert listener_security(config, "B").max_reauth_ms == {"PLAIN": 5000, "SCRAM-SHA-512": 60000}
    with pytest.raises(ConfigError, match="listener.name.b.plain.connections.max.reauth.ms"):
        BrokerConfig.from_mapping({"listener.name.b.plain.connections.max.reauth.ms": "-1"})


class _SaslPlainOnly:
    """A ListenerConfig that is not a BrokerConfig: the security layer needs only these views."""

    listener_overrides: dict = {}
    inter_broker_listener_name = "INTERNAL"
    sasl_mechanism_inter_broker_protocol = "PLAIN"

    def protocol_of(self, listener_name):
        return {"CLIENTS": "SASL_PLAINTEXT", "INTERNAL": "PLAINTEXT"}[listener_name]

    def listener_setting(self, listener_name, key):
        return {"ssl.principal.mapping.rules": "DEFAULT"}[key], key

    def jaas_config(self, listener_name, mechanism):
        text = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
        return (text, "listener.name.clients.plain.sasl.jaas.config") if mechanism == "PLAIN" else None

    def max_reauth_ms(self, listener_name, mechanism):
        return 60_000

    def sasl_mechanisms(self, listener_name):
        return ("PLAIN",)


def test_listener_security_reads_only_the_listener_views_it_is_given():
    security = listener_security(_SaslPlainOnly(), "CLIENTS")
    assert (security.protocol, security.tls, security.sasl) == ("SASL_PLAINTEXT", False, True)
    assert security.plain_users == {"alice": "alice-secret"}
    assert security.max_reauth_ms == {"PLAIN": 60_000}
    assert inter_broker_security(_SaslPlainOnly()) is None  # a PLAINTEXT inter-broker listener
