"""TLS and SASL listeners with real clients: every listener type, byte-exact data, groups, and every refusal.

One broker serves five listeners: PLAINTEXT, SSL (client certificates requested), MTLS (an SSL
listener that requires one), SASL_SSL and SASL_PLAINTEXT (PLAIN from the JAAS users, SCRAM from
credentials created at the start through AlterUserScramCredentials). Certificates are made at run
time by trustme.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time

import pytest

from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from tests.broker_process import BrokerProcess
from tests.integration.clients import (
    WAIT_S,
    ConnectionClosed,
    Msg,
    RawClient,
    aiokafka_poll,
    assert_same,
    confluent_consume,
    confluent_group_consume,
    confluent_produce,
    kafka_python_poll,
    kafka_python_subscribed,
    kcat,
    kcat_consume,
    sample_messages,
    unique_topic,
)
from tests.tls_certs import make_certificates

PLAIN_USERS = 'user_alice="alice-secret" user_carol="carol-secret"'
JAAS = f"org.apache.kafka.common.security.plain.PlainLoginModule required {PLAIN_USERS};"
SASL_FAILED = 58


class Secured:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], certs):
        self.broker, self.ports, self.certs = broker, ports, certs

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(self, case: str, **extra) -> dict:
        """librdkafka settings of one way in."""
        certs = self.certs
        listener, protocol, mechanism = CASES[case]
        config = {"bootstrap.servers": self.address(listener), "security.protocol": protocol}
        if protocol.endswith("SSL"):
            config["ssl.ca.location"] = str(certs.ca)
        if listener == "MTLS":
            config.update(
                {"ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)}
            )
        if mechanism:
            config.update({"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-secret"})
        config.update(extra)
        return config


# case -> (listener, security.protocol, sasl.mechanism)
CASES = {
    "PLAINTEXT": ("PLAINTEXT", "PLAINTEXT", None),
    "SSL": ("SSL", "SSL", None),
    "SSL+client-cert": ("MTLS", "SSL", None),
    "SASL_PLAINTEXT/PLAIN": ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN"),
    "SASL_PLAINTEXT/SCRAM-SHA-512": ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-512"),
    "SASL_SSL/PLAIN": ("SASL_SSL", "SASL_SSL", "PLAIN"),
    "SASL_SSL/SCRAM-SHA-256": ("SASL_SSL", "SASL_SSL", "SCRAM-SHA-256"),
    "SASL_SSL/SCRAM-SHA-512": ("SASL_SSL", "SASL_SSL", "SCRAM-SHA-512"),
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")}
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", overrides) as broker:
        from confluent_kafka.admin import (
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret"
                ),
                UserScramCredentialUpsertion(
                    "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
                ),
            ],
            request_timeout=WAIT_S,
        )
        for future in futures.values():
            future.result(timeout=WAIT_S)
        yield Secured(broker, ports, certs)


def without(config: dict, *keys: str) -> dict:
    return {k: v for k, v in config.items() if k not in keys and k != "bootstrap.servers"}


@pytest.mark.parametrize("case", list(CASES))
def test_confluent_kafka_produces_and_consumes_in_a_group_over_every_listener(secured, case):
    config = secured.client(case)
    topic = unique_topic("sec")
    sent = sample_messages(12) + [Msg(b"big", bytes(range(256)) * 3500, (), 1_700_000_100_000)]  # 875 KiB
    extra = without(config)
    assert confluent_produce(config["bootstrap.servers"], topic, sent, **extra) == list(range(len(sent)))
    assert_same(confluent_group_consume(config, topic, len(sent), f"g-{topic}"), sent)


def test_metadata_and_find_coordinator_answer_with_the_listener_the_request_came_in_on(secured):
    from confluent_kafka.admin import AdminClient

    for case in CASES:
        config = secured.client(case)
        metadata = AdminClient(config).list_topics(timeout=WAIT_S)
        listener = CASES[case][0]
        assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [
            (0, "127.0.0.1", secured.ports[listener])
        ], case


def test_large_fetches_over_tls_are_byte_exact(secured):
    """sendfile cannot cross TLS: these file slices are copied through the SSL object."""
    config = secured.client("SSL")
    topic = unique_topic("big")
    sent = [
        Msg(f"k{i}".encode(), bytes([i]) * 700_000 + bytes(range(256)), (), 1_700_000_000_000 + i) for i in range(12)
    ]
    confluent_produce(config["bootstrap.servers"], topic, sent, **without(config))
    got = confluent_consume(
        config["bootstrap.servers"],
        topic,
        len(sent),
        **without(config),
        **{"fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": 8 << 20},
    )
    assert_same(got, sent)


def test_kafka_python_and_aiokafka_with_scram_over_sasl_ssl(secured):
    from kafka import KafkaProducer

    context = ssl.create_default_context(cafile=str(secured.certs.ca))
    common = {
        "bootstrap_servers": secured.address("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": context,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    topic = unique_topic("kp")
    sent = sample_messages(8)
    producer = KafkaProducer(**common, request_timeout_ms=WAIT_S * 1000, max_block_ms=WAIT_S * 1000)
    try:
        futures = [
            producer.send(
                topic, value=m.value, key=m.key, headers=list(m.headers) or None, partition=0, timestamp_ms=m.timestamp
            )
            for m in sent
        ]
        producer.flush(timeout=WAIT_S)
        assert [f.get(timeout=WAIT_S).offset for f in futures] == list(range(len(sent)))
    finally:
        producer.close(timeout=5)
    consumer = kafka_python_subscribed(
        [topic], **common, group_id=f"g-{topic}", auto_offset_reset="earliest", enable_auto_commit=False
    )
    try:
        got = kafka_python_poll(consumer, len(sent), WAIT_S * 2)
        consumer.commit()
    finally:
        consumer.close()
    assert_same(got, sent)

    async def with_aiokafka() -> list[Msg]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        options = {k: v for k, v in common.items()}
        producer = AIOKafkaProducer(**options, request_timeout_ms=WAIT_S * 1000)
        await asyncio.wait_for(producer.start(), WAIT_S)
        try:
            for m in sent:
                await asyncio.wait_for(
                    producer.send_and_wait(
                        topic2,
                        value=m.value,
                        key=m.key,
                        partition=0,
                        timestamp_ms=m.timestamp,
                        headers=list(m.headers) or None,
                    ),
                    WAIT_S,
                )
        finally:
            await asyncio.wait_for(producer.stop(), WAIT_S)
        consumer = AIOKafkaConsumer(
            topic2, **options, group_id=f"g-{topic2}", auto_offset_reset="earliest", enable_auto_commit=False
        )
        await asyncio.wait_for(consumer.start(), WAIT_S)
        try:
            out = await aiokafka_poll(consumer, len(sent), WAIT_S * 2)
            await asyncio.wait_for(consumer.commit(), WAIT_S)
        finally:
            await asyncio.wait_for(consumer.stop(), WAIT_S)
        return out

    topic2 = unique_topic("ak")
    assert_same(asyncio.run(with_aiokafka()), sent)


def kcat_security(secured, case: str) -> list[str]:
    args = []
    for key, value in without(secured.client(case)).items():
        args += ["-X", f"{key}={value}"]
    return args


@pytest.mark.parametrize("case", ["SASL_SSL/SCRAM-SHA-512", "SASL_PLAINTEXT/PLAIN", "SSL+client-cert"])
def test_kcat(secured, case):
    """Debian's kcat (librdkafka 2.0.2) sends a SCRAM nonce that only Kafka's lenient rule accepts."""
    topic = unique_topic("kc")
    bootstrap = secured.address(CASES[case][0])
    kcat(
        ["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", ":", *kcat_security(secured, case)],
        stdin=b"k1:v1\nk2:v2\n",
    )
    got = kcat_consume(bootstrap, topic, 0, "beginning", *kcat_security(secured, case))
    assert [(m.key, m.value) for m in got] == [(b"k1", b"v1"), (b"k2", b"v2")]


# -- refusals ------------------------------------------------------------------------------------


def delivered(config: dict, topic: str, seconds: float = 15) -> tuple[int, list[str]]:
    """Produce one message and wait (up to ``seconds``) for the client to report an error;
    (messages still undelivered, client errors)."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer(
        {
            **config,
            "error_cb": lambda e: errors.append(e.str()),
            # far beyond the flush, so "still queued" cannot become "expired" on a slow machine
            "message.timeout.ms": 60000,
            "logger": None,
            "log_level": 0,
        }
    )
    producer.produce(topic, b"must not arrive")
    deadline = time.monotonic() + seconds
    left = producer.flush(1)
    while left and not errors and time.monotonic() < deadline:
        left = producer.flush(0.5)
    producer.purge()
    producer.flush(1)
    return left, errors


