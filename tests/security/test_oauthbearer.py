"""SASL/OAUTHBEARER without a broker: the client message, both validators, the exchange and the config checks.

Tokens are made here: unsigned JWS by hand, signed ones with PyJWT and an RSA key generated per run.
"""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from strom.security.oauthbearer import (
    MALFORMED,
    InvalidToken,
    JwksKeys,
    OAuthBearerExchange,
    SecuredValidator,
    UnsecuredValidator,
    parse_client_response,
)
from strom.security.scram import AuthenticationFailed
from strom.server.config import BrokerConfig
from strom.storage.log_config import ConfigError

NOW_MS = 1_800_000_000_000
NOW = NOW_MS // 1000
SECURED = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def b64(value: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsigned(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}.{signature}"


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    pairs = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{pairs}\x01".encode()


ALICE = {"sub": "alice", "iat": NOW - 10, "exp": NOW + 60}


# -- the client's message ----------------------------------------------------------------------------


def test_client_response_with_authzid_and_extensions():
    parsed = parse_client_response(message("a.b.", "al=2Cice", traceId="x-1", tenant="blue"))
    assert (parsed.token, parsed.authzid, parsed.extensions) == ("a.b.", "al,ice", {"traceId": "x-1", "tenant": "blue"})
    assert parse_client_response(b"n,,\x01auth=bearer  t.u.v\x01\x01").token == "t.u.v"  # scheme is case-insensitive


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"n,,\x01auth=Bearer a.b.\x01",  # no final \x01
        b"y,,\x01auth=Bearer a.b.\x01\x01",  # not the GS2 "n" flag
        b"n,,\x01auth=Basic a.b.\x01\x01",
        b"n,,\x01auth=Bearer a b\x01\x01",
        b"n,,\x01traceId=1\x01\x01",  # no auth
        b"n,,\x01auth=Bearer a.b.\x01bad-key=1\x01\x01",
        b"n,,\x01auth=Bearer \xff\x01\x01",
    ],
)
def test_a_malformed_client_message_gets_kafkas_generic_refusal(data):
    with pytest.raises(AuthenticationFailed) as info:
        OAuthBearerExchange(UnsecuredValidator({})).step(data)
    assert str(info.value) == MALFORMED


# -- Kafka's unsecured validator -----------------------------------------------------------------------


def test_unsecured_token_gives_principal_expiry_and_scope():
    token = UnsecuredValidator({}).validate(unsigned({**ALICE, "scope": ["read", " write "]}), NOW_MS)
    assert (token.principal, token.expires_ms, token.scope) == ("alice", (NOW + 60) * 1000, {"read", "write"})
    assert UnsecuredValidator({}).validate(unsigned({**ALICE, "scope": "read write"}), NOW_MS).scope == {"read write"}
    custom = UnsecuredValidator({"unsecuredValidatorPrincipalClaimName": "upn"})
    assert custom.validate(unsigned({"upn": "carol", "exp": NOW + 1}), NOW_MS).principal == "carol"


@pytest.mark.parametrize(
    "token, reason",
    [
        (unsigned({**ALICE, "exp": NOW - 1}), "Expiration Time"),
        (unsigned({"iat": NOW, "exp": NOW + 60}), "Required claim missing: sub"),
        (unsigned({"sub": "alice", "iat": NOW}), "Required claim missing: exp"),
        (unsigned({**ALICE, "sub": 7}), "non-blank string"),
        (unsigned({**ALICE, "iat": NOW + 30}), "Issued At"),
        (unsigned({**ALICE, "exp": "soon"}), "not of type Number"),
        (unsigned(ALICE, header={"alg": "RS256"}), "must have 'none'"),
        (unsigned(ALICE, signature="c2ln"), "must not contain a digital signature"),
        ("abc..def", "contains '..'"),
        ("abc.def", "3 dot-separated"),
    ],
)
def test_unsecured_refusals(token, reason):
    with pytest.raises(InvalidToken) as info:
        UnsecuredValidator({}).validate(token, NOW_MS)
    assert reason in info.value.reason
    assert info.value.json() == '{"status":"invalid_token"}'


