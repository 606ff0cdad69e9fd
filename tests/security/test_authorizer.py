"""The authorizer's decisions and Kafka's filter matching, over the embedded metadata store."""

from __future__ import annotations

import json
import logging

import pytest

from strom.cluster.local_store import LocalStore
from strom.security import authorizer as authorizer_module
from strom.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclError,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from strom.security.authorizer import LOG_LINES_PER_S, AclAuthorizer, host_of

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def binding(rtype, name, principal, operation, permission=ALLOW, pattern=LITERAL, host="*") -> AclBinding:
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, operation, permission))


@pytest.fixture
def store(tmp_path):
    store = LocalStore(str(tmp_path))
    yield store
    store.close()


def test_implied_operations_deny_and_no_acl(store):
    auth = AclAuthorizer(store)
    auth.create(
        [
            binding(TOPIC, "t", "User:alice", Operation.READ),
            binding(TOPIC, "t", "User:alice", Operation.ALTER_CONFIGS),
            binding(TOPIC, "u", "User:bob", Operation.ALL),
        ]
    )

    def can(who, op, name="t"):
        return auth.authorize(who, "10.0.0.1", op, TOPIC, name, log_denied=False)

    assert can("User:alice", Operation.READ) and can("User:alice", Operation.DESCRIBE)  # Read implies Describe
    assert can("User:alice", Operation.DESCRIBE_CONFIGS)  # AlterConfigs implies DescribeConfigs
    assert not can("User:alice", Operation.WRITE) and not can("User:bob", Operation.READ)
    assert can("User:bob", Operation.DELETE, "u")  # All
    assert not can("User:alice", Operation.READ, "no-acls")  # allow.everyone.if.no.acl.found=false
    assert AclAuthorizer(store, allow_if_no_acl=True).authorize("User:x", "h", Operation.READ, TOPIC, "no-acls")
    assert AclAuthorizer(store, super_users=["User:root"]).authorize("User:root", "h", Operation.WRITE, TOPIC, "t")
    # DENY wins; it denies its own operation (or All) only, so Read's ALLOW still implies Describe, as in Kafka
    auth.create([binding(TOPIC, "t", "User:alice", Operation.READ, DENY)])
    assert not can("User:alice", Operation.READ) and can("User:alice", Operation.DESCRIBE)
    auth.create([binding(TOPIC, "u", "User:*", Operation.ALL, DENY, host="10.0.0.1")])
    assert not can("User:bob", Operation.DELETE, "u")
    assert auth.authorize("User:bob", "10.0.0.2", Operation.DELETE, TOPIC, "u")  # another host


def test_znodes_are_kafkas(store):
    auth = AclAuthorizer(store)
    auth.create(
        [
            binding(TOPIC, "orders", "User:alice", Operation.READ),
            binding(GROUP, "billing-", "User:alice", Operation.READ, pattern=PREFIXED),
        ]
    )
    assert json.loads(store.get("/kafka-acl/Topic/orders")[0]) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert store.exists("/kafka-acl-extended/prefixed/Group/billing-")
    fresh = AclAuthorizer(store)  # another broker, or a restart
    fresh.load()
    assert fresh.authorize("User:alice", "h", Operation.READ, GROUP, "billing-eu")
    assert not fresh.authorize("User:alice", "h", Operation.READ, GROUP, "billing", log_denied=False)


