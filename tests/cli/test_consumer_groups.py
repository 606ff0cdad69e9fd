"""``strom consumer-groups`` against a real broker, through the real command line.

The expected tables are written out with Kafka's ConsumerGroupCommand formats (GROUP/TOPIC columns
at least 15 wide, PARTITION 10, offsets and LAG 15, a blank line before each table).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.broker_process import BrokerProcess
from tests.group.support import (
    Member,
    close_all,
    committed,
    create_topic,
    poll_all,
    produce,
    unique,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

NONE = -1001  # confluent-kafka's OFFSET_INVALID: nothing committed


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("groups-cli") / "data") as process:
        yield process


def strom(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "strom.cli.main", "consumer-groups", "--bootstrap-server",
                           broker.bootstrap, *args], capture_output=True, text=True, timeout=60)


def commit_offsets(broker, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def offsets_row(group, topic, partition, current, end, lag, consumer="-", host="-", client="-", widths=(15, 15, 15, 15)):
    g, t, c, h = widths
    return (f"{group:<{g}} {topic:<{t}} {partition:<10} {current:<15} {end:<15} {lag:<15} "
            f"{consumer:<{c}} {host:<{h}} {client}")


def test_describe_shows_offsets_and_lag_of_an_active_group(broker):
    topic = create_topic(broker.bootstrap, unique("lag"), 3)
    group = unique("billing")
    produce(broker.bootstrap, topic, [f"v{i}".encode() for i in range(30)], partitions=3)  # 10 per partition
    member = Member(broker.bootstrap, group, topic, "billing-app")
    try:
        wait_until(lambda: len(member.messages) >= 30, what="30 messages", tick=poll_all([member]))
        consumed = {0: 4, 1: 10, 2: 0}  # as if it had processed 14 of them, committing each synchronously
        for msg in member.messages:
            if msg.offset() < consumed[msg.partition()]:
                member.consumer.commit(message=msg, asynchronous=False)
        result = strom(broker, "--describe", "--group", group)
        assert result.returncode == 0, result.stdout + result.stderr
        member_id = next(iter(_describe_members(broker, group)))
        widths = (max(15, len(group)), max(15, len(topic)), max(15, len(member_id)), 15)
        header = offsets_row("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                             "HOST", "CLIENT-ID", widths)
        rows = [offsets_row(group, topic, 0, 4, 10, 6, member_id, "/127.0.0.1", "billing-app", widths),
                offsets_row(group, topic, 1, 10, 10, 0, member_id, "/127.0.0.1", "billing-app", widths),
                offsets_row(group, topic, 2, "-", 10, "-", member_id, "/127.0.0.1", "billing-app", widths)]
        assert result.stdout == "\n" + "\n".join([header, *rows]) + "\n"
        assert result.stderr == ""

        members = strom(broker, "--describe", "--group", group, "--members")
        g, c = max(15, len(group)), max(15, len(member_id))
        assert members.stdout == (f"\n{'GROUP':<{g}} {'CONSUMER-ID':<{c}} {'HOST':<15} {'CLIENT-ID':<15} "
                                  f"{'#PARTITIONS':<15} \n{group:<{g}} {member_id:<{c}} {'/127.0.0.1':<15} "
                                  f"{'billing-app':<15} {'3':<15} \n")

        state = strom(broker, "--describe", "--group", group, "--state")
        coordinator = f"127.0.0.1:{broker.port}  (0)"
        assert state.stdout == (f"\n{'GROUP':<{g}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} "
                                f"{'STATE':<20} #MEMBERS\n{group:<{g}} {coordinator:<25} {'range':<20} "
                                f"{'Stable':<20} 1\n")

        listed = strom(broker, "--list")
        assert group in listed.stdout.splitlines()
        with_state = strom(broker, "--list", "--state", "Stable")
        width = max([15] + [len(line.split()[0]) for line in with_state.stdout.splitlines()[1:]]) + 10
        assert with_state.stdout.splitlines()[0] == f"{'GROUP':<{width}} {'STATE':<20}"
        assert f"{group:<{width}} {'Stable':<20}" in with_state.stdout.splitlines()
        assert group not in strom(broker, "--list", "--state", "Empty").stdout
    finally:
        member.close()


def _describe_members(broker, group):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return [m.member_id for m in admin.describe_consumer_groups([group])[group].result(15).members]


def test_describe_of_an_inactive_group_and_of_a_missing_one(broker):
    topic = create_topic(broker.bootstrap, unique("idle"), 2)
    group = unique("idle")
    produce(broker.bootstrap, topic, [b"a", b"b", b"c", b"d", b"e"], partitions=2)  # 3 + 2
    commit_offsets(broker, group, topic, {0: 1})
    result = strom(broker, "--describe", "--group", group)
    assert result.returncode == 0
    widths = (15, max(15, len(topic)), 15, 15)
    assert result.stdout == "\n" + "\n".join([
        offsets_row("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                    "CLIENT-ID", widths),
        offsets_row(group, topic, 0, 1, 3, 2, widths=widths)]) + "\n"
    assert result.stderr == f"\nConsumer group '{group}' has no active members.\n"

    missing = strom(broker, "--describe", "--group", "no-such-group")
    assert missing.returncode == 1
    assert missing.stdout == "\nError: Consumer group 'no-such-group' does not exist.\n"


def test_reset_to_earliest_makes_the_group_read_again_from_the_start(broker):
    topic = create_topic(broker.bootstrap, unique("replay"), 2)
    group = unique("replay")
    values = [f"r{i}".encode() for i in range(20)]
    produce(broker.bootstrap, topic, values, partitions=2)
    first = Member(broker.bootstrap, group, topic, "first")
    try:
        wait_until(lambda: len(first.messages) >= 20, what="20 messages", tick=poll_all([first]))
        first.consumer.commit(asynchronous=False)
        refused = strom(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert refused.returncode == 1
        assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state "
                f"is Stable.") in refused.stdout
        assert committed(broker.bootstrap, group, topic, 2) == {0: 10, 1: 10}
    finally:
        first.close()

    t = max(15, len(topic))
    plan = (f"\n{'GROUP':<15} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET\n{group:<15} {topic:<{t}} {0:<10} 0\n"
            f"{group:<15} {topic:<{t}} {1:<10} 0\n")
    dry = strom(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run")
    assert (dry.returncode, dry.stdout) == (0, plan)
    assert committed(broker.bootstrap, group, topic, 2) == {0: 10, 1: 10}  # a dry run changes nothing
    done = strom(broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert (done.returncode, done.stdout) == (0, plan)
    assert committed(broker.bootstrap, group, topic, 2) == {0: 0, 1: 0}

    again = Member(broker.bootstrap, group, topic, "again", **{"auto.offset.reset": "latest"})
    try:  # "latest" would skip everything: only the reset offsets make it read from the start
        wait_until(lambda: len(again.messages) >= 20, what="all 20 messages again", tick=poll_all([again]))
        assert sorted(m.value() for m in again.messages) == sorted(values)
    finally:
        again.close()


def reset_setup(broker) -> tuple[str, str, int]:
    """One partition, offsets 0..9 with timestamps base + i seconds; the group has committed 5."""
    from confluent_kafka import Producer

    topic = create_topic(broker.bootstrap, unique("scen"), 1)
    group = unique("scen")
    base = 1_700_000_000_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, f"s{i}".encode(), partition=0, timestamp=base + i * 1000)
    assert producer.flush(15) == 0
    commit_offsets(broker, group, topic, {0: 5})
    return topic, group, base


def reset(broker, group: str, scope: tuple[str, ...], *scenario: str) -> int:
    result = strom(broker, "--reset-offsets", "--group", group, *scope, *scenario, "--execute")
    assert result.returncode == 0, result.stdout + result.stderr
    return int(result.stdout.splitlines()[-1].split()[-1])


def test_reset_by_offset_shift_and_current(broker):
    topic, group, _ = reset_setup(broker)
    scope = ("--topic", topic)
    assert reset(broker, group, scope, "--shift-by", "-2") == 3
    assert reset(broker, group, scope, "--shift-by", "-100") == 0  # clamped to the log start
    assert reset(broker, group, scope, "--to-offset", "7") == 7
    assert reset(broker, group, scope, "--to-offset", "1000") == 10  # clamped to the log end
    assert reset(broker, group, ("--all-topics",), "--to-current") == 10
    assert committed(broker.bootstrap, group, topic, 1) == {0: 10}


def test_reset_by_time_to_the_ends_and_of_missing_partitions(broker):
    topic, group, base = reset_setup(broker)
    scope = ("--topic", topic)
    when = datetime.fromtimestamp((base + 4000) / 1000, timezone.utc)
    assert reset(broker, group, scope, "--to-datetime", when.strftime("%Y-%m-%dT%H:%M:%S.000Z")) == 4
    local = datetime.fromtimestamp((base + 6500) / 1000).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]  # no zone: local
    assert reset(broker, group, scope, "--to-datetime", local) == 7
    assert reset(broker, group, ("--topic", f"{topic}:0"), "--to-latest") == 10
    assert reset(broker, group, scope, "--to-earliest") == 0
    assert committed(broker.bootstrap, group, topic, 1) == {0: 0}
    bad = strom(broker, "--reset-offsets", "--group", group, "--topic", f"{topic}:3", "--to-earliest", "--execute")
    assert bad.returncode == 1 and f'The partitions "{topic}-3" do not exist' in bad.stdout


def test_delete_removes_the_group_and_its_offsets(broker):
    topic = create_topic(broker.bootstrap, unique("del"), 1)
    group = unique("doomed")
    produce(broker.bootstrap, topic, [b"x", b"y"])
    commit_offsets(broker, group, topic, {0: 2})
    busy = Member(broker.bootstrap, unique("busy"), topic, "busy")
    try:
        wait_until(lambda: busy.owned, what="an active group", tick=poll_all([busy]))
        active = strom(broker, "--delete", "--group", busy.group)
        assert active.returncode == 1
        assert "NON_EMPTY_GROUP" in active.stdout and "could not be deleted" in active.stdout
    finally:
        close_all([busy])
    assert group in strom(broker, "--list").stdout.splitlines()
    deleted = strom(broker, "--delete", "--group", group)
    assert (deleted.returncode, deleted.stdout) == (0, f"Deletion of requested consumer groups ('{group}') was "
                                                       "successful.\n")
    assert group not in strom(broker, "--list").stdout.splitlines()
    assert committed(broker.bootstrap, group, topic, 1) == {0: NONE}
    twice = strom(broker, "--delete", "--group", group)
    assert twice.returncode == 1 and "GROUP_ID_NOT_FOUND" in twice.stdout


def test_usage_errors_exit_2(broker):
    assert strom(broker, "--describe").returncode == 2
    assert strom(broker, "--reset-offsets", "--group", "g", "--topic", "t").returncode == 2
    assert strom(broker, "--reset-offsets", "--group", "g", "--to-earliest").returncode == 2
    assert strom(broker, "--list", "--describe").returncode == 2
