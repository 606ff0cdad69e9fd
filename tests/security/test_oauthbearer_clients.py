"""SASL/OAUTHBEARER with real clients against a real broker process.

One broker, three listeners: PLAINTEXT (User:ANONYMOUS, a super user, sets ACLs and checks what was
written), UNSECURED (SASL_PLAINTEXT, Kafka's default validator: unsigned JWS, as librdkafka's
``sasl.oauthbearer.config=principal=...`` makes them) and SECURED (SASL_SSL, KIP-768: RS256 tokens
signed here with RSA keys generated per run, checked against a JWKS that a small HTTPS server on
127.0.0.1 serves with the test CA's certificate, with expected audience and issuer). The ACL
authorizer is on: User:alice may use topics and groups prefixed ``oa-``; User:bob may do nothing.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from tests.broker_process import BrokerProcess
from tests.integration.clients import (
    WAIT_S,
    Msg,
    RawClient,
    aiokafka_poll,
    assert_same,
    confluent_group_consume,
    confluent_produce,
    kafka_python_poll,
    kafka_python_subscribed,
    kcat,
    kcat_consume,
    sample_messages,
    unique_topic,
    wait_until,
)
from tests.tls_certs import make_certificates

LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
SASL_FAILED, TOPIC_AUTHORIZATION_FAILED = 58, 29
INVALID = '{"status":"invalid_token"}'
AUDIENCE = "strom-brokers"


class Issuer:
    """An identity provider in miniature: RSA keys, the JWKS it publishes over HTTP, tokens it signs."""

    def __init__(self, certs) -> None:
        self.keys = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in ("k1", "k2", "x")}
        self.published = ["k1"]
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = issuer.jwks().encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                """The client-credentials grant (RFC 6749 4.4) of KIP-768's clients: HTTP Basic client id and secret."""
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                client = base64.b64decode(self.headers.get("Authorization", "Basic ")[6:]).decode().partition(":")
                if client[0] not in issuer.clients or issuer.clients[client[0]] != client[2]:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps(
                    {"access_token": issuer.token(client[0]), "token_type": "Bearer", "expires_in": 600}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.clients = {"alice": "alice-secret"}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(certs.broker))  # the test CA's certificate for 127.0.0.1
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def jwks(self) -> str:
        keys = []
        for kid in list(self.published):
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
            keys.append({**public, "kid": kid, "use": "sig", "alg": "RS256"})
        return json.dumps({"keys": keys})

    def token(self, sub: str = "alice", kid: str = "k1", signer: str | None = None, lifetime: float = 600, **claims):
        now = time.time()
        body = {"sub": sub, "iat": int(now), "exp": int(now + lifetime), "aud": AUDIENCE, "iss": self.url, **claims}
        return jwt.encode(body, self.keys[signer or kid], algorithm="RS256", headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Secured:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], certs, issuer: Issuer):
        self.broker, self.ports, self.certs, self.issuer = broker, ports, certs, issuer

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log(self) -> str:
        return self.broker.log_path.read_text(errors="replace")

    def unsecured(self, principal: str, extra: str = "") -> dict:
        """librdkafka's own unsigned JWT (sasl.oauthbearer.config), as Kafka's quickstarts use it."""
        return {
            "bootstrap.servers": self.address("UNSECURED"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope=kafka extension_traceId=t1 {extra}".strip(),
        }

    def signed(self, make_token=None) -> dict:
        """librdkafka with an oauth_cb handing it tokens the issuer signed."""
        make = make_token or self.issuer.token

        def oauth_cb(_config: str) -> tuple[str, float]:
            token = make()
            expires = jwt.decode(token, options={"verify_signature": False})["exp"]
            # librdkafka will not send a token it is told has expired: the broker must be the one to refuse it
            return token, max(expires, time.time() + 60)

        return {
            "bootstrap.servers": self.address("SECURED"),
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.certs.ca),
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": oauth_cb,
        }


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    issuer = Issuer(certs)
    ports = {name: free_port() for name in ("PLAINTEXT", "UNSECURED", "SECURED")}
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,SECURED:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(certs.broker),
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        # Kafka's quickstart line: the unsecuredLogin* options are the broker's own (client) login, unused here
        "listener.name.unsecured.oauthbearer.sasl.jaas.config": f"{LOGIN} required unsecuredLoginStringClaim_sub=admin;",
        # as Kafka: the TLS settings for an https JWKS endpoint are options of the login module
        "listener.name.secured.oauthbearer.sasl.jaas.config": f'{LOGIN} required ssl.truststore.location="{certs.ca}";',
        "listener.name.secured.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": f"{issuer.url}/jwks",
        "sasl.oauthbearer.expected.audience": f"somebody,{AUDIENCE}",
        "sasl.oauthbearer.expected.issuer": issuer.url,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    try:
        with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", overrides) as broker:
            wait_until(lambda: "verification keys read from" in broker.read_log(), what="the JWKS fetch")
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"})
            allow = AclPermissionType.ALLOW
            bindings = [
                AclBinding(kind, "oa-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL, allow)
                for kind in (ResourceType.TOPIC, ResourceType.GROUP)
            ]
            for future in admin.create_acls(bindings, request_timeout=WAIT_S).values():
                future.result(timeout=WAIT_S)
            yield Secured(broker, ports, certs, issuer)
    finally:
        issuer.close()


def create_topic(secured: Secured, prefix: str = "oa-") -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique_topic(prefix)
    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=WAIT_S)[topic].result(timeout=WAIT_S)
    return topic


