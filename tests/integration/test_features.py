"""Feature levels (KIP-584) on one broker: ApiVersions v3+ reports them, UpdateFeatures changes them,
kafka-python's describe_features/update_features and ``strom features`` see the same.

A new cluster finalizes what a new Kafka 4.1 cluster does: group.version 1 and
transaction.version 2. Each test leaves the levels as it found them.
The multi-broker side (an update on one broker reaching the others, the znode's layout) is in
tests/cluster/test_features_cluster.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient

DEFAULT = {"group.version": (1, 1), "transaction.version": (2, 2)}


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("features") / "data") as process:
        yield process


def features(bootstrap: str, version: int = 4) -> tuple[dict, dict, int]:
    with RawClient(bootstrap) as client:
        response = client.request(ApiKey.API_VERSIONS, version, {})
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    return supported, finalized, response.finalized_features_epoch


def update(bootstrap: str, version: int, updates: list[dict], validate_only: bool = False):
    values: dict = {"timeout": 5000, "feature_updates": updates}
    if version >= 1:
        values["validate_only"] = validate_only
    with RawClient(bootstrap) as client:
        return client.request(ApiKey.UPDATE_FEATURES, version, values)


def strom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "features", *args], capture_output=True, text=True, timeout=60
    )


def test_api_versions_reports_supported_and_finalized_features(shared_broker):
    supported, finalized, epoch = features(shared_broker.bootstrap, 4)
    assert supported == {"group.version": (0, 1), "transaction.version": (0, 2)}
    assert finalized == DEFAULT
    assert epoch >= 0
    # below v4 a supported range may not start at 0 (KAFKA-17011): it starts at 1 there
    supported_v3, finalized_v3, epoch_v3 = features(shared_broker.bootstrap, 3)
    assert supported_v3 == {"group.version": (1, 1), "transaction.version": (1, 2)}
    assert (finalized_v3, epoch_v3) == (finalized, epoch)
    with RawClient(shared_broker.bootstrap) as client:
        assert not client.request(ApiKey.API_VERSIONS, 2, {}).error_code  # v0-2 have no features


def test_kafka_python_downgrades_and_upgrades_transaction_version(shared_broker):
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=WAIT_S * 1000)
    try:
        before = admin.describe_features()
        assert before["transaction.version"]["supported"] == (0, 2)
        assert before["transaction.version"]["finalized"] == (2, 2)
        epoch = before["transaction.version"]["finalized_epoch"]
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}) == {"transaction.version": "OK"}
        after = admin.describe_features()
        assert after["transaction.version"]["finalized"] == (1, 1)
        assert after["transaction.version"]["finalized_epoch"] > epoch
        # level 0 takes the feature out of the finalized list, as in Kafka
        admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 0)})
        assert "finalized" not in admin.describe_features()["transaction.version"]
        with pytest.raises(InvalidUpdateVersionError):
            admin.update_features({"transaction.version": 3})  # beyond what the broker supports
        assert admin.update_features({"transaction.version": 2}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
    finally:
        admin.close()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_update_features_refusals_name_the_reason(shared_broker, version):
    def refused(updates: list[dict]) -> tuple[int, str]:
        response = update(shared_broker.bootstrap, version, updates)
        if version < 2:  # per-feature results until v2
            assert [(r.feature, r.error_code) for r in response.results] == [
                (u["feature"], response.error_code) for u in updates
            ]
        return response.error_code, response.error_message

    kind = {"upgrade_type": 1} if version >= 1 else {"allow_downgrade": False}
    code, message = refused([{"feature": "transaction.version", "max_version_level": 1, **kind}])
    assert code == ErrorCode.INVALID_UPDATE_VERSION
    assert "without setting the upgrade type" in message
    code, message = refused([{"feature": "metadata.version", "max_version_level": 20, **kind}])
    assert (code, "does not support the given feature" in message) == (ErrorCode.INVALID_UPDATE_VERSION, True)
    code, message = refused(
        [
            {"feature": "group.version", "max_version_level": 1, **kind},
            {"feature": "group.version", "max_version_level": 1, **kind},
        ]
    )
    assert code == ErrorCode.INVALID_REQUEST and "more than once" in message
    if version >= 1:
        down = {"upgrade_type": 2}
        assert (
            update(
                shared_broker.bootstrap, version, [{"feature": "transaction.version", "max_version_level": 1, **down}]
            ).error_code
            == 0
        )
        code, message = refused([{"feature": "transaction.version", "max_version_level": 2, **down}])
        assert code == ErrorCode.INVALID_UPDATE_VERSION
        assert message.endswith("Can't downgrade to a newer version.")
        up = {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}
        assert update(shared_broker.bootstrap, version, [up]).error_code == 0
        # the first update is fine, the second is not: neither is applied
        code, message = refused(
            [
                {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 2},
                {"feature": "group.version", "max_version_level": 2, "upgrade_type": 1},
            ]
        )
        assert code == ErrorCode.INVALID_UPDATE_VERSION and "only supports versions 0-1" in message
    assert features(shared_broker.bootstrap)[1] == DEFAULT


def test_validate_only_changes_nothing(shared_broker):
    _, finalized, epoch = features(shared_broker.bootstrap)
    response = update(
        shared_broker.bootstrap,
        1,
        [{"feature": "group.version", "max_version_level": 0, "upgrade_type": 2}],
        validate_only=True,
    )
    assert (response.error_code, [r.error_code for r in response.results]) == (0, [0])
    assert features(shared_broker.bootstrap)[1:] == (finalized, epoch)


def test_strom_features_describe_upgrade_downgrade(shared_broker):
    bootstrap = ["--bootstrap-server", shared_broker.bootstrap]
    described = strom(*bootstrap, "describe")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t")
    assert lines[1].startswith("Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\t")
    assert "FinalizedVersionLevel: 2\tEpoch: " in lines[1]

    dry = strom(*bootstrap, "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, "transaction.version can be downgraded to 1.\n")
    assert "FinalizedVersionLevel: 2\t" in strom(*bootstrap, "describe").stdout.splitlines()[1]

    down = strom(*bootstrap, "downgrade", "--feature", "transaction.version=1")
    assert (down.returncode, down.stdout) == (0, "transaction.version was downgraded to 1.\n")
    assert "FinalizedVersionLevel: 1\t" in strom(*bootstrap, "describe").stdout.splitlines()[1]

    bad = strom(*bootstrap, "upgrade", "--feature", "transaction.version=3", "--feature", "group.version=1")
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == [
        "Could not upgrade transaction.version to 3. Invalid update version 3 for feature transaction.version. "
        "The broker only supports versions 0-2.",
        "group.version was upgraded to 1.",
        "1 out of 2 operation(s) failed.",
    ]
    off = strom(*bootstrap, "disable", "--feature", "transaction.version")
    assert (off.returncode, off.stdout) == (0, "transaction.version was disabled.\n")
    assert "FinalizedVersionLevel: 0\t" in strom(*bootstrap, "describe").stdout.splitlines()[1]
    up = strom(*bootstrap, "upgrade", "--feature", "transaction.version=2")
    assert (up.returncode, up.stdout) == (0, "transaction.version was upgraded to 2.\n")
    assert "FinalizedVersionLevel: 2\t" in strom(*bootstrap, "describe").stdout.splitlines()[1]
