"""``strom consumer-groups`` against a real broker, through the real command line.

The expected tables are written out with Kafka's ConsumerGroupCommand formats (GROUP/TOPIC columns
at least 15 wide, PARTITION 10, offsets and LAG 15, a blank line before each table).
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime

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
    wait_for_assignment,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

NONE = -1001  # confluent-kafka's OFFSET_INVALID: nothing committed


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("groups-cli") / "data") as process:
        yield process


def strom(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "consumer-groups", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def commit_offsets(broker, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def offsets_row(
    group, topic, partition, current, end, lag, consumer="-", host="-", client="-", widths=(15, 15, 15, 15)
):
    g, t, c, h = widths
    return (
        f"{group:<{g}} {topic:<{t}} {partition:<10} {current:<15} {end:<15} {lag:<15} "
        f"{consumer:<{c}} {host:<{h}} {client}"
    )


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
        header = offsets_row(
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
            widths,
        )
        rows = [
            offsets_row(group, topic, 0, 4, 10, 6, member_id, "/127.0.0.1", "billing-app", widths),
            offsets_row(group, topic, 1, 10, 10, 0, member_id, "/127.0.0.1", "billing-app", widths),
            offsets_row(group, topic, 2, "-", 10, "-", member_id, "/127.0.0.1", "billing-app", widths),
        ]
        assert result.stdout == "\n" + "\n".join([header, *rows]) + "\n"
        assert result.stderr == ""

        members = strom(broker, "--describe", "--group", group, "--members")
        g, c = max(15, len(group)), max(15, len(member_id))
        assert members.stdout == (
            f"\n{'GROUP':<{g}} {'CONSUMER-ID':<{c}} {'HOST':<15} {'CLIENT-ID':<15} "
            f"{'#PARTITIONS':<15} \n{group:<{g}} {member_id:<{c}} {'/127.0.0.1':<15} "
            f"{'billing-app':<15} {'3':<15} \n"
        )

        state = strom(broker, "--describe", "--group", group, "--state")
        coordinator = f"127.0.0.1:{broker.port}  (0)"
        assert state.stdout == (
            f"\n{'GROUP':<{g}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} "
            f"{'STATE':<20} #MEMBERS\n{group:<{g}} {coordinator:<25} {'range':<20} "
            f"{'Stable':<20} 1\n"
        )

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
    assert (
        result.stdout
        == "\n"
        + "\n".join(
            [
                offsets_row(
                    "GROUP",
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID",
                    widths,
                ),
                offsets_row(group, topic, 0, 1, 3, 2, widths=widths),
            ]
        )
        + "\n"
    )
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
        assert (
            f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
        ) in refused.stdout
        assert committed(broker.bootstrap, group, topic, 2) == {0: 10, 1: 10}
    finally:
        first.close()

    t = max(15, len(topic))
    plan = (
        f"\n{'GROUP':<15} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET\n{group:<15} {topic:<{t}} {0:<10} 0\n"
        f"{group:<15} {topic:<{t}} {1:<10} 0\n"
    )
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
    when = datetime.fromtimestamp((base + 4000) / 1000, UTC)
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
    assert (deleted.returncode, deleted.stdout) == (
        0,
        f"Deletion of requested consumer groups ('{group}') was successful.\n",
    )
    assert group not in strom(broker, "--list").stdout.splitlines()
    assert committed(broker.bootstrap, group, topic, 1) == {0: NONE}
    twice = strom(broker, "--delete", "--group", group)
    assert twice.returncode == 1 and "GROUP_ID_NOT_FOUND" in twice.stdout


def test_usage_errors_exit_2(broker):
    assert strom(broker, "--describe").returncode == 2
    assert strom(broker, "--reset-offsets", "--group", "g", "--topic", "t").returncode == 2
    assert strom(broker, "--reset-offsets", "--group", "g", "--to-earliest").returncode == 2
    assert strom(broker, "--list", "--describe").returncode == 2


def _describe_by_client(broker, group: str) -> dict[str, tuple[str, list[tuple[str, int]]]]:
    """client id -> (member id, sorted assignment), as the broker reports them."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(15)
    return {
        m.client_id: (m.member_id, sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
        for m in description.members
    }


def test_describe_members_verbose_shows_each_members_partitions_and_state_verbose_the_epochs(broker):
    topic = create_topic(broker.bootstrap, unique("verbose"), 3)
    group = unique("verbose")
    a = Member(broker.bootstrap, group, topic, "member-a")
    b = Member(broker.bootstrap, group, topic, "member-b")
    try:
        owned = wait_for_assignment([a, b], 3, sizes=[1, 2])  # range: 2 partitions and 1

        def settled():
            found = _describe_by_client(broker, group)
            return found if sorted(len(parts) for _, parts in found.values()) == [1, 2] else None

        described = wait_until(settled, what="the broker to report the assignment", tick=poll_all([a, b]))
        assert {tuple(p for _, p in parts) for _, parts in described.values()} == {tuple(sorted(o)) for o in owned}
        result = strom(broker, "--describe", "--group", group, "--members", "--verbose")
        assert result.returncode == 0, result.stdout + result.stderr
        member_ids = {client: member_id for client, (member_id, _) in described.items()}
        g, c = max(15, len(group)), max([15] + [len(m) for m in member_ids.values()])
        assignments = {
            client: f"{topic}:" + ",".join(str(p) for _, p in parts) for client, (_, parts) in described.items()
        }
        a_width = max([20] + [len(text) for text in assignments.values()])

        def line(member, client, count, current, target="-", epoch="-", target_epoch="-"):
            return (
                f"{group:<{g}} {member:<{c}} {'/127.0.0.1':<15} {client:<15} {count:<15} "
                f"{epoch:<15} {current:<{a_width}} {target_epoch:<15} {target:<20}"
            )

        header = (
            f"{'GROUP':<{g}} {'CONSUMER-ID':<{c}} {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<15} "
            f"{'CURRENT-EPOCH':<15} {'CURRENT-ASSIGNMENT':<{a_width}} {'TARGET-EPOCH':<15} "
            f"{'TARGET-ASSIGNMENT':<20}"
        )
        lines = result.stdout.split("\n")
        assert lines[0] == "" and lines[1] == header and lines[-1] == ""
        expected = {
            line(member_ids[client], client, str(len(described[client][1])), assignments[client])
            for client in ("member-a", "member-b")
        }
        assert set(lines[2:-1]) == expected

        state = strom(broker, "--describe", "--group", group, "--state", "--verbose")
        coordinator = f"127.0.0.1:{broker.port}  (0)"
        assert state.stdout == (
            f"\n{'GROUP':<{g}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} "
            f"{'STATE':<20} {'GROUP-EPOCH':<15} {'TARGET-ASSIGNMENT-EPOCH':<25} #MEMBERS\n"
            f"{group:<{g}} {coordinator:<25} {'range':<20} {'Stable':<20} {'-':<15} "
            f"{'-':<25} 2\n"
        )
    finally:
        close_all([a, b])


def test_describe_offsets_verbose_adds_the_committed_leader_epoch(broker):
    topic = create_topic(broker.bootstrap, unique("epoch"), 1)
    group = unique("epoch")
    produce(broker.bootstrap, topic, [b"a", b"b", b"c"])
    member = Member(broker.bootstrap, group, topic, "epoch-app")
    try:
        wait_until(lambda: len(member.messages) >= 3, what="3 messages", tick=poll_all([member]))
        member.consumer.commit(asynchronous=False)  # librdkafka commits the leader epoch of what it read (0)
    finally:
        member.close()
    result = strom(broker, "--describe", "--group", group, "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr
    t = max(15, len(topic))
    assert result.stdout.split("\n")[1] == (
        f"{'GROUP':<15} {'TOPIC':<{t}} {'PARTITION':<10} {'LEADER-EPOCH':<15} "
        f"{'CURRENT-OFFSET':<15} {'LOG-END-OFFSET':<15} {'LAG':<15} "
        f"{'CONSUMER-ID':<15} {'HOST':<15} CLIENT-ID"
    )
    assert result.stdout.split("\n")[2] == (
        f"{group:<15} {topic:<{t}} {0:<10} {0:<15} {3:<15} {3:<15} {0:<15} {'-':<15} {'-':<15} -"
    )


def test_reset_by_duration_goes_back_that_far_in_time(broker):
    """Offsets 0-4 were written two hours ago, 5-9 ten minutes ago: one hour back is offset 5."""
    from confluent_kafka import Producer

    topic = create_topic(broker.bootstrap, unique("dur"), 1)
    group = unique("dur")
    now = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, f"d{i}".encode(), partition=0, timestamp=now - (7_200_000 if i < 5 else 600_000) + i)
    assert producer.flush(15) == 0
    commit_offsets(broker, group, topic, {0: 10})
    scope = ("--topic", topic)
    assert reset(broker, group, scope, "--by-duration", "PT1H") == 5
    assert committed(broker.bootstrap, group, topic, 1) == {0: 5}
    assert reset(broker, group, scope, "--by-duration", "P1DT0H") == 0
    # nothing is that recent: Kafka falls back to the log end and says so
    result = strom(broker, "--reset-offsets", "--group", group, *scope, "--by-duration", "PT1M", "--execute")
    assert result.returncode == 0
    assert f"Warn: Partition 0 from topic {topic} is empty. Falling back to latest known offset." in result.stdout
    assert committed(broker.bootstrap, group, topic, 1) == {0: 10}
    bad = strom(broker, "--reset-offsets", "--group", group, *scope, "--by-duration", "1 hour", "--execute")
    assert bad.returncode == 2 and "Error parsing duration '1 hour'" in bad.stderr


def test_export_then_from_file_replays_an_edited_plan(broker, tmp_path):
    topic = create_topic(broker.bootstrap, unique("plan"), 2)
    group = unique("plan")
    produce(broker.bootstrap, topic, [f"p{i}".encode() for i in range(20)], partitions=2)  # 10 per partition
    commit_offsets(broker, group, topic, {0: 7, 1: 9})

    exported = strom(
        broker, "--reset-offsets", "--group", group, "--topic", topic, "--shift-by", "-5", "--export", "--dry-run"
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert exported.stdout == f"{topic},0,2\n{topic},1,4\n\n"  # Kafka's CSV, then println's newline
    assert committed(broker.bootstrap, group, topic, 2) == {0: 7, 1: 9}

    plan = tmp_path / "plan.csv"
    plan.write_text(exported.stdout.replace(f"{topic},1,4", f"{topic},1,99"))  # beyond the end: clamped to 10
    done = strom(broker, "--reset-offsets", "--group", group, "--from-file", str(plan), "--execute")
    assert done.returncode == 0, done.stdout + done.stderr
    t = max(15, len(topic))
    assert done.stdout == (
        f"\n{'GROUP':<15} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET\n"
        f"{group:<15} {topic:<{t}} {0:<10} 2\n{group:<15} {topic:<{t}} {1:<10} 10\n"
    )
    assert committed(broker.bootstrap, group, topic, 2) == {0: 2, 1: 10}

    # with two groups the CSV names the group on each line, and each group gets its own rows
    other = unique("plan-other")
    commit_offsets(broker, other, topic, {0: 1})
    both = tmp_path / "both.csv"
    both.write_text(f"{group},{topic},0,3\n{other},{topic},1,6\n")
    exported = strom(
        broker, "--reset-offsets", "--group", group, "--group", other, "--from-file", str(both), "--execute", "--export"
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert sorted(exported.stdout.split("\n")) == sorted([f"{group},{topic},0,3", f"{other},{topic},1,6", "", ""])
    assert committed(broker.bootstrap, group, topic, 2) == {0: 3, 1: 10}
    assert committed(broker.bootstrap, other, topic, 2) == {0: 1, 1: 6}

    missing = tmp_path / "missing.csv"
    missing.write_text(f"{topic},7,0\n")
    refused = strom(broker, "--reset-offsets", "--group", group, "--from-file", str(missing), "--execute")
    assert refused.returncode == 1 and f'The partitions "{topic}-7" do not exist' in refused.stdout
    nothing = strom(
        broker, "--reset-offsets", "--group", unique("nobody"), "--group", group, "--from-file", str(both), "--dry-run"
    )
    assert nothing.returncode == 1 and "No reset plan for group nobody-" in nothing.stdout
