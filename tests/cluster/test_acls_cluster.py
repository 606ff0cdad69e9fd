"""ACLs in a ZooKeeper cluster: created through one broker, in force on another without a restart.

The ACL is written to Kafka's znode (/kafka-acl/Topic/<name>, Kafka's JSON) with Kafka's change
notification (/kafka-acl-changes/acl_changes_<seq>), which every broker watches and applies. The brokers reach each other as User:ANONYMOUS on PLAINTEXT; with
allow.everyone.if.no.acl.found and no cluster ACL, replication stays allowed.
"""

from __future__ import annotations

import json

from strom.protocol.api import ApiKey
from tests.cluster.conftest import create_topic, wait_until
from tests.integration.clients import RawClient

TOPIC_DENIED = 29
DESCRIBE, DENY, TOPIC, LITERAL = 8, 2, 2, 3


def metadata_error(bootstrap: str, topic: str) -> int:
    with RawClient(bootstrap) as client:
        response = client.request(
            ApiKey.METADATA,
            9,
            {
                "topics": [{"name": topic}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
    return response.topics[0].error_code


def test_acl_created_on_one_broker_holds_on_another(cluster_factory):
    cluster = cluster_factory(
        2,
        {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true"},
    )
    create_topic(cluster, "guarded", partitions=1, replication_factor=2)
    first, second = cluster.brokers[0].bootstrap, cluster.brokers[1].bootstrap
    # the second broker may not have loaded the new topic yet (UNKNOWN_TOPIC_OR_PARTITION)
    wait_until(lambda: metadata_error(second, "guarded") == 0, 10, "the topic on the second broker")
    deny = {
        "resource_type": TOPIC,
        "resource_name": "guarded",
        "resource_pattern_type": LITERAL,
        "principal": "User:ANONYMOUS",
        "host": "*",
        "operation": DESCRIBE,
        "permission_type": DENY,
    }
    with RawClient(first) as client:
        created = client.request(ApiKey.CREATE_ACLS, 2, {"creations": [deny]})
    assert [r.error_code for r in created.results] == [0]
    stored = json.loads(cluster.zk.get("/kafka-acl/Topic/guarded")[0])
    assert stored == {
        "version": 1,
        "acls": [{"principal": "User:ANONYMOUS", "permissionType": "Deny", "operation": "Describe", "host": "*"}],
    }
    # Kafka's change notification, which the other broker (or a Kafka broker) watches instead of the ACL znode
    changes = cluster.zk.get_children("/kafka-acl-changes")
    assert [name[:-10] for name in changes] == ["acl_changes_"]
    assert cluster.zk.get(f"/kafka-acl-changes/{changes[0]}")[0] == b"TOPIC:guarded"
    wait_until(lambda: metadata_error(second, "guarded") == TOPIC_DENIED, 10, "the ACL on the other broker")

    remove = {
        "resource_type_filter": TOPIC,
        "resource_name_filter": "guarded",
        "pattern_type_filter": LITERAL,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    with RawClient(second) as client:
        deleted = client.request(ApiKey.DELETE_ACLS, 2, {"filters": [remove]})
    assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
    wait_until(lambda: metadata_error(first, "guarded") == 0, 10, "the removal on the first broker")
    assert not cluster.zk.exists("/kafka-acl/Topic/guarded")