def test_unsecured_clock_skew_and_required_scope():
    late = unsigned({**ALICE, "exp": NOW - 1})
    assert UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "5000"}).validate(late, NOW_MS)
    strict = UnsecuredValidator({"unsecuredValidatorRequiredScope": "read write"})
    with pytest.raises(InvalidToken) as info:
        strict.validate(unsigned({**ALICE, "scope": ["read"]}), NOW_MS)
    assert info.value.json() == '{"status":"insufficient_scope", "scope":"[read, write]"}'  # byte for byte Kafka's
    with pytest.raises(ConfigError, match="unsecuredValidatorAllowableClockSkewMs"):
        UnsecuredValidator({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "k")


def test_exchange_answers_the_rfc7628_error_then_fails_on_the_clients_acknowledgement():
    exchange = OAuthBearerExchange(UnsecuredValidator({}))
    reply, done = exchange.step(message(unsigned({**ALICE, "exp": 1})))
    assert (reply, done) == (b'{"status":"invalid_token"}', False)
    with pytest.raises(AuthenticationFailed, match=r'^\{"status":"invalid_token"\}$'):
        exchange.step(b"\x01")
    good = OAuthBearerExchange(UnsecuredValidator({}))
    assert good.step(message(unsigned({"sub": "alice", "exp": time.time() + 60}), traceId="7")) == (b"", True)
    assert (good.username, good.extensions) == ("alice", {"traceId": "7"})
    with pytest.raises(AuthenticationFailed, match=r"authorization id \(bob\).*\(alice\)"):
        OAuthBearerExchange(UnsecuredValidator({})).step(message(unsigned({"sub": "alice", "exp": NOW * 2}), "bob"))


# -- KIP-768: signed tokens checked against a JWKS --------------------------------------------------------


@pytest.fixture(scope="module")
def keys():
    return {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048) for kid in ("k1", "k2")}


def jwks(keys, *kids: str) -> str:
    out = []
    for kid in kids:
        entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys[kid].public_key()))
        out.append({**entry, "kid": kid, "use": "sig", "alg": "RS256"})
    return json.dumps({"keys": out})


def signed(keys, kid: str = "k1", signer: str | None = None, **claims) -> str:
    body = {"sub": "alice", "iat": NOW - 10, "exp": NOW + 60, "aud": "strom", "iss": "https://idp.test", **claims}
    return jwt.encode(body, keys[signer or kid], algorithm="RS256", headers={"kid": kid})


def validator(keys, *kids: str, **options) -> SecuredValidator:
    cache = JwksKeys("http://127.0.0.1:1/jwks", 3_600_000, 100, 10_000)
    cache.load(jwks(keys, *kids))
    settings = {"audience": ("other", "strom"), "issuer": "https://idp.test", "skew_s": 30, **options}
    return SecuredValidator(cache, settings["audience"], settings["issuer"], "sub", "scope", settings["skew_s"])


def test_signed_token_is_accepted_with_its_claims(keys):
    token = validator(keys, "k1").validate(signed(keys, scope="read"), NOW_MS)
    assert (token.principal, token.expires_ms, token.scope) == ("alice", (NOW + 60) * 1000, {"read"})
    assert validator(keys, "k1", audience=None, issuer=None).validate(signed(keys, aud="x", iss="y"), NOW_MS)


