"""Delegation tokens (KIP-48, KIP-373): Kafka's DelegationTokenManager over the metadata store.

A token is kept where Kafka's ZooKeeper mode keeps it, ``/delegation_token/tokens/<tokenId>``,
with Kafka's JSON (principals sanitized as Kafka's Sanitizer writes them)::

    {"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aadmin","renewers":["User%3Abob"],
     "issueTimestamp":1700000000000,"maxTimestamp":1700604800000,"expiryTimestamp":1700086400000,
     "tokenId":"6dPvSFZ4TUqvCFjrHvbmLg"}

The HMAC is not stored: it is HmacSHA512(delegation.token.secret.key, tokenId), which every broker
computes with the shared secret, exactly as Kafka does. Likewise the SCRAM credentials a client
logs in with (user name: the tokenId, password: the base64 of the HMAC, extension
``tokenauth=true``) are derived on each broker, with a fresh salt and Kafka's minimum iterations,
so nothing in the store lets a reader log in. Every broker keeps all tokens in memory, reloaded
by watches, so a token created through one broker logs in on all of them at once.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol
from urllib.parse import unquote

from strom.clock import wall_ms
from strom.cluster.model import base64url_uuid, sanitize_entity_name
from strom.cluster.store import MetadataStore, NodeExistsError, NoNodeError
from strom.cluster.watched import WatchedView
from strom.protocol.errors import ErrorCode
from strom.security.scram import MECHANISM_IDS, MIN_ITERATIONS, ScramCredential

log = logging.getLogger("strom.security")

ROOT = "/delegation_token"
TOKENS = f"{ROOT}/tokens"
JSON_VERSION = 3  # Kafka's DelegationTokenManager.CurrentVersion (with tokenRequester, KIP-373)


def token_path(token_id: str) -> str:
    return f"{TOKENS}/{token_id}"


def token_hmac(secret: str, token_id: str) -> bytes:
    """Kafka's createHmac: HmacSHA512 keyed by the secret's UTF-8 bytes, over the tokenId's."""
    return hmac.digest(secret.encode(), token_id.encode(), "sha512")


class TokenPrincipal(str):
    """A principal that logged in with a delegation token (Kafka's ``KafkaPrincipal.tokenAuthenticated``).

    It is the owner's principal string, so ACLs, quotas and logs treat it as the owner; the token
    requests check ``isinstance`` to refuse token creation over a token-authenticated connection.
    """

    token_id: str

    def __new__(cls, principal: str, token_id: str) -> TokenPrincipal:
        made = super().__new__(cls, principal)
        made.token_id = token_id
        return made


def split_principal(principal: str) -> tuple[str, str]:
    """``User:alice`` -> ("User", "alice")."""
    kind, _, name = principal.partition(":")
    return kind, name


