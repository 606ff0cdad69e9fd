"""Feature levels on three brokers and ZooKeeper: one /feature znode in Kafka's layout, an update
through any broker reaching every broker's ApiVersions, and levels that survive a restart."""

from __future__ import annotations

import json
import threading

from strom.protocol.api import ApiKey
from tests.integration.clients import RawClient, wait_until


def finalized(bootstrap: str) -> tuple[dict[str, int], int]:
    with RawClient(bootstrap) as client:
        response = client.request(ApiKey.API_VERSIONS, 4, {})
    return {f.name: f.max_version_level for f in response.finalized_features}, response.finalized_features_epoch


def set_level(bootstrap: str, name: str, level: int, upgrade_type: int) -> int:
    with RawClient(bootstrap) as client:
        response = client.request(
            ApiKey.UPDATE_FEATURES,
            2,
            {
                "timeout": 5000,
                "feature_updates": [{"feature": name, "max_version_level": level, "upgrade_type": upgrade_type}],
            },
        )
    return response.error_code


def test_an_update_on_one_broker_reaches_all(cluster):
    data, stat = cluster.zk.get("/feature")
    assert json.loads(data) == {
        "version": 2,
        "status": 1,
        "features": {"group.version": {"max_version_level": 1}, "transaction.version": {"max_version_level": 2}},
    }
    bootstraps = {i: b.bootstrap for i, b in cluster.brokers.items()}
    for bootstrap in bootstraps.values():
        assert finalized(bootstrap) == ({"group.version": 1, "transaction.version": 2}, stat.version)

    assert set_level(bootstraps[1], "transaction.version", 1, 2) == 0
    data, stat = cluster.zk.get("/feature")
    assert json.loads(data)["features"]["transaction.version"] == {"max_version_level": 1}
    want = ({"group.version": 1, "transaction.version": 1}, stat.version)
    for bootstrap in bootstraps.values():
        wait_until(lambda b=bootstrap: finalized(b) == want, 10, what=f"{bootstrap} sees the new level")

    # two brokers updating different features at the same moment: the compare-and-set keeps both
    errors: list[int] = []
    threads = [
        threading.Thread(target=lambda: errors.append(set_level(bootstraps[0], "group.version", 0, 2))),
        threading.Thread(target=lambda: errors.append(set_level(bootstraps[2], "transaction.version", 2, 1))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == [0, 0]
    assert json.loads(cluster.zk.get("/feature")[0])["features"] == {"transaction.version": {"max_version_level": 2}}
    for bootstrap in bootstraps.values():
        wait_until(lambda b=bootstrap: finalized(b)[0] == {"transaction.version": 2}, 10, what="both updates")

    cluster.kill(0)
    cluster.restart(0)
    assert finalized(cluster.brokers[0].bootstrap)[0] == {"transaction.version": 2}
