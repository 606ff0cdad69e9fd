"""Group-level configs (ConfigResource type GROUP, 32): IncrementalAlterConfigs sets a group's
consumer.heartbeat.interval.ms / consumer.session.timeout.ms, DescribeConfigs shows them, and the
group's members are answered with them; bad keys and values get Kafka's errors."""

from __future__ import annotations

import pytest

from strom.group.consumer_state import cancel_timers
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.group.support import WAIT_S, raw_request, unique, wait_until

pytestmark = pytest.mark.timeout(60)

GROUP = 32
SET, DELETE = 0, 1


def alter(bootstrap: str, group: str, *configs: tuple[str, int, str | None], validate_only: bool = False):
    request = {
        "resources": [
            {
                "resource_type": GROUP,
                "resource_name": group,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in configs],
            }
        ],
        "validate_only": validate_only,
    }
    result = raw_request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request).responses[0]
    return result.error_code, result.error_message


def describe(bootstrap: str, group: str) -> dict[str, tuple[str, int]]:
    request = {
        "resources": [{"resource_type": GROUP, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    result = raw_request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, request).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def heartbeat(bootstrap: str, group: str, member: str):
    request = {
        "group_id": group,
        "member_id": member,
        "member_epoch": 0,
        "rebalance_timeout": 30000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    }
    return wait_until(
        lambda: (
            (r := raw_request(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)).error_code
            not in (
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            )
            and r
        ),
        WAIT_S,
        what="a heartbeat answered by the coordinator",
    )


def interval_ms(response) -> int:
    value = response.heartbeat_interval  # kio: a timedelta
    return round(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def test_a_groups_heartbeat_interval_and_session_timeout_are_its_own(tmp_path):
    overrides = {
        "group.consumer.heartbeat.interval.ms": "3000",
        "group.consumer.min.heartbeat.interval.ms": "100",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
    }
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        group, other = unique("g"), unique("o")
        raw_request(broker.bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        assert describe(broker.bootstrap, group) == {
            "consumer.heartbeat.interval.ms": ("3000", 5),
            "consumer.session.timeout.ms": ("45000", 5),
        }
        assert alter(broker.bootstrap, group, ("consumer.heartbeat.interval.ms", SET, "700")) == (0, None)
        assert alter(broker.bootstrap, group, ("consumer.session.timeout.ms", SET, "50000")) == (0, None)
        assert describe(broker.bootstrap, group) == {
            "consumer.heartbeat.interval.ms": ("700", 8),
            "consumer.session.timeout.ms": ("50000", 8),
        }
        assert interval_ms(heartbeat(broker.bootstrap, group, "m")) == 700
        assert interval_ms(heartbeat(broker.bootstrap, other, "m")) == 3000  # the broker's
        # Kafka's GroupConfig checks and messages; nothing is written
        assert alter(broker.bootstrap, group, ("consumer.session.timeout.ms", SET, "1000")) == (
            ErrorCode.INVALID_CONFIG,
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        )
        assert alter(broker.bootstrap, group, ("consumer.heartbeat.interval.ms", SET, "99999")) == (
            ErrorCode.INVALID_CONFIG,
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        )
        assert alter(broker.bootstrap, group, ("session.timeout.ms", SET, "1")) == (
            ErrorCode.INVALID_CONFIG,
            "Unknown group config name: session.timeout.ms",
        )
        code, _ = alter(broker.bootstrap, group, ("consumer.heartbeat.interval.ms", SET, "soon"))
        assert code == ErrorCode.INVALID_CONFIG
        assert alter(broker.bootstrap, group, ("consumer.heartbeat.interval.ms", DELETE, None)) == (0, None)
        assert describe(broker.bootstrap, group)["consumer.heartbeat.interval.ms"] == ("3000", 5)
        assert describe(broker.bootstrap, group)["consumer.session.timeout.ms"] == ("50000", 8)
    # the overrides are in the store: a restarted broker still has them
    with BrokerProcess(tmp_path / "data", overrides) as broker:
        assert describe(broker.bootstrap, group)["consumer.session.timeout.ms"] == ("50000", 8)


def test_a_member_is_timed_out_by_its_groups_session_timeout():
    import asyncio
    import time

    from tests.group.test_consumer_group import hb, make

    c = make(**{"group.consumer.min.session.timeout.ms": 100, "group.consumer.min.heartbeat.interval.ms": 50})
    c.configs.alter(
        "g", [("consumer.session.timeout.ms", SET, "150"), ("consumer.heartbeat.interval.ms", SET, "60")], False, False
    )

    async def scenario():
        joined = await hb(c, "a", 0, names=["t"])
        assert joined.heartbeat_interval_ms == 60
        await hb(c, "b", 0, names=["t"], group="other")  # the broker's 45 s
        deadline = time.monotonic() + WAIT_S
        while "a" in c.consumer.groups["g"].members and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert "a" not in c.consumer.groups["g"].members and "b" in c.consumer.groups["other"].members
        for member in c.consumer.groups["other"].members.values():
            cancel_timers(member)

    asyncio.run(scenario())
