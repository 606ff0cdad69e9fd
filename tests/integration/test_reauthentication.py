"""SASL re-authentication (KIP-368): sessions that last connections.max.reauth.ms.

One broker with two SASL_PLAINTEXT listeners (PLAIN users alice and carol): SHORT takes the
broker-wide connections.max.reauth.ms=2000, LONG overrides it per listener and mechanism
(listener.name.long.plain.connections.max.reauth.ms). librdkafka re-authenticates on its own
before its session ends; a client that does not is disconnected at its first request after.
"""

from __future__ import annotations

import datetime
import threading
import time

import pytest

from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from tests.broker_process import BrokerProcess
from tests.integration.clients import RawClient, unique_topic

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" '
    'user_carol="carol-secret";'
)
LIFETIME_MS = 2000
SASL_FAILED, ILLEGAL_SASL_STATE = 58, 34


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    ports = {"SHORT": free_port(), "LONG": free_port()}
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "SHORT:SASL_PLAINTEXT,LONG:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SHORT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.short.plain.sasl.jaas.config": JAAS.replace(
            "required ", 'required username="alice" password="alice-secret" '
        ),
        "listener.name.long.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": str(LIFETIME_MS),
        "listener.name.long.plain.connections.max.reauth.ms": "600000",
    }
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", overrides) as process:
        process.ports = ports
        yield process


def login(client: RawClient, username: str, password: str):
    assert client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code == 0
    return client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{username}\0{password}".encode()})


def metadata(client: RawClient):
    return client.request(ApiKey.METADATA, 4, {"topics": [], "allow_auto_topic_creation": False})


def test_session_lifetime_is_answered_per_listener_and_mechanism(broker):
    for listener, expected in (("SHORT", LIFETIME_MS), ("LONG", 600000)):
        with RawClient(f"127.0.0.1:{broker.ports[listener]}") as client:
            answer = login(client, "alice", "alice-secret")
            assert answer.error_code == 0
            assert answer.session_lifetime == datetime.timedelta(milliseconds=expected)


def test_a_client_that_does_not_reauthenticate_is_disconnected_after_expiry(broker):
    with RawClient(f"127.0.0.1:{broker.ports['SHORT']}") as client:
        assert login(client, "alice", "alice-secret").error_code == 0
        assert metadata(client).brokers
        time.sleep(LIFETIME_MS / 1000 + 0.5)  # past the session's end; nothing is sent meanwhile
        client.send_request(ApiKey.METADATA, 4, {"topics": [], "allow_auto_topic_creation": False})
        assert client.closed_by_peer()
    assert "SASL session of User:alice expired without re-authentication" in broker.read_log()


def test_reauthenticating_keeps_the_connection_and_the_principal(broker):
    with RawClient(f"127.0.0.1:{broker.ports['SHORT']}") as client:
        assert login(client, "alice", "alice-secret").error_code == 0
        for _ in range(2):  # each re-authentication starts a new session of the full lifetime
            time.sleep(LIFETIME_MS / 1000 * 0.6)
            again = login(client, "alice", "alice-secret")
            assert (again.error_code, again.session_lifetime) == (0, datetime.timedelta(milliseconds=LIFETIME_MS))
            assert metadata(client).brokers  # served: 1.2 s after the first login's session has ended
    with RawClient(f"127.0.0.1:{broker.ports['SHORT']}") as client:
        assert login(client, "alice", "alice-secret").error_code == 0
        other = login(client, "carol", "carol-secret")
        assert other.error_code == SASL_FAILED
        assert "Cannot change principals during re-authentication from User:alice: User:carol" in other.error_message
        assert client.closed_by_peer()
    with RawClient(f"127.0.0.1:{broker.ports['SHORT']}") as client:
        assert login(client, "alice", "alice-secret").error_code == 0
        assert client.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}).error_code == ILLEGAL_SASL_STATE
        assert client.closed_by_peer()


def test_librdkafka_consumes_for_8_s_across_reauthentications(broker):
    from confluent_kafka import Consumer, Producer

    topic = unique_topic("reauth")
    lines: list[str] = []

    class Log:
        def log(self, level, msg, *args):
            lines.append(msg % args if args else msg)

        debug = info = warning = error = critical = exception = log

    security = {
        "bootstrap.servers": f"127.0.0.1:{broker.ports['SHORT']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "carol",
        "sasl.password": "carol-secret",
    }
    producer = Producer({**security, "acks": "all"})
    consumer = Consumer(
        {
            **security,
            "group.id": "reauth",
            "auto.offset.reset": "earliest",
            "debug": "security",
            "logger": Log(),
            "log_level": 7,
        }
    )
    sent: list[bytes] = []
    got: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            sent.append(f"m{len(sent)}".encode())
            producer.produce(topic, sent[-1])
            producer.poll(0.1)
        producer.flush(20)

    producer.produce(topic, b"first")
    assert producer.flush(20) == 0
    sent.append(b"first")
    thread = threading.Thread(target=produce, daemon=True)
    try:
        consumer.subscribe([topic])
        thread.start()
        started = time.monotonic()
        while time.monotonic() - started < 8:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
        stop.set()
        thread.join(30)
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        stop.set()
        consumer.close()
    assert got == sent  # every record, in order, with no gap while sessions were renewed
    assert len(sent) > 40
    reauthentications = [line for line in lines if "Auth in state REAUTH" in line]  # librdkafka's debug line
    assert len(reauthentications) >= 3, lines[-20:]
    assert "SASL session of User:carol expired" not in broker.read_log()