@pytest.mark.parametrize(
    "case, reason",
    [
        ("expired", "The token expired"),
        ("not yet", "not valid yet"),
        ("audience", "Audience doesn't match"),
        ("issuer", "Invalid issuer"),
        ("signature", "Signature verification failed"),
        ("kid", "no key with kid 'k2'"),
        ("no iat", 'Token is missing the "iat" claim'),
        ("alg none", "algorithm 'none' may not be used"),
        ("hmac with the public key", "algorithm 'HS256' may not be used"),
        ("garbage", "Could not parse"),
    ],
)
def test_signed_token_refusals(keys, case, reason):
    tokens = {
        "expired": lambda: signed(keys, exp=NOW - 31),  # beyond the 30 s of skew
        "not yet": lambda: signed(keys, nbf=NOW + 31),
        "audience": lambda: signed(keys, aud="somebody-else"),
        "issuer": lambda: signed(keys, iss="https://evil.test"),
        "signature": lambda: signed(keys, kid="k1", signer="k2"),
        "kid": lambda: signed(keys, kid="k2"),
        "no iat": lambda: jwt.encode(
            {"sub": "alice", "exp": NOW + 60, "aud": "strom", "iss": "https://idp.test"},
            keys["k1"],
            algorithm="RS256",
            headers={"kid": "k1"},
        ),
        "alg none": lambda: unsigned(
            {**ALICE, "aud": "strom", "iss": "https://idp.test"}, {"alg": "none", "kid": "k1"}
        ),
        "hmac with the public key": lambda: forged_hmac(keys),
        "garbage": lambda: "not-a-jwt",
    }
    with pytest.raises(InvalidToken) as info:
        validator(keys, "k1").validate(tokens[case](), NOW_MS)
    assert reason in info.value.reason
    assert info.value.json() == '{"status":"invalid_token"}'


