"""A client quota set through one broker of a ZooKeeper cluster applies on another, with no restart."""

from __future__ import annotations

from strom.protocol.api import ApiKey
from tests.cluster.conftest import wait_until
from tests.integration.clients import RawClient


def test_quota_altered_on_one_broker_throttles_on_another(cluster_factory):
    cluster = cluster_factory(size=2)
    first, second = (b.bootstrap for b in cluster.brokers.values())
    with RawClient(first) as admin:
        response = admin.request(
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            {
                "validate_only": False,
                "entries": [
                    {
                        "entity": [{"entity_type": "client-id", "entity_name": "busy"}],
                        "ops": [{"key": "request_percentage", "value": 0.01, "remove": False}],
                    }
                ],
            },
        )
    assert response.entries[0].error_code == 0
    assert cluster.zk.get("/config/clients/busy")[0] == b'{"version":1,"config":{"request_percentage":"0.01"}}'

    def described_on_second() -> bool:
        with RawClient(second) as client:
            response = client.request(
                ApiKey.DESCRIBE_CLIENT_QUOTAS,
                1,
                {"strict": True, "components": [{"entity_type": "client-id", "match_type": 0, "match": "busy"}]},
            )
        return [(v.key, v.value) for e in response.entries for v in e.values] == [("request_percentage", 0.01)]

    wait_until(described_on_second, 10, "the quota in the second broker's cache")
    with RawClient(second, client_id="busy") as client:

        def throttled() -> bool:
            response = client.request(
                ApiKey.METADATA,
                9,
                {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
            )
            return response.throttle_time.total_seconds() > 0

        wait_until(throttled, 10, "a throttled Metadata on the second broker")
    with RawClient(second, client_id="idle") as other:
        response = other.request(
            ApiKey.METADATA,
            9,
            {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        )
        assert response.throttle_time.total_seconds() == 0
