"""The consumer group protocol (KIP-848) with a real client: confluent-kafka (librdkafka >= 2.12)
with ``group.protocol=consumer``, against a broker whose heartbeat interval is short so that
reconciliation happens within the test's time budget. kafka-python and aiokafka have no KIP-848
support; kafka-python checks here that classic groups keep working beside consumer groups.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from strom.cluster.zookeeper_server import free_port
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.group.support import (
    WAIT_S,
    create_topic,
    produce,
    raw_request,
    unique,
    wait_until,
)
from tests.integration.clients import kafka_python_subscribed
from tests.kip848_support import KIP848_BROKER, PolledConsumer, consumer_groups, module_broker

pytestmark = pytest.mark.timeout(120)

BROKER = {**KIP848_BROKER, "offsets.topic.num.partitions": "5"}


def restartable(overrides: dict[str, str]) -> dict[str, str]:
    """A fixed listener port below the ephemeral range, so the restarted broker gets it back:
    while it is down, a port from a bind on port 0 could become some connection's source port."""
    return {**overrides, "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"}


broker = module_broker("kip848", BROKER)


class NewConsumer(PolledConsumer):
    """A ``group.protocol=consumer`` consumer that records what it received and what it owns."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], **config: Any):
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
                **config,
            }
        )
        self.owned: set[tuple[str, int]] = set()
        self.revoked: set[tuple[str, int]] = set()
        self.values: list[bytes] = []
        self.closed = False
        self.consumer.subscribe(topics, on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lose)

    def _assign(self, _consumer, partitions) -> None:
        self.owned |= {(p.topic, p.partition) for p in partitions}

    def _revoke(self, consumer, partitions) -> None:
        """Commit what was read of the partitions given up, as a user with auto-commit off must: their
        next owner starts from the committed offset (no commit: from the earliest, reading them again)."""
        read = [p for p in consumer.position(partitions) if p.offset >= 0]  # nothing read: nothing to commit
        if read:
            consumer.commit(offsets=read, asynchronous=False)
        self._lose(consumer, partitions)

    def _lose(self, _consumer, partitions) -> None:
        self.owned -= {(p.topic, p.partition) for p in partitions}
        self.revoked |= {(p.topic, p.partition) for p in partitions}


def tick(consumers: list[NewConsumer]):
    def run() -> None:
        for c in consumers:
            c.poll()

    return run


def settled(consumers: list[NewConsumer], total: int, each: list[int]) -> bool:
    owned = [c.owned for c in consumers]
    return len(set().union(*owned)) == total == sum(map(len, owned)) and sorted(map(len, owned)) == sorted(each)


def test_client_uses_the_new_protocol_and_apiversions_lists_it(broker):
    import confluent_kafka

    assert confluent_kafka.libversion()[1] >= 0x020C0000, "librdkafka >= 2.12 has KIP-848 as GA"
    versions = raw_request(
        broker.bootstrap, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert keys[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1) and keys[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)


def test_three_members_balance_consume_once_and_a_leaving_one_hands_over(broker):
    topic = create_topic(broker.bootstrap, unique("k848"), 6)
    group = unique("g")
    produce(broker.bootstrap, topic, [f"a{i}".encode() for i in range(60)], partitions=6)
    consumers = [NewConsumer(broker.bootstrap, group, [topic], **{"client.id": f"c{i}"}) for i in range(3)]
    try:
        wait_until(
            lambda: sum(len(c.values) for c in consumers) >= 60 and settled(consumers, 6, [2, 2, 2]),
            WAIT_S * 2,
            what="60 records and a 2/2/2 assignment",
            tick=tick(consumers),
        )
        received = sorted(v for c in consumers for v in c.values)
        assert received == sorted(f"a{i}".encode() for i in range(60))  # each exactly once
        for c in consumers:  # incremental: a member gave up only what moved, never what it kept
            assert not c.revoked & c.owned
        for c in consumers:
            c.consumer.commit(asynchronous=False)
        describe = consumer_groups(broker.bootstrap, "--describe", "--group", group, "--members", "--verbose")
        assert describe.count(group) == 3 and describe.count(topic) == 6  # current and target, per member
        leaving = consumers.pop(0)
        moved = set(leaving.owned)
        leaving.close()
        wait_until(lambda: settled(consumers, 6, [3, 3]), WAIT_S, what="a 3/3 assignment", tick=tick(consumers))
        assert moved <= consumers[0].owned | consumers[1].owned
        before = [len(c.values) for c in consumers]
        produce(broker.bootstrap, topic, [f"b{i}".encode() for i in range(30)], partitions=6)
        wait_until(
            lambda: sum(len(c.values) for c in consumers) - sum(before) >= 30,
            WAIT_S,
            what="30 more records",
            tick=tick(consumers),
        )
        later = sorted(v for c, n in zip(consumers, before) for v in c.values[n:])
        assert later == sorted(f"b{i}".encode() for i in range(30))  # committed offsets were honoured
        for c in consumers:
            c.consumer.commit(asynchronous=False)
    finally:
        for c in consumers:
            c.close()
    # a new member resumes from the committed offsets: only what came after
    produce(broker.bootstrap, topic, [b"c0", b"c1"], partitions=6)
    resumed = NewConsumer(broker.bootstrap, group, [topic])
    try:
        wait_until(lambda: len(resumed.values) >= 2, WAIT_S, what="the two new records", tick=tick([resumed]))
        assert sorted(resumed.values) == [b"c0", b"c1"]
        state = consumer_groups(broker.bootstrap, "--describe", "--group", group, "--state")
        assert "uniform" in state and "Stable" in state
    finally:
        resumed.close()


def test_regex_subscription_picks_up_a_topic_created_later(broker):
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    first = create_topic(broker.bootstrap, f"{prefix}-a", 2)
    produce(broker.bootstrap, first, [b"a0", b"a1"], partitions=2)
    group = unique("g")
    consumer = NewConsumer(broker.bootstrap, group, [f"^{prefix}-.*"])
    try:
        wait_until(lambda: len(consumer.values) >= 2, WAIT_S, what="records of the first topic", tick=tick([consumer]))
        described = raw_request(
            broker.bootstrap,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            1,
            {"group_ids": [group], "include_authorized_operations": False},
        )
        (member,) = described.groups[0].members
        assert prefix in (member.subscribed_topic_regex or "")  # the broker, not the client, matches it
        second = create_topic(broker.bootstrap, f"{prefix}-b", 3)
        wait_until(
            lambda: {t for t, _ in consumer.owned} == {first, second},
            WAIT_S,
            what="the new topic's partitions",
            tick=tick([consumer]),
        )
        produce(broker.bootstrap, second, [b"b0", b"b1", b"b2"], partitions=3)
        wait_until(lambda: len(consumer.values) >= 5, WAIT_S, what="records of the new topic", tick=tick([consumer]))
        assert sorted(consumer.values) == [b"a0", b"a1", b"b0", b"b1", b"b2"]
    finally:
        consumer.close()


def test_classic_groups_work_beside_and_a_live_consumer_group_asks_classic_members_for_an_id(broker):
    topic = create_topic(broker.bootstrap, unique("mix"), 2)
    produce(broker.bootstrap, topic, [b"x0", b"x1"], partitions=2)
    new_group, classic_group = unique("new"), unique("classic")
    consumer = NewConsumer(broker.bootstrap, new_group, [topic])
    classic = kafka_python_subscribed(
        [topic],
        bootstrap_servers=broker.bootstrap,
        group_id=classic_group,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        metadata_max_age_ms=500,
    )
    try:
        seen: list[bytes] = []

        def classic_poll() -> None:
            for records in classic.poll(timeout_ms=100).values():
                seen.extend(r.value for r in records)
            consumer.poll()

        try:
            wait_until(
                lambda: len(seen) >= 2 and len(consumer.values) >= 2,
                WAIT_S,
                what="both groups consuming",
                tick=classic_poll,
            )
        except AssertionError as exc:  # say which of the two did not
            raise AssertionError(
                f"{exc}: classic got {seen} (assigned {classic.assignment()}), consumer protocol "
                f"got {consumer.values} (owns {consumer.owned})"
            ) from None
        assert sorted(seen) == sorted(consumer.values) == [b"x0", b"x1"]
        joined = raw_request(
            broker.bootstrap,
            ApiKey.JOIN_GROUP,
            5,
            {
                "group_id": new_group,
                "session_timeout": 10000,
                "rebalance_timeout": 10000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
        # Kafka 4: a live consumer group takes classic members in (online migration); this one is
        # first asked to rejoin with the member id it was given (tests/group/test_migration.py)
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED and joined.member_id
        listed = raw_request(broker.bootstrap, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
        types = {g.group_id: g.group_type for g in listed.groups}
        assert types[new_group] == "consumer" and types[classic_group] == "classic"
        described = raw_request(
            broker.bootstrap,
            ApiKey.DESCRIBE_GROUPS,
            5,
            {"groups": [new_group, classic_group], "include_authorized_operations": False},
        )
        states = {g.group_id: (g.error_code, g.group_state, g.protocol_type) for g in described.groups}
        assert states[new_group] == (0, "Dead", "")  # as Kafka below DescribeGroups v6: not a classic group
        assert states[classic_group] == (0, "Stable", "consumer")
        only = raw_request(broker.bootstrap, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["Consumer"]})
        assert new_group in {g.group_id for g in only.groups} and classic_group not in {g.group_id for g in only.groups}
        both = consumer_groups(
            broker.bootstrap, "--describe", "--group", new_group, "--group", classic_group, "--members"
        )
        assert new_group in both and classic_group in both
    finally:
        classic.close()
        consumer.close()


RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}


def heartbeat(bootstrap: str, group: str, member: str, epoch: int, **fields: Any):
    request = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rebalance_timeout": -1,
        "topic_partitions": None,
        **fields,
    }
    return raw_request(bootstrap, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)


def test_members_and_epochs_survive_a_coordinator_restart(tmp_path):
    process = BrokerProcess(tmp_path / "data", restartable(BROKER))
    with process:
        topic = create_topic(process.bootstrap, unique("restart"), 4)
        group = unique("g")
        raw_request(process.bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})

        def join():  # FindCoordinator has the broker create __consumer_offsets; retry until it serves
            answer = heartbeat(
                process.bootstrap,
                group,
                "m1",
                0,
                rebalance_timeout=30000,
                subscribed_topic_names=[topic],
                topic_partitions=[],
            )
            return answer if answer.error_code not in RETRIABLE else None

        joined = wait_until(join, WAIT_S, interval=0.2, what="the coordinator to serve")
        assert joined.error_code == 0 and joined.member_epoch == 1
        assigned = {(tp.topic_id, tuple(tp.partitions)) for tp in joined.assignment.topic_partitions}
        assert sum(len(p) for _, p in assigned) == 4
        process.restart()

        def reloaded():
            answer = heartbeat(
                process.bootstrap,
                group,
                "m1",
                1,
                topic_partitions=[{"topic_id": t, "partitions": list(p)} for t, p in assigned],
            )
            return answer if answer.error_code not in RETRIABLE else None

        answer = wait_until(reloaded, WAIT_S, interval=0.2, what="the coordinator to serve again")
        assert (answer.error_code, answer.member_epoch) == (0, 1)  # known member, same epoch: no rejoin
        described = raw_request(
            process.bootstrap,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            1,
            {"group_ids": [group], "include_authorized_operations": False},
        )
        (entry,) = described.groups
        assert (entry.error_code, entry.group_epoch, entry.assignment_epoch) == (0, 1, 1)
        assert [m.member_id for m in entry.members] == ["m1"]
        assert sum(len(tp.partitions) for tp in entry.members[0].assignment.topic_partitions) == 4
        fenced = heartbeat(process.bootstrap, group, "m1", 9)
        assert fenced.error_code == ErrorCode.FENCED_MEMBER_EPOCH
        left = heartbeat(process.bootstrap, group, "m1", -1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        gone = heartbeat(process.bootstrap, group, "m1", 1)
        assert gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert Path(tmp_path / "data").exists()


def test_a_consumer_keeps_consuming_across_a_broker_restart(tmp_path):
    process = BrokerProcess(tmp_path / "data", restartable(BROKER))
    with process:
        topic = create_topic(process.bootstrap, unique("survive"), 3)
        group = unique("g")
        produce(process.bootstrap, topic, [b"before0", b"before1", b"before2"], partitions=3)
        consumer = NewConsumer(process.bootstrap, group, [topic], **{"reconnect.backoff.max.ms": 500})
        try:
            wait_until(lambda: len(consumer.values) >= 3, WAIT_S, what="the first records", tick=tick([consumer]))
            consumer.consumer.commit(asynchronous=False)
            process.restart()
            produce(process.bootstrap, topic, [b"after0", b"after1", b"after2"], partitions=3)
            wait_until(
                lambda: len(consumer.values) >= 6,
                WAIT_S * 2,
                what="the records after the restart",
                tick=tick([consumer]),
            )
            assert sorted(consumer.values) == [b"after0", b"after1", b"after2", b"before0", b"before1", b"before2"]
            assert consumer.owned == {(topic, p) for p in range(3)}
        finally:
            consumer.close()


def test_a_member_joining_a_stable_group_takes_only_what_moves(broker):
    """The benchmark's scenario (strom.bench.groups) in small: one member joins a stable group of
    four; every partition ends owned exactly once, and only the partition that moves to the
    newcomer is revoked from anyone."""
    topic = create_topic(broker.bootstrap, unique("join"), 8)
    group = unique("g")
    consumers = [NewConsumer(broker.bootstrap, group, [topic]) for _ in range(4)]
    try:
        wait_until(lambda: settled(consumers, 8, [2, 2, 2, 2]), WAIT_S, what="2/2/2/2", tick=tick(consumers))
        before = [set(c.owned) for c in consumers]
        for c in consumers:
            c.revoked.clear()
        newcomer = NewConsumer(broker.bootstrap, group, [topic])
        consumers.append(newcomer)
        wait_until(lambda: settled(consumers, 8, [1, 1, 2, 2, 2]), WAIT_S, what="2/2/2/1/1", tick=tick(consumers))
        owned = [p for c in consumers for p in c.owned]
        assert sorted(owned) == [(topic, p) for p in range(8)]  # each partition exactly once
        revoked = set().union(*(c.revoked for c in consumers[:4]))
        assert revoked == newcomer.owned and len(revoked) == 1
        for c, had in zip(consumers, before):
            assert c.owned == had - revoked  # the others kept consuming what they had
    finally:
        for c in consumers:
            c.close()


def _same_partition_group(group: str, partitions: int) -> str:
    from strom.group.records import partition_for_group

    target = partition_for_group(group, partitions)
    return next(
        name
        for name in (f"probe-{i}" for i in range(10_000))
        if name != group and partition_for_group(name, partitions) == target
    )


def _set_offsets_min_isr(bootstrap: str, value: str) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(
        "topic",
        "__consumer_offsets",
        incremental_configs=[ConfigEntry("min.insync.replicas", value, incremental_operation=AlterConfigOpType.SET)],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer: it owns the future
    [future] = admin.incremental_alter_configs([resource]).values()
    future.result(WAIT_S)


def _describe(bootstrap: str, group: str) -> tuple[int, int, dict[str, int]]:
    described = raw_request(
        bootstrap, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}
    )
    (entry,) = described.groups
    assert entry.error_code == 0
    members = {m.member_id: sum(len(tp.partitions) for tp in m.assignment.topic_partitions) for m in entry.members}
    return entry.group_epoch, entry.assignment_epoch, members


def test_a_heartbeat_whose_records_cannot_be_written_changes_nothing(tmp_path):
    """__consumer_offsets with min.insync.replicas=2 on one broker: every write of the group's
    records fails with NOT_ENOUGH_REPLICAS. A joining member gets COORDINATOR_NOT_AVAILABLE (Kafka's
    retriable answer for it) and the group stays as its records say, in memory and after a restart;
    once the topic can be written again the same join succeeds."""
    process = BrokerProcess(tmp_path / "data", restartable(BROKER))
    with process:
        topic = create_topic(process.bootstrap, unique("nowrite"), 4)
        group = unique("g")
        raw_request(process.bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})

        def join(member: str, group_id: str = group):
            return heartbeat(
                process.bootstrap,
                group_id,
                member,
                0,
                rebalance_timeout=30000,
                subscribed_topic_names=[topic],
                topic_partitions=[],
            )

        first = wait_until(
            lambda: (answer := join("m1")).error_code not in RETRIABLE and answer,
            WAIT_S,
            interval=0.2,
            what="the coordinator to serve",
        )
        assert (first.error_code, first.member_epoch) == (0, 1)
        _set_offsets_min_isr(process.bootstrap, "2")
        probe = _same_partition_group(group, int(BROKER["offsets.topic.num.partitions"]))
        wait_until(  # the topic config reaches the log: a write to the same partition fails
            lambda: join("p", probe).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE,
            WAIT_S,
            interval=0.2,
            what="writes to __consumer_offsets to fail",
        )
        refused = join("m2")
        assert (refused.error_code, refused.member_epoch, refused.assignment) == (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            -1,
            None,
        )
        assert heartbeat(process.bootstrap, group, "m1", -1).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert _describe(process.bootstrap, group) == (1, 1, {"m1": 4})
        process.restart()  # what was written is what the group was
        raw_request(process.bootstrap, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        wait_until(
            lambda: join("m2").error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE,
            WAIT_S,
            interval=0.2,
            what="the reloaded coordinator to answer",
        )
        assert _describe(process.bootstrap, group) == (1, 1, {"m1": 4})
        _set_offsets_min_isr(process.bootstrap, "1")
        joined = wait_until(
            lambda: (answer := join("m2")).error_code not in RETRIABLE and answer,
            WAIT_S,
            interval=0.2,
            what="the join to be stored",
        )
        assert (joined.error_code, joined.member_epoch) == (0, 2)
        assert _describe(process.bootstrap, group) == (2, 2, {"m1": 4, "m2": 0})  # m1 has yet to revoke
