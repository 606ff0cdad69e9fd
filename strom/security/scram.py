"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677): credentials in Kafka's layout, and both sides of the exchange.

A credential is what Kafka keeps in ZooKeeper under ``/config/users/<user>``, one entry per
mechanism, never the password::

    {"version":1,"config":{"SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

The server side follows Kafka's ScramSaslServer (see ScramServerExchange for why it is not
scramp's); the client side, which brokers use towards each other, is scramp's. The user name is
a SCRAM ``saslname`` (``=2C`` and ``=3D`` escapes), a delegation-token login (``tokenauth=true``
extension, user name the tokenId) is checked against the token's credential when the broker
has tokens enabled (strom.security.delegation_tokens), and an unknown user (or token) gets a
made-up salt and fails only at the proof, exactly like a wrong password, so a failed login does
not reveal whether the user exists.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from scramp import ScramClient, ScramException

log = logging.getLogger("strom.security")

# AlterUserScramCredentials' mechanism numbers (Kafka's ScramMechanism.type())
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_NUMBERS = {name: number for number, name in MECHANISM_IDS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096  # Kafka's minimum for both mechanisms
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials limit
DEFAULT_ITERATIONS = 4096


class AuthenticationFailed(Exception):
    """The client's login failed; the message is what the client is told (SASL_AUTHENTICATION_FAILED)."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils form; ValueError when a field is missing or malformed."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential ({exc})") from None

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials carries: the client salted the password; the keys follow from it."""
        name = _HASHES[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", name)
        server_key = hmac.digest(salted_password, b"Server Key", name)
        return cls(salt, hashlib.new(name, client_key).digest(), server_key, iterations)

    def matches(self, mechanism: str, password: str) -> bool:
        """Whether ``password`` is the one this credential was made from (HTTP Basic logins)."""
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), self.salt, self.iterations)
        expected = ScramCredential.from_salted_password(mechanism, self.salt, salted, self.iterations).stored_key
        return hmac.compare_digest(expected, self.stored_key)

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
    ) -> ScramCredential:
        """Hi(password, salt, i) as Kafka's ScramFormatter computes it (the password's UTF-8 bytes)."""
        salt = salt if salt is not None else os.urandom(32)
        salted = hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)


