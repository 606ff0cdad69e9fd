"""Online migration between classic and consumer groups (``group.consumer.migration.policy``) with
real clients: two classic confluent-kafka consumers, then a ``group.protocol=consumer`` one joins
(upgrade: the classic members go on inside the consumer group) and leaves (downgrade)."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.group.support import FAST_GROUP, WAIT_S, create_topic, produce, raw_request, unique, wait_until
from tests.kip848_support import KIP848_BROKER, PolledConsumer, consumer_groups, module_broker

pytestmark = pytest.mark.timeout(120)

BROKER = {**KIP848_BROKER, "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
broker = module_broker("migration", BROKER)


class Member(PolledConsumer):
    """A confluent-kafka consumer that processes at least once: it commits what it processed before
    it gives a partition up, and records what it owns at every moment."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str, **config: Any):
        from confluent_kafka import Consumer

        self.name = name
        settings = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
            **config,
        }
        if settings.get("group.protocol") != "consumer":
            settings.update(FAST_GROUP)
        self.consumer = Consumer(settings)
        self.owned: set[int] = set()
        self.values: list[bytes] = []
        self.closed = False
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lost)

    def _assign(self, _consumer, partitions) -> None:
        self.owned |= {p.partition for p in partitions}

    def _revoke(self, consumer, partitions) -> None:
        if partitions:
            try:
                consumer.commit(asynchronous=False)
            except Exception:  # noqa: BLE001 - nothing consumed yet, or fenced: at-least-once covers it
                pass
        self.owned -= {p.partition for p in partitions}

    def _lost(self, _consumer, partitions) -> None:
        self.owned -= {p.partition for p in partitions}


class Watch:
    """Polls the members and checks, at every step, that no partition has two owners."""

    def __init__(self, members: list[Member]):
        self.members = members

    def __call__(self) -> None:
        for m in self.members:
            m.poll()
        seen: dict[int, str] = {}
        for m in self.members:
            for p in m.owned:
                assert p not in seen, f"partition {p} owned by {seen[p]} and {m.name} at once"
                seen[p] = m.name


def group_type(bootstrap: str, group: str) -> str:
    listed = raw_request(bootstrap, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    return {g.group_id: g.group_type for g in listed.groups}.get(group, "")


def describe_members(bootstrap: str, group: str) -> list[tuple[str, int]]:
    """(client id, member type) of a consumer group's members: 0 classic, 1 consumer (KIP-1099)."""
    described = raw_request(
        bootstrap, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}
    )
    return sorted((m.client_id, m.member_type) for m in described.groups[0].members)


def cli_type(bootstrap: str, group: str) -> str:
    """The TYPE column of Kafka 4's ``--list --type`` for ``group``."""
    for line in consumer_groups(bootstrap, "--list", "--type").splitlines()[1:]:
        name, kind = line.split()[:2]
        if name == group:
            return kind
    return ""


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_consumer_protocol_member_upgrades_a_live_classic_group_and_its_leaving_downgrades_it(broker, strategy):
    topic = create_topic(broker.bootstrap, unique("mig"), 6)
    group = unique("g")
    first = [f"a{i}".encode() for i in range(60)]
    produce(broker.bootstrap, topic, first, partitions=6)
    classic = [
        Member(broker.bootstrap, group, topic, f"classic{i}", **{"partition.assignment.strategy": strategy})
        for i in range(2)
    ]
    members = list(classic)
    watch = Watch(members)
    try:
        wait_until(
            lambda: sorted(len(m.owned) for m in classic) == [3, 3] and sum(len(m.values) for m in classic) >= 60,
            WAIT_S * 2,
            what="the classic group stable 3/3 with every record",
            tick=watch,
        )
        assert group_type(broker.bootstrap, group) == "classic"
        new = Member(broker.bootstrap, group, topic, "modern", **{"group.protocol": "consumer"})
        members.append(new)
        second = [f"b{i}".encode() for i in range(60)]
        produce(broker.bootstrap, topic, second, partitions=6)
        wait_until(
            lambda: sorted(len(m.owned) for m in members) == [2, 2, 2],
            WAIT_S * 3,
            what="three members owning 2/2/2",
            tick=watch,
        )
        assert group_type(broker.bootstrap, group) == "consumer"
        assert describe_members(broker.bootstrap, group) == [("classic0", 0), ("classic1", 0), ("modern", 1)]
        assert cli_type(broker.bootstrap, group) == "Consumer"
        third = [f"c{i}".encode() for i in range(60)]
        produce(broker.bootstrap, topic, third, partitions=6)
        wait_until(
            lambda: set(first + second + third) <= {v for m in members for v in m.values} and new.values,
            WAIT_S * 2,
            what="every record, some of them by the new member",
            tick=watch,
        )
        new.close()  # the last consumer-protocol member leaves: back to classic
        wait_until(
            lambda: (
                group_type(broker.bootstrap, group) == "classic" and sorted(len(m.owned) for m in classic) == [3, 3]
            ),
            WAIT_S * 3,
            what="a classic group again, 3/3",
            tick=watch,
        )
        assert cli_type(broker.bootstrap, group) == "Classic"
        fourth = [f"d{i}".encode() for i in range(60)]
        produce(broker.bootstrap, topic, fourth, partitions=6)
        wait_until(
            lambda: set(fourth) <= {v for m in classic for v in m.values},
            WAIT_S * 2,
            what="the classic members consuming after the downgrade",
            tick=watch,
        )
        received = [v for m in members for v in m.values]
        assert set(received) == set(first + second + third + fourth)  # nothing lost
        # at least once: a record is read again only when its partition moved before its commit
        assert len(received) - len(set(received)) <= len(received) // 2
    finally:
        for m in members:
            m.close()


def test_with_migration_disabled_a_live_classic_group_refuses_a_consumer_protocol_member(tmp_path):
    with BrokerProcess(tmp_path / "data", {**BROKER, "group.consumer.migration.policy": "disabled"}) as process:
        group = unique("g")
        subscription = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"  # v0, ["t"], null
        join = {
            "group_id": group,
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription}],
        }
        # JoinGroup v3: no MEMBER_ID_REQUIRED round trip; retried while __consumer_offsets is created
        # (FindCoordinator creates it)
        raw_request(process.bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        joined = wait_until(
            lambda: (
                (r := raw_request(process.bootstrap, ApiKey.JOIN_GROUP, 3, join)).error_code
                not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
                and r
            ),
            WAIT_S,
            what="a coordinator for the group",
        )
        assert joined.error_code == 0 and joined.leader == joined.member_id
        heartbeat = raw_request(
            process.bootstrap,
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            1,
            {
                "group_id": group,
                "member_id": "m",
                "member_epoch": 0,
                "rebalance_timeout": 30000,
                "subscribed_topic_names": ["t"],
                "topic_partitions": [],
            },
        )
        assert heartbeat.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert heartbeat.error_message == f"Group {group} is not a consumer group."