@dataclass(frozen=True)
class TokenInformation:
    token_id: str
    owner: str
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer (KIP-373 counts the requester too)."""
        return principal in (self.owner, self.token_requester) or principal in self.renewers

    def may_renew(self, principal: str) -> bool:
        """Kafka's allowedToRenew: renew and expire are the owner's and the renewers' only."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": JSON_VERSION,
                "owner": sanitize_entity_name(self.owner),
                "tokenRequester": sanitize_entity_name(self.token_requester),
                "renewers": [sanitize_entity_name(r) for r in self.renewers],
                "issueTimestamp": self.issue_timestamp,
                "maxTimestamp": self.max_timestamp,
                "expiryTimestamp": self.expiry_timestamp,
                "tokenId": self.token_id,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> TokenInformation:
        """Versions 1-3 as Kafka reads them (before 3 the requester is the owner); ValueError if malformed."""
        try:
            fields = json.loads(data)
            version = int(fields["version"])
            if not 0 < version <= JSON_VERSION:
                raise ValueError(f"unknown version {version}")
            owner = unquote(str(fields["owner"]))
            return cls(
                token_id=str(fields["tokenId"]),
                owner=owner,
                token_requester=unquote(str(fields["tokenRequester"])) if version >= 3 else owner,
                renewers=tuple(unquote(str(r)) for r in fields["renewers"]),
                issue_timestamp=int(fields["issueTimestamp"]),
                max_timestamp=int(fields["maxTimestamp"]),
                expiry_timestamp=int(fields["expiryTimestamp"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a delegation token ({exc!r})") from None


@dataclass(frozen=True)
class _Cached:
    info: TokenInformation
    hmac: bytes
    credentials: dict[str, ScramCredential]


class DelegationTokenManager(WatchedView):
    """Every token of the cluster, kept current by watches; creates, renews and expires them.

    Writes go to the store first and then into this broker's cache (the other brokers learn of
    them through their watches), so the answer to a request is what every broker will see.
    """

    what = "delegation tokens"

    def __init__(
        self,
        store: MetadataStore,
        secret: str,
        max_lifetime_ms: int,
        default_renew_ms: int,
        loop: asyncio.AbstractEventLoop | None = None,
        clock: Callable[[], int] = wall_ms,
    ):
        super().__init__(loop)
        self.store = store
        self._secret = secret
        self.max_lifetime_ms = max_lifetime_ms
        self.default_renew_ms = default_renew_ms
        self.clock = clock
        self._tokens: dict[str, _Cached] = {}
        self._by_hmac: dict[bytes, str] = {}

    # -- reads ---------------------------------------------------------------------------------
    def load(self) -> None:
        watch = self.watch
        try:
            ids = self.store.children(TOKENS, watch)
        except NoNodeError:
            ids = []
            if watch is not None:
                self.store.exists(TOKENS, watch)
        found: dict[str, _Cached] = {}
        for token_id in ids:
            try:
                data, _ = self.store.get(token_path(token_id), watch)
                info = TokenInformation.from_json(data)
            except NoNodeError:
                continue
            except ValueError as exc:
                log.warning("ignoring delegation token %s: %s", token_id, exc)
                continue
            found[token_id] = self._cached(info)
        self._set_all(found)

    def _cached(self, info: TokenInformation) -> _Cached:
        known = self._tokens.get(info.token_id)
        if known is not None:  # the credentials depend on the tokenId only: keep them (PBKDF2 is slow)
            return replace(known, info=info)
        digest = token_hmac(self._secret, info.token_id)
        password = base64.b64encode(digest).decode()
        credentials = {
            mechanism: ScramCredential.from_password(mechanism, password, MIN_ITERATIONS)
            for mechanism in MECHANISM_IDS.values()
        }
        return _Cached(info, digest, credentials)

    def _set_all(self, tokens: dict[str, _Cached]) -> None:
        self._tokens = tokens
        self._by_hmac = {cached.hmac: token_id for token_id, cached in tokens.items()}

    def _put(self, cached: _Cached) -> None:
        tokens = dict(self._tokens)
        tokens[cached.info.token_id] = cached
        self._set_all(tokens)

    def _drop(self, token_id: str) -> None:
        tokens = dict(self._tokens)
        tokens.pop(token_id, None)
        self._set_all(tokens)

    def tokens(self) -> list[tuple[TokenInformation, bytes]]:
        return [(cached.info, cached.hmac) for cached in self._tokens.values()]

    def by_hmac(self, digest: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(bytes(digest))
        return self._tokens[token_id].info if token_id is not None else None

    def login(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str, int] | None:
        """The credential, owner and expiry a ``tokenauth`` login checks against; None for an unknown or expired token."""
        cached = self._tokens.get(token_id)
        if cached is None or cached.info.expired(self.clock()):
            return None
        return cached.credentials[mechanism], cached.info.owner, cached.info.expiry_timestamp

    # -- writes --------------------------------------------------------------------------------
    def create(
        self, owner: str, requester: str, renewers: tuple[str, ...], max_lifetime_ms: int
    ) -> tuple[TokenInformation, bytes]:
        now = self.clock()
        lifetime = self.max_lifetime_ms if max_lifetime_ms <= 0 else min(max_lifetime_ms, self.max_lifetime_ms)
        max_timestamp = now + lifetime
        info = TokenInformation(
            token_id=base64url_uuid(uuid.uuid4()),
            owner=owner,
            token_requester=requester,
            renewers=renewers,
            issue_timestamp=now,
            max_timestamp=max_timestamp,
            expiry_timestamp=min(max_timestamp, now + self.default_renew_ms),
        )
        self._write(info, create=True)
        log.info("Created a delegation token: %s for owner: %s", info.token_id, owner)
        return info, self._tokens[info.token_id].hmac

    def _changeable(self, principal: str, digest: bytes) -> tuple[ErrorCode, TokenInformation | None, int]:
        """Renew's and expire's first checks, in Kafka's order: (error, the token or None, now)."""
        info = self.by_hmac(digest)
        if info is None:
            return ErrorCode.DELEGATION_TOKEN_NOT_FOUND, None, 0
        if not info.may_renew(principal):
            return ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, None, 0
        return ErrorCode.NONE, info, self.clock()

    def renew(self, principal: str, digest: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        """(error, new expiry timestamp or -1), with Kafka's checks in Kafka's order."""
        error, info, now = self._changeable(principal, digest)
        if info is None:
            return error, -1
        if info.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, -1
        period = self.default_renew_ms if period_ms < 0 else period_ms
        expiry = min(info.max_timestamp, now + period)
        self._write(replace(info, expiry_timestamp=expiry))
        log.info("Delegation token renewed for token: %s for owner: %s", info.token_id, info.owner)
        return ErrorCode.NONE, expiry

    def expire(self, principal: str, digest: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        """A negative period removes the token now; otherwise its expiry moves to now + period (capped)."""
        error, info, now = self._changeable(principal, digest)
        if info is None:
            return error, -1
        if period_ms < 0:
            self._remove(info.token_id)
            log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
            return ErrorCode.NONE, now
        if info.expired(now):
            return ErrorCode.DELEGATION_TOKEN_EXPIRED, -1
        expiry = min(info.max_timestamp, now + period_ms)
        self._write(replace(info, expiry_timestamp=expiry))
        log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return ErrorCode.NONE, expiry

    def remove_expired(self) -> int:
        """Kafka's expireTokens, run every delegation.token.expiry.check.interval.ms (any broker may: deletes are idempotent)."""
        now = self.clock()
        removed = 0
        for info, _ in self.tokens():
            if info.expired(now):
                log.info("Delegation token expired for token: %s for owner: %s", info.token_id, info.owner)
                self._remove(info.token_id)
                removed += 1
        return removed

    def _write(self, info: TokenInformation, create: bool = False) -> None:
        path = token_path(info.token_id)
        data = info.to_json()
        if create:
            try:
                self.store.create(path, data, makepath=True)
            except NodeExistsError:  # a random 128-bit id: never in practice
                raise ValueError(f"delegation token {info.token_id} exists already") from None
        else:
            try:
                self.store.set(path, data)
            except NoNodeError:  # removed meanwhile (expired, or by another broker): write it back as Kafka does
                self.store.create(path, data, makepath=True)
        self._put(self._cached(info))

    def _remove(self, token_id: str) -> None:
        try:
            self.store.delete(token_path(token_id))
        except NoNodeError:
            pass
        self._drop(token_id)


class DelegationTokenConfig(Protocol):
    """The broker configs of delegation tokens (``BrokerConfig`` has them)."""

    @property
    def delegation_token_secret_key(self) -> str | None: ...
    @property
    def delegation_token_max_lifetime_ms(self) -> int: ...
    @property
    def delegation_token_expiry_time_ms(self) -> int: ...


def manager_for(
    config: DelegationTokenConfig, store: MetadataStore, loop: asyncio.AbstractEventLoop
) -> DelegationTokenManager | None:
    """The broker's token manager, loaded and watching; None when no secret is set (tokens disabled, as Kafka)."""
    if not config.delegation_token_secret_key:
        return None
    manager = DelegationTokenManager(
        store,
        config.delegation_token_secret_key,
        config.delegation_token_max_lifetime_ms,
        config.delegation_token_expiry_time_ms,
        loop,
    )
    manager.load()
    return manager
