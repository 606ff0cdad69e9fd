"""Delegation tokens without a broker: Kafka's HMAC and JSON byte for byte, and the manager's rules on the embedded store."""

import asyncio
import base64
import json

import pytest
from scramp import ScramClient

from strom.cluster.local_store import LocalStore
from strom.protocol.errors import ErrorCode
from strom.security.delegation_tokens import DelegationTokenManager, TokenInformation, token_hmac
from strom.security.scram import AuthenticationFailed, ScramServerExchange

DAY = 24 * 3600 * 1000


def test_hmac_is_kafkas_hmacsha512_of_the_token_id():
    # computed with javax.crypto.Mac "HmacSHA512" as Kafka's DelegationTokenManager.createHmac does
    expected = "du0sK5OZFpDQTUS6HfwwgCUlD/4N9aiXMLNEbUd7he3poIV1SBC9hDD8WN8dZEnCXTRauA+z/Ti6clvz37mjag=="
    assert base64.b64encode(token_hmac("secret-key", "6dPvSFZ4TUqvCFjrHvbmLg")).decode() == expected


def test_json_is_kafkas_with_sanitized_principals():
    info = TokenInformation("tok", "User:alice ~*+", "User:admin", ("User:bob",), 1, 3, 2)
    assert json.loads(info.to_json()) == {
        "version": 3,
        "owner": "User%3Aalice%20%7E%2A%2B",  # Kafka's Sanitizer: URL-encoded, '*' and ' ' as %2A and %20
        "tokenRequester": "User%3Aadmin",
        "renewers": ["User%3Abob"],
        "issueTimestamp": 1,
        "maxTimestamp": 3,
        "expiryTimestamp": 2,
        "tokenId": "tok",
    }
    assert TokenInformation.from_json(info.to_json()) == info
    version2 = b'{"version":2,"owner":"User%3Aalice","renewers":[],"issueTimestamp":1,"maxTimestamp":3,"expiryTimestamp":2,"tokenId":"t"}'
    assert TokenInformation.from_json(version2).token_requester == "User:alice"  # before KIP-373: the owner
    for bad in (b"{}", b"[]", b"not json", b'{"version":9}'):
        with pytest.raises(ValueError):
            TokenInformation.from_json(bad)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def manager(store: LocalStore, clock: Clock) -> DelegationTokenManager:
    return DelegationTokenManager(store, "s3cret", max_lifetime_ms=7 * DAY, default_renew_ms=DAY, clock=clock)


def scram_token_login(tokens: DelegationTokenManager, token_id: str, password: str) -> str | None:
    """A tokenauth login through the server exchange; the owner on success, None on failure."""
    exchange = ScramServerExchange(
        "SCRAM-SHA-256", lambda _: None, b"k" * 32, token_login=lambda t: tokens.login(t, "SCRAM-SHA-256")
    )
    client = ScramClient(["SCRAM-SHA-256"], token_id, password)
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare += ",tokenauth=true"
    try:
        reply, _ = exchange.step(first.encode())
        client.set_server_first(reply.decode())
        reply, _ = exchange.step(client.get_client_final().encode())
    except AuthenticationFailed:
        return None
    client.set_server_final(reply.decode())
    return exchange.token_owner


def test_lifetimes_renewal_and_expiry_follow_kafka():
    store, clock = LocalStore(None), Clock()
    tokens = manager(store, clock)
    info, digest = tokens.create("User:alice", "User:alice", ("User:bob",), max_lifetime_ms=30 * DAY)
    assert (info.expiry_timestamp - clock.now, info.max_timestamp - clock.now) == (DAY, 7 * DAY)  # capped
    assert digest == token_hmac("s3cret", info.token_id)
    password = base64.b64encode(digest).decode()
    assert scram_token_login(tokens, info.token_id, password) == "User:alice"
    assert scram_token_login(tokens, info.token_id, base64.b64encode(b"x" * 64).decode()) is None

    # a second broker on the same store sees it, and derives the same password from the secret
    other = manager(store, clock)
    other.load()
    assert scram_token_login(other, info.token_id, password) == "User:alice"

    assert tokens.renew("User:carol", digest, -1) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    assert tokens.renew("User:bob", digest, 3 * DAY) == (ErrorCode.NONE, clock.now + 3 * DAY)
    assert tokens.renew("User:alice", digest, 30 * DAY) == (ErrorCode.NONE, info.max_timestamp)  # capped by max
    assert tokens.renew("User:alice", b"nope", -1) == (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1)

    clock.now = info.max_timestamp + 1
    assert scram_token_login(tokens, info.token_id, password) is None  # expired: no login, not even before removal
    assert tokens.renew("User:alice", digest, -1) == (ErrorCode.DELEGATION_TOKEN_EXPIRED, -1)
    assert tokens.remove_expired() == 1
    assert not store.exists(f"/delegation_token/tokens/{info.token_id}")


def test_expire_sets_the_expiry_or_removes_at_once():
    store, clock = LocalStore(None), Clock()
    tokens = manager(store, clock)
    info, digest = tokens.create("User:alice", "User:admin", (), -1)
    assert tokens.expire("User:admin", digest, -1) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)  # requester
    assert tokens.expire("User:alice", digest, 1000) == (ErrorCode.NONE, clock.now + 1000)
    assert tokens.expire("User:alice", digest, -1) == (ErrorCode.NONE, clock.now)
    assert tokens.tokens() == [] and not store.exists(f"/delegation_token/tokens/{info.token_id}")


def test_tokenauth_is_refused_when_tokens_are_disabled():
    exchange = ScramServerExchange("SCRAM-SHA-512", lambda _: None, b"k" * 32)
    with pytest.raises(AuthenticationFailed):
        exchange.step(b"n,,n=tok,r=abc,tokenauth=true")


def test_config_keys_kafkas_defaults_and_the_old_secret_name():
    from strom.server.config import BrokerConfig

    default = BrokerConfig.from_mapping({})
    assert default.delegation_token_secret_key is None  # tokens off, as in Kafka
    assert (
        default.delegation_token_max_lifetime_ms,
        default.delegation_token_expiry_time_ms,
        default.delegation_token_expiry_check_interval_ms,
    ) == (7 * DAY, DAY, 3600 * 1000)
    assert BrokerConfig.from_mapping({"delegation.token.master.key": "old"}).delegation_token_secret_key == "old"
    both = {"delegation.token.master.key": "old", "delegation.token.secret.key": "new"}
    assert BrokerConfig.from_mapping(both).delegation_token_secret_key == "new"


def test_manager_for_needs_only_the_three_token_configs_and_a_store():
    """Built from its collaborators alone (no BrokerConfig, no broker): tokens off without a secret."""
    from types import SimpleNamespace

    from strom.security.delegation_tokens import manager_for

    loop = asyncio.new_event_loop()
    try:
        settings = dict(delegation_token_max_lifetime_ms=7 * DAY, delegation_token_expiry_time_ms=DAY)
        store = LocalStore(None)
        assert manager_for(SimpleNamespace(delegation_token_secret_key=None, **settings), store, loop) is None
        tokens = manager_for(SimpleNamespace(delegation_token_secret_key="s3cret", **settings), store, loop)
        assert tokens is not None
        info, _ = tokens.create("User:alice", "User:alice", (), -1)
        assert info.max_timestamp - info.issue_timestamp == 7 * DAY
        assert store.exists(f"/delegation_token/tokens/{info.token_id}")
    finally:
        loop.close()