def forged_hmac(keys) -> str:
    """The classic confusion attack: HS256 keyed with the RSA public key's PEM."""
    from cryptography.hazmat.primitives import serialization

    pem = (
        keys["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    header = b64({"alg": "HS256", "kid": "k1", "typ": "JWT"})
    body = b64({**ALICE, "aud": "strom", "iss": "https://idp.test"})
    import hashlib
    import hmac

    mac = hmac.new(pem, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def test_an_unknown_kid_wakes_the_refresher_once_a_minute(keys):
    checker = validator(keys, "k1")
    woken = []
    for _ in range(2):
        with pytest.raises(InvalidToken, match="no key with kid 'k2'"):
            checker.validate(signed(keys, kid="k2"), NOW_MS)
        woken.append(checker.keys._wake.is_set())
        checker.keys._wake.clear()  # what run() does before each fetch
    assert woken == [True, False]  # one expedited fetch per unknown kid a minute, however many logins name it
    checker.keys.load(jwks(keys, "k1", "k2"))  # the rotated JWKS, as the next fetch reads it
    assert checker.validate(signed(keys, kid="k2"), NOW_MS).principal == "alice"


# -- configuration ---------------------------------------------------------------------------------------


def config(**overrides: str) -> BrokerConfig:
    return BrokerConfig.from_mapping(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,OAUTH://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OAUTH:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            **overrides,
        }
    )


def test_secured_validator_settings_per_listener_and_mechanism(tmp_path, keys):
    from strom.security.listeners import listener_security

    path = tmp_path / "jwks.json"
    path.write_text(jwks(keys, "k1", "k2"))
    security = listener_security(
        config(
            **{
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-512",
                "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SECURED,
                "listener.name.oauth.oauthbearer.sasl.jaas.config": f"{LOGIN} required ;",
                "sasl.oauthbearer.jwks.endpoint.url": "https://ignored.test/jwks",
                "listener.name.oauth.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
                "listener.name.oauth.sasl.oauthbearer.expected.audience": "a,b",
                "sasl.oauthbearer.clock.skew.seconds": "5",
            }
        ),
        "OAUTH",
    )
    checker = security.oauthbearer
    assert isinstance(checker, SecuredValidator)
    assert (checker.keys.url, sorted(checker.keys.keys)) == (path.as_uri(), ["k1", "k2"])
    assert (checker.audience, checker.issuer, checker.skew_s, checker.sub_claim) == (["a", "b"], None, 5, "sub")
    assert security.mechanisms == ("OAUTHBEARER", "SCRAM-SHA-512")


@pytest.mark.parametrize(
    "overrides, key, text",
    [
        (
            {"listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SECURED},
            "sasl.oauthbearer.jwks.endpoint.url",
            "needs it",
        ),
        (
            {
                "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SECURED,
                "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp.test/jwks",
            },
            "sasl.oauthbearer.jwks.endpoint.url",
            "http, https or file URL",
        ),
        (
            {"listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"},
            "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class",
            "com.example.Mine",
        ),
        (
            {
                "listener.name.oauth.oauthbearer.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required ;"
                )
            },
            "listener.name.oauth.oauthbearer.sasl.jaas.config",
            "needs org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        ),
        (
            {
                "listener.name.oauth.oauthbearer.sasl.jaas.config": (
                    f'{LOGIN} required unsecuredValidatorAllowableClockSkewMs="soon";'
                )
            },
            "listener.name.oauth.oauthbearer.sasl.jaas.config",
            "non-negative integer",
        ),
        (
            {
                "inter.broker.listener.name": "OAUTH",
                "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            },
            "sasl.mechanism.inter.broker.protocol",
            "OAUTHBEARER serves clients only",
        ),
    ],
)
def test_config_errors_name_the_key(overrides, key, text):
    with pytest.raises(ConfigError) as info:
        config(**overrides)
    assert info.value.key == key
    assert text in str(info.value)


def test_a_missing_jwks_file_stops_startup_naming_the_key(tmp_path):
    from strom.security.listeners import listener_security

    url = (tmp_path / "absent.json").as_uri()
    checked = config(
        **{
            "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class": SECURED,
            "sasl.oauthbearer.jwks.endpoint.url": url,
        }
    )
    with pytest.raises(ConfigError) as info:
        listener_security(checked, "OAUTH")
    assert info.value.key == "sasl.oauthbearer.jwks.endpoint.url" and "absent.json" in str(info.value)


def raw_claims(text: bytes) -> str:
    return f"{b64({'alg': 'none'})}.{base64.urlsafe_b64encode(text).rstrip(b'=').decode()}."


@pytest.mark.parametrize(
    "token",
    [
        raw_claims(b'{"sub":"a","exp":Infinity}'),
        raw_claims(b'{"sub":"a","exp":NaN}'),
        raw_claims(b"[" * 100_000),
        unsigned({"sub": "a", "exp": 10**30}),
    ],
)
def test_hostile_claims_are_an_invalid_token_not_an_error(token):
    exchange = OAuthBearerExchange(UnsecuredValidator({}))
    assert exchange.step(message(token)) == (b'{"status":"invalid_token"}', False)


def test_a_jwks_without_a_usable_signature_key_is_refused(keys):
    cache = JwksKeys("file:///unused", 1000, 100, 1000)
    with pytest.raises(ValueError, match="no usable signature key"):
        cache.load(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}))  # HMAC keys are never used
    with pytest.raises(ValueError, match="not a JWKS document"):
        cache.load("[]")
    entry = json.loads(jwks(keys, "k1"))["keys"][0]
    assert cache.load(json.dumps({"keys": [{**entry, "use": "enc", "kid": "e"}, entry]})) == 1  # "enc" keys skipped
    assert list(cache.keys) == ["k1"]


def test_the_refresher_fetches_over_http_backs_off_and_stops(keys):
    import asyncio
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    served = {"kids": ["k1"]}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = jwks(keys, *served["kids"]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/jwks"

    async def until(predicate) -> None:
        for _ in range(400):  # 20 s at most
            if predicate():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("condition not met within 20 s")

    async def main() -> None:
        stop = asyncio.Event()
        cache = JwksKeys(url, 100, 10, 50)  # refresh every 100 ms
        task = asyncio.create_task(cache.run(stop))
        await until(lambda: cache.loaded)
        served["kids"] = ["k1", "k2"]  # the provider rotates a key in: the periodic refresh finds it
        await until(lambda: "k2" in cache.keys)
        down = JwksKeys(url.replace(str(server.server_address[1]), "1"), 100, 10, 50)  # nothing listens on port 1
        failing = asyncio.create_task(down.run(stop))
        await asyncio.sleep(0.3)  # several failed fetches, backing off: no exception escapes
        assert not down.loaded and not failing.done()
        stop.set()
        await asyncio.wait_for(asyncio.gather(task, failing), 10)

    try:
        asyncio.run(main())
    finally:
        server.shutdown()
        server.server_close()