def end_offset(secured, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": secured.address("PLAINTEXT"), "group.id": "x"})
    try:
        metadata = consumer.list_topics(topic, timeout=WAIT_S)
        if metadata.topics[topic].error is not None:
            return 0  # never created: nothing could have been written
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("case", ["SASL_SSL/PLAIN", "SASL_SSL/SCRAM-SHA-512", "SASL_PLAINTEXT/SCRAM-SHA-512"])
def test_a_wrong_password_and_an_unknown_user_get_the_same_refusal_and_write_nothing(secured, case):
    topic = unique_topic("denied")
    messages = []
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret")):
        left, errors = delivered(secured.client(case, **{"sasl.username": user, "sasl.password": password}), topic)
        assert left == 1
        refusal = next(e for e in errors if "SASL authentication error" in e)
        messages.append(refusal.split("SASL authentication error: ")[1].split(" (after")[0])
    assert messages[0] == messages[1]
    assert messages[0].startswith("Authentication failed")
    assert end_offset(secured, topic) == 0
    # the whole log: read_log's tail may have scrolled past it (__consumer_offsets' 50 partitions)
    assert "Failed authentication with 127.0.0.1:" in secured.broker.log_path.read_text(errors="replace")


class TlsRawClient(RawClient):
    def __init__(self, bootstrap: str, context: ssl.SSLContext, timeout: float = 10):
        super().__init__(bootstrap, timeout)
        self.sock = context.wrap_socket(self.sock, server_hostname="127.0.0.1")


def handshake(client: RawClient, mechanism: str, version: int = 1):
    return client.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def test_sasl_on_the_wire_error_codes_and_the_v0_raw_token_exchange(secured):
    with RawClient(secured.address("SASL_PLAINTEXT")) as client:
        assert (
            client.request(
                ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            ).error_code
            == 0
        )
        response = handshake(client, "PLAIN")
        assert (response.error_code, list(response.mechanisms)) == (0, ["PLAIN", "SCRAM-SHA-512"])
        refused = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0wrong"})
        assert (refused.error_code, refused.error_message) == (
            SASL_FAILED,
            "Authentication failed: Invalid username or password",
        )
        assert client.closed_by_peer()
    with RawClient(secured.address("SASL_PLAINTEXT")) as client:
        response = handshake(client, "SCRAM-SHA-256")  # not offered on this listener
        assert (response.error_code, list(response.mechanisms)) == (33, ["PLAIN", "SCRAM-SHA-512"])
        assert client.closed_by_peer()
    with RawClient(secured.address("SASL_PLAINTEXT")) as client:  # v0: raw tokens without Kafka headers
        assert handshake(client, "PLAIN", version=0).error_code == 0
        token = b"\0carol\0carol-secret"
        client.send_bytes(struct.pack(">i", len(token)) + token)
        assert client.read_frame() == b""  # PLAIN's empty server token
        assert client.request(ApiKey.METADATA, 4, {"topics": [], "allow_auto_topic_creation": False}).brokers
        again = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        assert again.error_code == 34  # ILLEGAL_SASL_STATE once logged in
    with RawClient(secured.address("PLAINTEXT")) as client:
        assert handshake(client, "PLAIN").error_code == 34  # no SASL on a PLAINTEXT listener


def test_a_request_before_authentication_closes_only_that_connection(secured):
    with RawClient(secured.address("SASL_PLAINTEXT")) as client:
        client.send_request(ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert client.closed_by_peer()
    context = ssl.create_default_context(cafile=str(secured.certs.ca))
    with TlsRawClient(secured.address("SASL_SSL"), context) as client:
        client.send_request(
            ApiKey.PRODUCE, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": []}
        )
        assert client.closed_by_peer()
    assert "PRODUCE request before SASL authentication completed" in secured.broker.read_log()
    with RawClient(secured.address("SASL_PLAINTEXT")) as client:  # the broker serves others as before
        assert handshake(client, "PLAIN").error_code == 0


def test_a_plaintext_hello_on_a_tls_port_gets_no_kafka_answer(secured):
    with RawClient(secured.address("SSL")) as client:
        client.send_request(ApiKey.API_VERSIONS, 0, {})
        with pytest.raises((ConnectionClosed, AssertionError, TimeoutError)):
            client.read_frame(timeout=5)  # a TLS alert, then the end of the connection


@pytest.mark.parametrize("who", ["no certificate", "another CA's certificate", "an expired certificate"])
def test_ssl_client_auth_required_refuses(secured, who):
    certs = secured.certs
    context = ssl.create_default_context(cafile=str(certs.ca))
    if who == "another CA's certificate":
        context.load_cert_chain(str(certs.stranger_cert), str(certs.stranger_key))
    elif who == "an expired certificate":
        context.load_cert_chain(str(certs.expired_cert), str(certs.expired_key))
    with pytest.raises((ssl.SSLError, ConnectionClosed, ConnectionResetError, BrokenPipeError)):
        with TlsRawClient(secured.address("MTLS"), context) as client:  # TLS 1.3 reports it at the first read
            client.request(ApiKey.API_VERSIONS, 0, {})
    topic = unique_topic("mtls")
    config = {
        "bootstrap.servers": secured.address("MTLS"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
    }
    if who != "no certificate":
        key = certs.stranger_key if who.startswith("another") else certs.expired_key
        cert = certs.stranger_cert if who.startswith("another") else certs.expired_cert
        config.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
    left, errors = delivered(config, topic)
    assert left == 1 and errors
    assert end_offset(secured, topic) == 0
    with TlsRawClient(secured.address("SSL"), ssl.create_default_context(cafile=str(certs.ca))) as client:
        assert client.request(ApiKey.API_VERSIONS, 0, {}).error_code == 0  # the broker keeps serving others


def test_scram_credential_admin_errors(secured):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    cases = {
        "few": UserScramCredentialUpsertion("few", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw"),
        "ghost": UserScramCredentialDeletion("ghost", ScramMechanism.SCRAM_SHA_512),
    }
    codes = {}
    for user, future in admin.alter_user_scram_credentials(list(cases.values()), request_timeout=WAIT_S).items():
        with pytest.raises(KafkaException) as info:
            future.result(timeout=WAIT_S)
        codes[user] = info.value.args[0].name()
    assert codes == {"few": "UNACCEPTABLE_CREDENTIAL", "ghost": "RESOURCE_NOT_FOUND"}
    described = admin.describe_user_scram_credentials(["alice"], request_timeout=WAIT_S)["alice"].result(WAIT_S)
    assert sorted((i.mechanism.value, i.iterations) for i in described.scram_credential_infos) == [(1, 8192), (2, 4096)]
    with pytest.raises(KafkaException) as info:
        admin.describe_user_scram_credentials(["zed"], request_timeout=WAIT_S)["zed"].result(WAIT_S)
    assert info.value.args[0].name() == "RESOURCE_NOT_FOUND"


def test_secrets_are_reported_as_sensitive_nulls(secured):
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    future = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")], request_timeout=WAIT_S)
    entries = next(iter(future.values())).result(timeout=WAIT_S)
    assert entries["ssl.key.password"].is_sensitive and entries["ssl.key.password"].value is None
    assert entries["ssl.keystore.location"].value == str(secured.certs.broker)
