"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it, against the JAAS ``user_<name>`` entries."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from strom.security.scram import AuthenticationFailed

INVALID = "Authentication failed: Invalid username or password"


def authenticate_plain(token: bytes, users: Mapping[str, str]) -> str:
    """``authzid NUL authcid NUL password`` -> the user name; AuthenticationFailed with Kafka's message.

    An unknown user and a wrong password get the same message, and both compare a password in
    constant time, so neither the answer nor its timing says which it was.
    """
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
    try:
        authzid, username, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise AuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise AuthenticationFailed("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    expected = users.get(username)
    matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
    if expected is None or not matches:
        raise AuthenticationFailed(INVALID)
    return username
