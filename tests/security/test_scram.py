"""SCRAM: Kafka's credential text, RFC 7677's test vector byte for byte, and the login rules Kafka's server has."""

import base64
import hashlib
import hmac

import pytest
from scramp import ScramClient

from strom.security.scram import (
    AuthenticationFailed,
    ScramClientExchange,
    ScramCredential,
    ScramServerExchange,
    invalid_credentials_message,
)

DECOY = b"k" * 32


def test_credential_text_is_kafkas_layout():
    credential = ScramCredential(b"salt-bytes-123", b"\x01" * 32, b"\x02" * 32, 4096)
    text = credential.to_text()
    assert text == (
        "salt=c2FsdC1ieXRlcy0xMjM=,stored_key=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=,"
        "server_key=AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=,iterations=4096"
    )
    assert ScramCredential.from_text(text) == credential
    with pytest.raises(ValueError):
        ScramCredential.from_text("salt=AAAA,iterations=4096")


def test_rfc7677_test_vector():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServerExchange(
        "SCRAM-SHA-256", {"user": credential}.get, DECOY, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    first, done = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert (first, done) == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        False,
    )
    final, done = server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert (final, done) == (b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", True)
    assert server.username == "user"


def _login(mechanism: str, credentials: dict, user: str, password: str) -> str:
    client = ScramClient([mechanism], user, password)
    server = ScramServerExchange(mechanism, credentials.get, DECOY)
    first, _ = server.step(client.get_client_first().encode())
    client.set_server_first(first.decode())
    final, done = server.step(client.get_client_final().encode())
    client.set_server_final(final.decode())  # the client checks the server's signature too
    assert done
    return server.username


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_scramp_client_logs_in_and_a_wrong_password_fails_like_an_unknown_user(mechanism):
    credentials = {"alice": ScramCredential.from_password(mechanism, "alice-secret", 8192)}
    assert _login(mechanism, credentials, "alice", "alice-secret") == "alice"
    messages = []
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret")):
        with pytest.raises(AuthenticationFailed) as info:
            _login(mechanism, credentials, user, password)
        messages.append(str(info.value))
    assert messages == [invalid_credentials_message(mechanism)] * 2


def test_an_unknown_user_gets_a_stable_salt_and_fails_only_at_the_proof():
    def server_first(user: str) -> bytes:
        first, done = ScramServerExchange("SCRAM-SHA-512", {}.get, DECOY).step(f"n,,n={user},r=abc".encode())
        assert not done
        return first.split(b",", 1)[1]  # s=...,i=... without the random nonce

    assert server_first("ghost") == server_first("ghost") != server_first("phantom")


def test_a_client_final_nonce_that_ends_with_the_servers_is_accepted_as_kafka_does():
    """librdkafka 2.0.2 (Debian's kcat) puts its own nonce in front of the server's again."""
    credential = ScramCredential.from_password("SCRAM-SHA-512", "pw", 4096)
    server = ScramServerExchange("SCRAM-SHA-512", {"u": credential}.get, DECOY)
    first, _ = server.step(b"n,,n=u,r=cnonce")
    nonce = dict(part.split("=", 1) for part in first.decode().split(","))["r"]
    without_proof = f"c=biws,r=cnonce{nonce}"
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", credential.salt, 4096)
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    auth = f"n=u,r=cnonce,{first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    final, done = server.step(f"{without_proof},p={proof}".encode())
    assert done and final.startswith(b"v=")


@pytest.mark.parametrize("first", [b"n,,n=u,r=x,tokenauth=true", b"p=tls-unique,,n=u,r=x", b"n,,r=x", b"\xff"])
def test_tokens_kafka_refuses(first):
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    with pytest.raises(AuthenticationFailed):
        ScramServerExchange("SCRAM-SHA-256", {"u": credential}.get, DECOY).step(first)


def test_saslname_escapes_are_undone():
    credential = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    assert _login("SCRAM-SHA-256", {"a,b=c": credential}, "a,b=c", "pw") == "a,b=c"


def test_the_broker_side_client_logs_in_with_the_broker_side_server():
    credential = ScramCredential.from_password("SCRAM-SHA-512", "admin-secret")
    client = ScramClientExchange("SCRAM-SHA-512", "admin", "admin-secret")
    server = ScramServerExchange("SCRAM-SHA-512", {"admin": credential}.get, DECOY)
    reply, _ = server.step(client.first())
    final, done = server.step(client.respond(reply))
    assert done and client.respond(final) is None
