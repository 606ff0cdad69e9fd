"""A user's password checked against the SCRAM credentials the brokers keep (HTTP Basic logins of
the Schema Registry, which has no SASL exchange to run).

Salting a password costs thousands of hash rounds (the credential's iterations), so a password
that matched is remembered by its SHA-256 together with the credential it matched: the next
request of that user costs a hash, and a changed or deleted credential is checked afresh. A wrong
password is salted every time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from strom.security.scram import ScramCredential

REMEMBERED = 1024  # logins remembered at most (then forgotten all at once)


class ScramPasswords:
    """``lookup(user, mechanism)`` is the broker's credential cache; ``mechanisms`` the SCRAM
    mechanisms enabled (a user with a credential for any of them may log in)."""

    def __init__(self, lookup: Callable[[str, str], ScramCredential | None], mechanisms: tuple[str, ...]):
        self._lookup = lookup
        self.mechanisms = mechanisms
        self._matched: dict[tuple[str, str, bytes], bytes] = {}  # (user, mechanism, sha256) -> stored_key

    def check(self, user: str, password: str) -> bool:
        digest = hashlib.sha256(password.encode()).digest()
        for mechanism in self.mechanisms:
            credential = self._lookup(user, mechanism)
            if credential is None:
                continue
            key = (user, mechanism, digest)
            if self._matched.get(key) == credential.stored_key:
                return True
            if credential.matches(mechanism, password):
                if len(self._matched) >= REMEMBERED:
                    self._matched.clear()
                self._matched[key] = credential.stored_key
                return True
        return False
