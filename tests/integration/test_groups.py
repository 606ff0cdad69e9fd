"""Consumer groups with real confluent-kafka consumers against a real broker process.

Membership and rebalancing (eager and cooperative), session expiry of a killed member, static
membership, committed offsets (exactly-once consumption with synchronous commits, surviving a
restart), independent groups, and group names of any length or content.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.group.support import (
    WAIT_S,
    Member,
    close_all,
    committed,
    create_topic,
    poll_all,
    produce,
    raw_request,
    unique,
    wait_for_assignment,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[2]  # for ``python -m tests.group.member_process``


def describe(bootstrap: str, group: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=WAIT_S)[group].result(WAIT_S)


def test_three_consumers_share_six_partitions(broker):
    topic = create_topic(broker.bootstrap, unique("six"), 6)
    group = unique("g")
    members = [Member(broker.bootstrap, group, topic, f"m{i}") for i in range(3)]
    try:
        owned = wait_for_assignment(members, 6, sizes=[2, 2, 2])
        assert set().union(*owned) == set(range(6))
        description = describe(broker.bootstrap, group)
        assert description.state.name == "STABLE" and len(description.members) == 3
        by_client = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in description.members}
        assert sorted(by_client) == ["m0", "m1", "m2"]
        assert {m.host for m in description.members} == {"/127.0.0.1"}  # Java's InetAddress.toString(), as Kafka
        assert [by_client[f"m{i}"] for i in range(3)] == owned  # the broker reports what the members hold
    finally:
        close_all(members)


def test_closed_member_partitions_move_to_the_others_quickly(broker):
    topic = create_topic(broker.bootstrap, unique("six"), 6)
    group = unique("g")
    members = [Member(broker.bootstrap, group, topic, f"m{i}") for i in range(3)]
    try:
        wait_for_assignment(members, 6, sizes=[2, 2, 2])
        leaving = members.pop(1)
        started = time.monotonic()
        leaving.close()  # sends LeaveGroup: no session timeout to wait for
        owned = wait_for_assignment(members, 6, timeout=5, sizes=[3, 3])
        took = time.monotonic() - started
        assert set().union(*owned) == set(range(6))
        assert took < 4, f"takeover after close() took {took:.1f}s"
    finally:
        close_all(members)


class MemberProcess:
    """tests/group/member_process.py in a subprocess; its assignment lines arrive on a queue."""

    def __init__(self, bootstrap: str, group: str, topic: str, *extra: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.group.member_process", bootstrap, group, topic, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=REPO,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.assigned: set[int] | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def drain(self) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line.startswith("assigned"):
                text = line[len("assigned") :].strip()
                self.assigned = {int(p) for p in text.split(",")} if text else set()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def test_killed_member_partitions_move_after_session_timeout(broker):
    """SIGKILL sends no LeaveGroup: the survivors take over once session.timeout.ms (6 s) has passed."""
    topic = create_topic(broker.bootstrap, unique("six"), 6)
    group = unique("g")
    members = [Member(broker.bootstrap, group, topic, f"m{i}") for i in range(2)]
    victim = MemberProcess(broker.bootstrap, group, topic)
    try:
        tick = poll_all(members)

        def three_way_split() -> bool:
            victim.drain()
            owned = [m.owned for m in members] + [victim.assigned or set()]
            return sorted(len(o) for o in owned) == [2, 2, 2] and set().union(*owned) == set(range(6))

        wait_until(three_way_split, 20, what="a 2/2/2 split with the member process", tick=tick)
        victim.kill()
        killed = time.monotonic()
        owned = wait_for_assignment(members, 6, timeout=15, sizes=[3, 3])
        took = time.monotonic() - killed
        assert set().union(*owned) == set(range(6))
        assert 4.5 <= took <= 12, f"takeover {took:.1f}s after SIGKILL (session.timeout.ms=6000)"
    finally:
        victim.kill()
        close_all(members)


def test_synchronous_commits_consume_every_message_exactly_once(broker):
    """Members join one by one while consuming (three rebalances); each message is processed, then
    committed synchronously before the next poll, so no message is lost or seen twice."""
    topic = create_topic(broker.bootstrap, unique("eo"), 6)
    group = unique("g")
    total = 600
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(total)], partitions=6)
    seen: list[bytes] = []
    members: list[Member] = []
    commit_errors: list[str] = []

    def consume_some(rounds: int) -> None:
        for _ in range(rounds):
            for member in members:
                msg = member.poll(0.01)
                if msg is not None:
                    seen.append(msg.value())
                    time.sleep(0.003)  # "processing": keeps the stream going through the rebalances
                    try:
                        member.consumer.commit(message=msg, asynchronous=False)
                    except KafkaException as exc:
                        commit_errors.append(str(exc))

    try:
        for i in range(3):
            members.append(Member(broker.bootstrap, group, topic, f"m{i}"))
            consume_some(40)
        wait_until(lambda: len(seen) >= total, 25, what=f"{total} messages", tick=lambda: consume_some(5))
        consume_some(50)  # anything more would be a duplicate
        assert not commit_errors, commit_errors[:3]
        assert len(seen) == total and set(seen) == {f"v{i}".encode() for i in range(total)}
        assert len([m for m in members if m.messages]) >= 2, "the work was not shared"
        assert committed(broker.bootstrap, group, topic, 6) == {p: total // 6 for p in range(6)}
    finally:
        close_all(members)


def test_cooperative_sticky_moves_only_what_the_new_member_takes(broker):
    topic = create_topic(broker.bootstrap, unique("coop"), 6)
    group = unique("g")
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [Member(broker.bootstrap, group, topic, f"m{i}", **coop) for i in range(2)]
    try:
        before = wait_for_assignment(members, 6, sizes=[3, 3])
        for member in members:
            member.events.clear()
        members.append(Member(broker.bootstrap, group, topic, "m2", **coop))
        after = wait_for_assignment(members, 6, timeout=20, sizes=[2, 2, 2])
        moved = set()
        for old, new, member in zip(before, after, members):
            assert new < old, f"{member.name} kept {new} of {old}: only a subset may stay"
            revoked = {p for kind, parts in member.events if kind in ("revoke", "lost") for p in parts}
            assert revoked == old - new, f"{member.name} lost {revoked}, expected only {old - new}"
            assert not any(kind == "assign" and parts for kind, parts in member.events), (
                f"{member.name} was reassigned partitions: {member.events}"
            )
            moved |= revoked
        assert after[2] == moved
        assert describe(broker.bootstrap, group).partition_assignor == "cooperative-sticky"
        # and when a member leaves, the others only gain partitions
        for member in members:
            member.events.clear()
        members[0].close()
        final = wait_for_assignment(members[1:], 6, sizes=[3, 3])
        for old, new, member in zip(after[1:], final, members[1:]):
            assert new > old and not any(kind != "assign" for kind, _ in member.events), member.events
    finally:
        close_all(members)


def test_two_groups_each_receive_every_message(broker):
    topic = create_topic(broker.bootstrap, unique("fanout"), 3)
    values = [f"m{i}".encode() for i in range(90)]
    produce(broker.bootstrap, topic, values, partitions=3)
    groups = [Member(broker.bootstrap, unique("g"), topic, f"c{i}") for i in range(2)]
    try:
        wait_until(
            lambda: all(len(m.messages) >= len(values) for m in groups),
            what="both groups to read all",
            tick=poll_all(groups),
        )
        for member in groups:
            assert sorted(msg.value() for msg in member.messages) == sorted(values)
    finally:
        close_all(groups)


def test_committed_offsets_survive_a_broker_restart(broker):
    topic = create_topic(broker.bootstrap, unique("durable"), 3)
    group = unique("g")
    produce(broker.bootstrap, topic, [f"a{i}".encode() for i in range(30)], partitions=3)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        offsets = [TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 10), TopicPartition(topic, 2, 3)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    before = committed(broker.bootstrap, group, topic, 3)
    assert before == {0: 7, 1: 10, 2: 3}

    broker.restart()  # a new port: every client below reads broker.bootstrap again
    assert committed(broker.bootstrap, group, topic, 3) == before
    member = Member(broker.bootstrap, group, topic, "after-restart")
    try:
        remaining = 30 - sum(before.values())
        wait_until(
            lambda: len(member.messages) >= remaining, what=f"{remaining} uncommitted messages", tick=poll_all([member])
        )
        member.poll(0.5)
        got = {(m.partition(), m.offset()) for m in member.messages}
        assert got == {(p, o) for p in range(3) for o in range(before[p], 10)}
    finally:
        member.close()


@pytest.mark.parametrize("restarting", [0, 2], ids=["leader", "follower"])
def test_static_member_restart_gets_its_partitions_back_without_a_rebalance(broker, restarting):
    topic = create_topic(broker.bootstrap, unique("static"), 6)
    group = unique("g")

    def static(name: str) -> Member:
        return Member(broker.bootstrap, group, topic, name, **{"group.instance.id": f"instance-{name}"})

    members = [static(name) for name in ("a", "b", "c")]
    try:
        owned = wait_for_assignment(members, 6, sizes=[2, 2, 2])
        ids_before = {m.group_instance_id: m.member_id for m in describe(broker.bootstrap, group).members}
        for member in members:
            member.events.clear()
        name = "abc"[restarting]
        members[restarting].close()  # a static member sends no LeaveGroup: the group keeps its place
        members[restarting] = static(name)
        wait_until(
            lambda: members[restarting].owned == owned[restarting],
            10,
            what="the restarted member's old partitions",
            tick=poll_all(members),
        )
        deadline = time.monotonic() + 2  # heartbeats of the others would carry any rebalance by now
        while time.monotonic() < deadline:
            poll_all(members)()
        others = [m for i, m in enumerate(members) if i != restarting]
        assert all(m.events == [] for m in others), f"the others were rebalanced: {[m.events for m in others]}"
        assert [m.owned for m in members] == owned
        description = describe(broker.bootstrap, group)
        assert description.state.name == "STABLE"
        ids_after = {m.group_instance_id: m.member_id for m in description.members}
        for other in set("abc") - {name}:
            assert ids_after[f"instance-{other}"] == ids_before[f"instance-{other}"]
        assert ids_after[f"instance-{name}"] != ids_before[f"instance-{name}"]  # a new process, a new member id
    finally:
        close_all(members)


@pytest.mark.parametrize(
    "name",
    ["x" * 10_000, "gruppe-äöü-€-😀-名前", "spaces and\ttabs ", "a/b:c*?"],
    ids=["10000-chars", "unicode", "whitespace", "punctuation"],
)
def test_any_group_name_joins_commits_and_lists(broker, name):
    topic = create_topic(broker.bootstrap, unique("names"), 2)
    produce(broker.bootstrap, topic, [b"one", b"two", b"three", b"four"], partitions=2)
    member = Member(broker.bootstrap, name, topic, "named")
    try:
        wait_until(lambda: len(member.messages) >= 4, what="4 messages", tick=poll_all([member]))
        member.consumer.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups(request_timeout=WAIT_S).result(WAIT_S)
        assert name in {g.group_id for g in listed.valid}
        description = describe(broker.bootstrap, name)
        assert description.group_id == name and len(description.members) == 1
    finally:
        member.close()
    assert committed(broker.bootstrap, name, topic, 2) == {0: 2, 1: 2}


def test_empty_and_oversized_group_ids_are_rejected_and_the_broker_carries_on(broker):
    bootstrap = broker.bootstrap
    topic = create_topic(bootstrap, unique("ids"), 1)
    found = raw_request(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": "", "key_type": 0})
    assert found.error_code == ErrorCode.INVALID_GROUP_ID
    join = {
        "group_id": "",
        "session_timeout": 6000,
        "rebalance_timeout": 6000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    assert raw_request(bootstrap, ApiKey.JOIN_GROUP, 6, join).error_code == ErrorCode.INVALID_GROUP_ID
    commit = {
        "group_id": "",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    response = raw_request(bootstrap, ApiKey.OFFSET_COMMIT, 8, commit)
    assert response.topics[0].partitions[0].error_code == ErrorCode.INVALID_GROUP_ID
    # __consumer_offsets keys hold the group id in an int16-length string: 32767 bytes at most.
    # A flexible JoinGroup can carry a longer one; it is refused, not half-stored.
    huge = "€" * 20_000  # 60,000 UTF-8 bytes
    assert (
        raw_request(bootstrap, ApiKey.JOIN_GROUP, 6, {**join, "group_id": huge}).error_code
        == ErrorCode.INVALID_GROUP_ID
    )
    response = raw_request(bootstrap, ApiKey.OFFSET_COMMIT, 8, {**commit, "group_id": huge})
    assert response.topics[0].partitions[0].error_code == ErrorCode.INVALID_GROUP_ID
    # an instance id, protocol name or member id that no record could hold is refused as well
    join["group_id"] = unique("g")
    wait_until(
        lambda: (
            raw_request(bootstrap, ApiKey.FIND_COORDINATOR, 3, {"key": join["group_id"], "key_type": 0}).error_code
            == ErrorCode.NONE
        ),
        what="__consumer_offsets to be created",
    )
    response = raw_request(bootstrap, ApiKey.JOIN_GROUP, 6, {**join, "group_instance_id": huge})
    assert response.error_code == ErrorCode.INVALID_REQUEST
    response = raw_request(bootstrap, ApiKey.JOIN_GROUP, 6, {**join, "protocols": [{"name": huge, "metadata": b""}]})
    assert response.error_code == ErrorCode.INVALID_REQUEST
    # offsets of partitions that do not exist are not stored (as in Kafka)
    commit["group_id"] = unique("g")
    commit["topics"] = [
        {
            "name": topic,
            "partitions": [
                {"partition_index": 0, "committed_offset": 1},
                {"partition_index": 1, "committed_offset": 1},
            ],
        },
        {"name": unique("missing"), "partitions": [{"partition_index": 0, "committed_offset": 1}]},
    ]
    response = raw_request(bootstrap, ApiKey.OFFSET_COMMIT, 8, commit)
    assert [[p.error_code for p in t.partitions] for t in response.topics] == [
        [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ]
    # and the broker still serves groups
    produce(bootstrap, topic, [b"still here"])
    member = Member(bootstrap, unique("g"), topic, "after")
    try:
        wait_until(lambda: member.messages, what="a message after the bad requests", tick=poll_all([member]))
    finally:
        member.close()
