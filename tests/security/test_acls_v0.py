"""CreateAcls, DescribeAcls and DeleteAcls v0 (served by Kafka 3.9, removed in 4.0), on the wire.

v0 predates resource pattern types (KIP-290): what it creates is LITERAL, and its filters match
LITERAL bindings only, so an old tool neither sees nor deletes a PREFIXED binding made by a newer one.
"""

from __future__ import annotations

import uuid

import pytest

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from strom.security.acl import Operation, PatternType, Permission, ResourceType
from tests.broker_process import BrokerProcess
from tests.integration.clients import RawClient


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    overrides = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",  # User:ANONYMOUS may Alter the cluster while it has no ACLs
    }
    with BrokerProcess(tmp_path_factory.mktemp("acls-v0") / "data", overrides) as process:
        yield process


def test_v0_creates_describes_and_deletes_literal_bindings_only(acl_broker):
    name = f"old-{uuid.uuid4().hex[:8]}"
    binding = {
        "resource_type": ResourceType.TOPIC,
        "resource_name": name,
        "principal": "User:old-tool",
        "host": "*",
        "operation": Operation.READ,
        "permission_type": Permission.ALLOW,
    }
    literal_filter = {
        "resource_type_filter": ResourceType.TOPIC,
        "resource_name_filter": name,
        "principal_filter": None,
        "host_filter": None,
        "operation": Operation.ANY,
        "permission_type": Permission.ANY,
    }
    with RawClient(acl_broker.bootstrap) as client:
        created = client.request(ApiKey.CREATE_ACLS, 0, {"creations": [binding]})
        assert [r.error_code for r in created.results] == [ErrorCode.NONE]
        prefixed = {**binding, "resource_pattern_type": PatternType.PREFIXED, "operation": Operation.WRITE}
        assert client.request(ApiKey.CREATE_ACLS, 1, {"creations": [prefixed]}).results[0].error_code == 0

        old = client.request(ApiKey.DESCRIBE_ACLS, 0, literal_filter)
        assert old.error_code == ErrorCode.NONE
        assert [(r.resource_name, [(a.principal, a.operation) for a in r.acls]) for r in old.resources] == [
            (name, [("User:old-tool", Operation.READ)])
        ]
        new = client.request(ApiKey.DESCRIBE_ACLS, 1, {**literal_filter, "pattern_type_filter": PatternType.ANY})
        assert sorted((r.pattern_type, r.acls[0].operation) for r in new.resources) == [
            (PatternType.LITERAL, Operation.READ),
            (PatternType.PREFIXED, Operation.WRITE),
        ]

        deleted = client.request(ApiKey.DELETE_ACLS, 0, {"filters": [literal_filter]})
        assert [(m.resource_name, m.operation) for m in deleted.filter_results[0].matching_acls] == [
            (name, Operation.READ)
        ]
        left = client.request(ApiKey.DESCRIBE_ACLS, 1, {**literal_filter, "pattern_type_filter": PatternType.ANY})
        assert [(r.pattern_type, r.acls[0].operation) for r in left.resources] == [
            (PatternType.PREFIXED, Operation.WRITE)
        ]