def end_offset(secured: Secured, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": secured.address("PLAINTEXT"), "group.id": "oa-check"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=WAIT_S)[1]
    finally:
        consumer.close()


def refused_produce(config: dict, topic: str, seconds: float = 4) -> list[str]:
    """Produce one message that must not arrive; the client's errors (delivery and connection)."""
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer(
        {
            **config,
            "error_cb": lambda e: errors.append(f"{e.name()}: {e.str()}"),
            "message.timeout.ms": int(seconds * 1000),
            "logger": None,
            "log_level": 0,
        }
    )
    producer.produce(topic, b"must not arrive", on_delivery=lambda e, m: errors.append(e.name() if e else "delivered"))
    producer.flush(seconds + 2)
    producer.purge()
    producer.flush(1)
    return errors


def without_servers(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "bootstrap.servers"}


# -- real clients ------------------------------------------------------------------------------------


def test_librdkafka_unsecured_jwt_is_user_alice_and_acls_apply_to_the_sub(secured):
    topic = create_topic(secured)
    sent = sample_messages(10) + [Msg(b"big", bytes(range(256)) * 2000, (), 1_700_000_100_000)]
    config = secured.unsecured("alice")
    assert confluent_produce(config["bootstrap.servers"], topic, sent, **without_servers(config)) == list(
        range(len(sent))
    )
    assert_same(confluent_group_consume(config, topic, len(sent), f"oa-{topic}"), sent)
    errors = refused_produce(secured.unsecured("bob"), topic)
    assert "TOPIC_AUTHORIZATION_FAILED" in errors and "delivered" not in errors
    assert end_offset(secured, topic) == len(sent)
    assert "Principal = User:bob is Denied operation" in secured.log()


def test_librdkafka_oauth_cb_with_signed_tokens_over_sasl_ssl(secured):
    topic = create_topic(secured)
    sent = sample_messages(12)
    config = secured.signed()
    assert confluent_produce(config["bootstrap.servers"], topic, sent, **without_servers(config)) == list(
        range(len(sent))
    )
    assert_same(confluent_group_consume(config, topic, len(sent), f"oa-{topic}"), sent)
    errors = refused_produce(secured.signed(lambda: secured.issuer.token("bob")), topic)
    assert "TOPIC_AUTHORIZATION_FAILED" in errors and "delivered" not in errors


def test_librdkafka_oidc_client_credentials_from_the_issuers_token_endpoint(secured):
    """KIP-768 end to end: librdkafka fetches its token itself (sasl.oauthbearer.method=oidc)."""
    topic = create_topic(secured)
    sent = sample_messages(5)
    config = {
        "bootstrap.servers": secured.address("SECURED"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secured.certs.ca),
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": f"{secured.issuer.url}/token",
        "sasl.oauthbearer.client.id": "alice",
        "sasl.oauthbearer.client.secret": "alice-secret",
        "https.ca.location": str(secured.certs.ca),
    }
    assert confluent_produce(config["bootstrap.servers"], topic, sent, **without_servers(config)) == list(
        range(len(sent))
    )
    assert_same(confluent_group_consume(config, topic, len(sent), f"oa-{topic}"), sent)


def test_kcat_with_librdkafka_2_0_unsecured_jwt(secured):
    """Debian's kcat (librdkafka 2.0.2) with the settings of Kafka's OAUTHBEARER quickstart."""
    topic = create_topic(secured)
    security = []
    for key, value in without_servers(secured.unsecured("alice")).items():
        security += ["-X", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    bootstrap = secured.address("UNSECURED")
    kcat(["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", ":", *security], stdin=b"k1:v1\nk2:v2\n")
    got = kcat_consume(bootstrap, topic, 0, "beginning", *security)
    assert [(m.key, m.value) for m in got] == [(b"k1", b"v1"), (b"k2", b"v2")]


def test_kafka_python_and_aiokafka_token_providers(secured):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider as AsyncProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return secured.issuer.token()

        def extensions(self) -> dict[str, str]:
            return {"traceId": "kp-1"}

    class AsyncTokens(AsyncProvider):
        async def token(self) -> str:
            return secured.issuer.token()

    context = ssl.create_default_context(cafile=str(secured.certs.ca))
    common = {
        "bootstrap_servers": secured.address("SECURED"),
        "security_protocol": "SASL_SSL",
        "ssl_context": context,
        "sasl_mechanism": "OAUTHBEARER",
    }
    topic = create_topic(secured)
    sent = sample_messages(6)
    producer = KafkaProducer(**common, sasl_oauth_token_provider=Provider(), max_block_ms=WAIT_S * 1000)
    try:
        futures = [
            producer.send(topic, value=m.value, key=m.key, headers=list(m.headers) or None, timestamp_ms=m.timestamp)
            for m in sent
        ]
        producer.flush(timeout=WAIT_S)
        assert [f.get(timeout=WAIT_S).offset for f in futures] == list(range(len(sent)))
    finally:
        producer.close(timeout=5)
    consumer = kafka_python_subscribed(
        [topic], **common, sasl_oauth_token_provider=Provider(), group_id=f"oa-kp-{topic}", auto_offset_reset="earliest"
    )
    try:
        got = kafka_python_poll(consumer, len(sent), WAIT_S * 2)
    finally:
        consumer.close()
    assert_same(got, sent)

    async def with_aiokafka() -> list[Msg]:
        options = {**common, "sasl_oauth_token_provider": AsyncTokens()}
        producer = AIOKafkaProducer(**options, request_timeout_ms=WAIT_S * 1000)
        await asyncio.wait_for(producer.start(), WAIT_S)
        try:
            for m in sent:
                await asyncio.wait_for(
                    producer.send_and_wait(
                        topic2, value=m.value, key=m.key, timestamp_ms=m.timestamp, headers=list(m.headers) or None
                    ),
                    WAIT_S,
                )
        finally:
            await asyncio.wait_for(producer.stop(), WAIT_S)
        consumer = AIOKafkaConsumer(topic2, **options, group_id=f"oa-ak-{topic2}", auto_offset_reset="earliest")
        await asyncio.wait_for(consumer.start(), WAIT_S)
        try:
            out = await aiokafka_poll(consumer, len(sent), WAIT_S * 2)
        finally:
            await asyncio.wait_for(consumer.stop(), WAIT_S)
        return out

    topic2 = create_topic(secured)
    assert_same(asyncio.run(with_aiokafka()), sent)


# -- refusals -----------------------------------------------------------------------------------------


class TlsRawClient(RawClient):
    def __init__(self, secured: Secured):
        super().__init__(secured.address("SECURED"))
        context = ssl.create_default_context(cafile=str(secured.certs.ca))
        self.sock = context.wrap_socket(self.sock, server_hostname="127.0.0.1")


def client_message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def login(client: RawClient, token: str):
    assert client.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
    return client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": client_message(token)})


BAD_TOKENS = {
    "expired": lambda issuer: issuer.token(lifetime=-120),  # beyond the default 30 s of clock skew
    "wrong audience": lambda issuer: issuer.token(aud="somebody-else"),
    "wrong issuer": lambda issuer: issuer.token(iss="https://127.0.0.1:1"),
    "bad signature": lambda issuer: issuer.token(kid="k1", signer="x"),
    "unknown kid": lambda issuer: issuer.token(kid="x"),
}


@pytest.mark.parametrize("case", list(BAD_TOKENS))
def test_a_bad_token_gets_the_rfc7628_error_then_sasl_authentication_failed(secured, case):
    with TlsRawClient(secured) as client:
        challenge = login(client, BAD_TOKENS[case](secured.issuer))
        assert (challenge.error_code, bytes(challenge.auth_bytes)) == (0, INVALID.encode())
        failed = client.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert (failed.error_code, failed.error_message) == (SASL_FAILED, INVALID)
        assert client.closed_by_peer()
    with TlsRawClient(secured) as client:  # the broker keeps serving others
        good = login(client, secured.issuer.token())
        assert (good.error_code, bytes(good.auth_bytes)) == (0, b"")
        assert client.request(ApiKey.METADATA, 4, {"topics": [], "allow_auto_topic_creation": False}).brokers


def test_librdkafka_with_an_expired_token_writes_nothing(secured):
    topic = create_topic(secured)
    errors = refused_produce(secured.signed(lambda: secured.issuer.token(lifetime=-120)), topic)
    assert any("SASL authentication error" in e and INVALID in e for e in errors), errors
    assert "delivered" not in errors
    assert end_offset(secured, topic) == 0
    assert "Failed authentication with 127.0.0.1:" in secured.log()


def test_a_rotated_in_key_is_fetched_early_and_accepted(secured):
    secured.issuer.published = ["k1", "k2"]  # the provider publishes a new key and signs with it at once
    token = secured.issuer.token(kid="k2")

    def logs_in() -> bool:
        with TlsRawClient(secured) as client:
            return login(client, token).auth_bytes == b""  # refused at first: the JWKS held only k1

    wait_until(logs_in, what="a login with the rotated-in key")  # its kid woke the refresher: no hour's wait


# -- sessions end with their token (KIP-368) ------------------------------------------------------------


def unsigned(sub: str, lifetime: float) -> str:
    import base64

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = time.time()  # iat in whole seconds, as JWT NumericDates usually are (librdkafka's too)
    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': int(now), 'exp': now + lifetime})}."


def test_the_session_ends_with_the_token_and_reauthentication_keeps_the_principal(secured):
    metadata = {"topics": [], "allow_auto_topic_creation": False}
    with RawClient(secured.address("UNSECURED")) as client:
        answer = login(client, unsigned("alice", 2.5))
        assert answer.error_code == 0
        assert 0 < answer.session_lifetime.total_seconds() <= 2.5  # connections.max.reauth.ms is unset
        again = login(client, unsigned("alice", 600))  # re-authentication with a fresh token
        assert again.error_code == 0 and again.session_lifetime.total_seconds() > 500
        other = login(client, unsigned("bob", 600))
        assert other.error_code == SASL_FAILED
        assert "Cannot change principals during re-authentication from User:alice: User:bob" in other.error_message
    with RawClient(secured.address("UNSECURED")) as client:
        token_expires = time.monotonic() + 3
        assert login(client, unsigned("alice", 3)).error_code == 0
        assert client.request(ApiKey.METADATA, 4, metadata).brokers
        time.sleep(max(0.0, token_expires - time.monotonic()) + 0.5)  # past the token's exp; nothing is sent
        client.send_request(ApiKey.METADATA, 4, metadata)
        assert client.closed_by_peer()
    assert "SASL session of User:alice expired without re-authentication" in secured.log()


LIFE_S = 10


def test_librdkafka_reauthenticates_before_its_short_lived_tokens_expire(secured):
    from confluent_kafka import Consumer, Producer

    topic = create_topic(secured)
    expired_before = secured.log().count("SASL session of User:alice expired")
    lines: list[str] = []

    class Log:
        def log(self, level, msg, *args):
            lines.append(msg % args if args else msg)

        debug = info = warning = error = critical = exception = log

    # librdkafka renews its unsecured token at 80% of its life on a 1 s timer and re-authenticates at 90%
    # of the session: with 10 s tokens the new token is always there in time
    config = secured.unsecured("alice", f"lifeSeconds={LIFE_S}")
    producer = Producer({**config, "acks": "all"})
    consumer = Consumer(
        {
            **config,
            "group.id": f"oa-{topic}",
            "auto.offset.reset": "earliest",
            "debug": "security",
            "logger": Log(),
            "log_level": 7,
        }
    )
    sent: list[bytes] = []
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        started = time.monotonic()
        while time.monotonic() - started < LIFE_S + 2:  # past the first token's exp
            sent.append(f"m{len(sent)}".encode())
            producer.produce(topic, sent[-1])
            producer.poll(0)
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
        assert producer.flush(WAIT_S) == 0
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(sent) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    assert got == sent  # every record, in order, while sessions ended and were renewed
    assert any("Auth in state REAUTH" in line for line in lines), lines[-20:]
    lifetimes = [
        int(line.split("Received session lifetime ")[1].split()[0]) for line in lines if "session lifetime" in line
    ]
    assert lifetimes and max(lifetimes) <= LIFE_S * 1000  # sessions the token bounds (connections.max.reauth.ms unset)
    assert secured.log().count("SASL session of User:alice expired") == expired_before


def test_the_secured_validator_without_a_jwks_url_stops_startup_naming_the_key(tmp_path):
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,OAUTH://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
    }
    with pytest.raises(RuntimeError) as info:
        BrokerProcess(tmp_path / "data", overrides).start()
    assert "broker exited with 2" in str(info.value)
    assert "sasl.oauthbearer.jwks.endpoint.url" in str(info.value)


def test_signed_logins_go_on_after_the_listener_is_rebuilt_by_a_dynamic_config(secured):
    """A dynamic config that rebuilds the SECURED listener (KIP-226) keeps its OAUTHBEARER validator,
    with the JWKS keys it has read: signed tokens are accepted on new connections as before."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": secured.address("PLAINTEXT")})
    key = "listener.name.secured.sasl.enabled.mechanisms"

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        resource = ConfigResource(
            "broker", "0", incremental_configs=[ConfigEntry(key, value, incremental_operation=op)]
        )
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(WAIT_S)

    alter(AlterConfigOpType.SET, "OAUTHBEARER")
    try:
        assert "listener SECURED: new connections use its new TLS/SASL settings" in secured.log()
        topic = create_topic(secured)
        config = secured.signed()
        sent = sample_messages(3)
        assert confluent_produce(config["bootstrap.servers"], topic, sent, **without_servers(config)) == [0, 1, 2]
    finally:
        alter(AlterConfigOpType.DELETE, None)