def unescape_username(saslname: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma and ``=3D`` an equals sign (Kafka's ScramFormatter.username)."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def invalid_credentials_message(mechanism: str) -> str:
    """Kafka's words, the same for an unknown user, a wrong password and a malformed message."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class ScramServerExchange:
    """The server side of one login: client-first -> server-first, client-final -> server-final.

    ``lookup(user)`` returns the user's credential for this mechanism or None. ``decoy_key`` is a
    per-broker secret from which an unknown user's salt is derived, so that asking twice for the
    same unknown user gets the same salt, as for a real one.

    Written here rather than taken from scramp because Kafka's server is more lenient than RFC 5802
    in one place clients rely on: the client-final nonce must *end with* the server's nonce
    (ScramSaslServer), and librdkafka 2.0.2 (Debian's kcat) sends its own nonce in front of it
    again. Only hashlib and hmac do the cryptography.
    """

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        decoy_key: bytes,
        server_nonce: str | None = None,
        token_login: Callable[[str], tuple[ScramCredential, str, int] | None] | None = None,
    ):
        self.mechanism = mechanism
        self.username: str | None = None
        self.token_owner: str | None = None  # a delegation-token login: the token owner's principal
        # ... and its token's expiry, where the session ends (Kafka's CREDENTIAL_LIFETIME_MS, KIP-368)
        self.credential_expires_ms: int | None = None
        self._token_login = token_login  # tokenId -> (credential, owner, expiry ms); None: tokens are disabled
        self._server_nonce = server_nonce  # None: random per login (RFC 7677's test vector pins it)
        self._hash = _HASHES[mechanism]
        self._lookup = lookup
        self._decoy_key = decoy_key
        self._credential: ScramCredential | None = None
        self._known = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._step = 0

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """(response token, done); AuthenticationFailed when the login fails."""
        try:
            message = token.decode("utf-8")
            if self._step == 0:
                self._step = 1
                return self._client_first(message).encode(), False
            if self._step == 1:
                self._step = 2
                return self._client_final(message).encode(), True
        except (_Invalid, UnicodeDecodeError, ValueError) as exc:
            # the reason stays in the broker's debug log: the client learns nothing about the user
            log.debug("%s login of %r failed: %s", self.mechanism, self.username, exc)
            raise AuthenticationFailed(invalid_credentials_message(self.mechanism)) from None
        raise AuthenticationFailed("Authentication failed: unexpected SASL token after authentication completed")

    def _client_first(self, message: str) -> str:
        """``gs2-header client-first-bare``: ``n,[a=authzid],n=saslname,r=nonce[,extensions]``."""
        flag, authzid, bare = (message.split(",", 2) + ["", ""])[:3]
        if flag not in ("n", "y"):  # "p=...": channel binding, which Kafka does not offer either
            raise _Invalid(f"unsupported gs2 header {flag!r}")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise _Invalid("client-first message lacks n= or r=")
        self.username = unescape_username(attributes["n"])
        if authzid and unescape_username(authzid[2:]) != self.username:
            raise _Invalid("authorization id differs from the user name")
        credential = None
        if attributes.get("tokenauth", "").lower() == "true":
            if self._token_login is None:
                raise _Invalid("delegation tokens are not enabled (delegation.token.secret.key)")
            found = self._token_login(self.username)  # None: unknown or expired, failing at the proof
            if found is not None:
                credential, self.token_owner, self.credential_expires_ms = found
        else:
            credential = self._lookup(self.username)
        if credential is None or credential.iterations < MIN_ITERATIONS:
            digest = hmac.digest(self._decoy_key, self.mechanism.encode() + b"\0" + self.username.encode(), "sha512")
            size = hashlib.new(self._hash).digest_size
            credential = ScramCredential(digest[:32], os.urandom(size), os.urandom(size), DEFAULT_ITERATIONS)
        else:
            self._known = True
        self._credential = credential
        self._client_first_bare = bare
        self._nonce = attributes["r"] + (self._server_nonce or base64.b64encode(os.urandom(24)).decode())
        self._server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        return self._server_first

    def _client_final(self, message: str) -> str:
        """``c=<channel binding>,r=<nonce>[,extensions],p=<proof>``; answers ``v=<server signature>``."""
        without_proof, separator, proof_text = message.rpartition(",p=")
        if not separator:
            raise _Invalid("client-final message lacks a proof")
        attributes = _attributes(without_proof)
        if not attributes.get("r", "").endswith(self._nonce):  # Kafka's rule, see the class docstring
            raise _Invalid("the client-final nonce does not end with the server nonce")
        credential = self._credential
        if credential is None:  # a client-first that failed leaves none: the login fails, not the broker
            raise _Invalid("client-final message before client-first")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        proof = base64.b64decode(proof_text, validate=True)
        client_signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(proof) != len(client_signature):
            raise _Invalid("the proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        stored_key = hashlib.new(self._hash, client_key).digest()
        if not hmac.compare_digest(stored_key, credential.stored_key) or not self._known:
            raise _Invalid("invalid proof")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        return "v=" + base64.b64encode(server_signature).decode()


class _Invalid(Exception):
    """Why a SCRAM login failed (for the broker's debug log only)."""


def _attributes(text: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"}; values may contain '=' (base64) but not ','."""
    result = {}
    for part in text.split(","):
        name, separator, value = part.partition("=")
        if not separator or not name:
            raise _Invalid(f"malformed attribute {part!r}")
        result[name] = value
    return result


class ScramClientExchange:
    """The client side, for brokers logging in to other brokers."""

    def __init__(self, mechanism: str, username: str, password: str):
        self._client = ScramClient([mechanism], username, password)
        self._step = 0

    def first(self) -> bytes:
        return self._client.get_client_first().encode()

    def respond(self, token: bytes) -> bytes | None:
        """The next message for the server's ``token``; None once the server's signature checked out."""
        try:
            if self._step == 0:
                self._step = 1
                self._client.set_server_first(token.decode())
                return self._client.get_client_final().encode()
            self._client.set_server_final(token.decode())
            return None
        except (ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(f"SCRAM exchange with the server failed: {exc}") from None