def test_change_notifications_are_kafkas(store, monkeypatch):
    """Brokers learn of a change from Kafka's sequential notification, as Kafka's own brokers and tools do."""
    auth, other = AclAuthorizer(store), AclAuthorizer(store)
    other.load()
    auth.create(
        [
            binding(TOPIC, "orders", "User:alice", Operation.READ),
            binding(GROUP, "billing-", "User:alice", Operation.READ, pattern=PREFIXED),
        ]
    )
    assert store.children("/kafka-acl-changes") == ["acl_changes_0000000000"]
    assert store.get("/kafka-acl-changes/acl_changes_0000000000")[0] == b"TOPIC:orders"
    [extended] = store.children("/kafka-acl-extended-changes")
    assert json.loads(store.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "billing-",
        "patternType": "PREFIXED",
    }
    other.load()  # what its watch on the change paths does
    assert other.authorize("User:alice", "h", Operation.READ, GROUP, "billing-eu")

    # an ACL written as Kafka's AclAuthorizer writes it (znode, then notification) holds on strom
    store.create(
        "/kafka-acl/Topic/payments",
        b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow","operation":"Write","host":"*"}]}',
    )
    store.create_sequential("/kafka-acl-changes/acl_changes_", b"Topic:payments")
    other.load()
    assert other.authorize("User:bob", "h", Operation.WRITE, TOPIC, "payments")

    auth.delete([AclFilter(TOPIC, "orders", LITERAL)])
    other.load()
    assert not other.authorize("User:alice", "h", Operation.READ, TOPIC, "orders", log_denied=False)
    assert len(store.children("/kafka-acl-changes")) == 3  # younger than 15 minutes: kept

    # older ones are purged by whichever broker applies the next change
    monkeypatch.setattr(authorizer_module, "CHANGE_EXPIRATION_MS", -60_000)  # as if 15 minutes had passed
    auth.create([binding(TOPIC, "orders", "User:carol", Operation.READ)])
    assert store.children("/kafka-acl-changes") == []


def test_filters_match_as_kafka(store):
    auth = AclAuthorizer(store)
    auth.create(
        [
            binding(TOPIC, "payments", "User:a", Operation.READ),
            binding(TOPIC, "*", "User:b", Operation.WRITE),
            binding(TOPIC, "pay", "User:c", Operation.DESCRIBE, pattern=PREFIXED),
            binding(TOPIC, "other", "User:d", Operation.READ),
            binding(GROUP, "payments", "User:e", Operation.READ),
        ]
    )

    def names(f):
        return sorted(b.entry.principal for b in auth.describe(f))

    assert names(AclFilter(TOPIC, "payments", PatternType.MATCH)) == ["User:a", "User:b", "User:c"]
    assert names(AclFilter(TOPIC, "payments", PatternType.ANY)) == ["User:a"]
    assert names(AclFilter(ResourceType.ANY, "payments", PatternType.ANY)) == ["User:a", "User:e"]
    assert names(AclFilter(TOPIC, "pay", PREFIXED)) == ["User:c"]
    assert names(AclFilter(TOPIC, None, LITERAL)) == ["User:a", "User:b", "User:d"]
    assert names(AclFilter(operation=Operation.WRITE)) == ["User:b"]
    removed = auth.delete([AclFilter(TOPIC, "payments", PatternType.MATCH, principal="User:b")])
    assert [[b.pattern.name for b in found] for found in removed] == [["*"]]
    assert not auth.authorize("User:b", "h", Operation.WRITE, TOPIC, "anything", log_denied=False)


def test_invalid_bindings_are_refused():
    with pytest.raises(AclError, match="kafka-cluster"):
        validate_binding(binding(CLUSTER, "mine", "User:a", Operation.ALTER))
    with pytest.raises(AclError, match="principal"):
        validate_binding(binding(TOPIC, "t", "alice", Operation.READ))
    with pytest.raises(AclError, match="pattern type"):
        validate_binding(binding(TOPIC, "t", "User:a", Operation.READ, pattern=PatternType.MATCH))


def test_denials_are_logged_but_rate_limited(store, caplog):
    auth = AclAuthorizer(store)
    with caplog.at_level(logging.INFO, logger="strom.authorizer"):
        for _ in range(LOG_LINES_PER_S * 5):
            auth.authorize("User:mallory", "10.1.2.3", Operation.WRITE, TOPIC, "t", peer="10.1.2.3:5555")
    lines = [r.getMessage() for r in caplog.records if r.name == "strom.authorizer"]
    assert len(lines) == LOG_LINES_PER_S
    assert "Principal = User:mallory is Denied operation = WRITE from host = 10.1.2.3" in lines[0]
    assert "Topic:LITERAL:t" in lines[0] and "10.1.2.3:5555" in lines[0]


def test_host_of_peer():
    assert host_of("127.0.0.1:5000") == "127.0.0.1"
    assert host_of("::1:5000") == "::1"
