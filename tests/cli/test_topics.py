"""``strom topics`` against a real broker process: what a user sees on stdout, stderr and in the exit code."""

import re
import subprocess
import sys


def strom(*args, input=None):
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], input=input, capture_output=True, text=True, timeout=60
    )


def topics(broker, *args):
    return strom("topics", "--bootstrap-server", broker.bootstrap, *args)


TOPIC_LINE = re.compile(
    r"Topic: (?P<name>\S+)\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: (?P<count>\d+)"
    r"\tReplicationFactor: (?P<rf>\d+)\tConfigs: (?P<configs>.*)"
)


def partition_line(topic, partition, broker_id=0):
    return (
        f"\tTopic: {topic}\tPartition: {partition}\tLeader: {broker_id}\tReplicas: {broker_id}"
        f"\tIsr: {broker_id}\tElr: N/A\tLastKnownElr: N/A"
    )


def test_create_then_list_and_describe_in_kafkas_layout(broker):
    created = topics(
        broker,
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=86400000",
        "--config",
        "cleanup.policy=compact",
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic orders.\n"

    listed = topics(broker, "--list")
    assert listed.returncode == 0, listed.stderr
    assert "orders" in listed.stdout.splitlines()

    described = topics(broker, "--describe", "--topic", "orders")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert len(lines) == 4
    head = TOPIC_LINE.fullmatch(lines[0])
    assert head, lines[0]
    assert head["name"] == "orders" and head["count"] == "3" and head["rf"] == "1"
    # only the overrides, sorted by name, as Kafka shows non-default configs
    assert head["configs"] == "cleanup.policy=compact,retention.ms=86400000"
    assert lines[1:] == [partition_line("orders", p) for p in range(3)]


def test_describe_shows_empty_configs_and_every_topic_without_topic_flag(broker):
    assert topics(broker, "--create", "--topic", "a", "--partitions", "1", "--replication-factor", "1").returncode == 0
    assert topics(broker, "--create", "--topic", "b", "--partitions", "2").returncode == 0  # broker default RF
    described = topics(broker, "--describe", "--exclude-internal")
    assert described.returncode == 0, described.stderr
    heads = [TOPIC_LINE.fullmatch(line) for line in described.stdout.splitlines() if line.startswith("Topic:")]
    assert [(h["name"], h["count"], h["rf"], h["configs"]) for h in heads] == [("a", "1", "1", ""), ("b", "2", "1", "")]
    assert partition_line("b", 1) in described.stdout.splitlines()


def test_topic_is_a_regular_expression_for_list_and_describe(broker):
    for name in ("logs-app", "logs-db", "metrics"):
        assert topics(broker, "--create", "--topic", name, "--partitions", "1").returncode == 0
    listed = topics(broker, "--list", "--topic", "logs-.*")
    assert listed.stdout.splitlines() == ["logs-app", "logs-db"]
    listed = topics(broker, "--list", "--topic", "metrics,logs-db")
    assert listed.stdout.splitlines() == ["logs-db", "metrics"]


def test_list_can_leave_out_internal_topics(broker):
    assert topics(broker, "--create", "--topic", "orders", "--partitions", "1").returncode == 0
    # a group lookup makes the broker create __consumer_offsets
    strom(
        "console-consumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "orders",
        "--group",
        "g",
        "--timeout-ms",
        "500",
    )
    everything = topics(broker, "--list").stdout.splitlines()
    external = topics(broker, "--list", "--exclude-internal").stdout.splitlines()
    assert "orders" in external and "__consumer_offsets" not in external
    assert set(everything) - set(external) <= {"__consumer_offsets", "__transaction_state"}


def test_creating_an_existing_topic_fails_unless_if_not_exists(broker):
    assert topics(broker, "--create", "--topic", "orders", "--partitions", "1").returncode == 0
    again = topics(broker, "--create", "--topic", "orders", "--partitions", "1")
    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr.count("\n") == 1
    assert again.stderr.startswith("Error while executing topic command : ")
    assert "already exists" in again.stderr

    quiet = topics(broker, "--create", "--topic", "orders", "--partitions", "1", "--if-not-exists")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == ""


def test_invalid_config_is_a_one_line_error(broker):
    result = topics(broker, "--create", "--topic", "orders", "--partitions", "1", "--config", "no.such.config=1")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no.such.config" in result.stderr
    assert "orders" not in topics(broker, "--list").stdout.splitlines()

    result = topics(broker, "--create", "--topic", "orders", "--partitions", "1", "--config", "retention.ms")
    assert result.returncode == 1
    assert 'must be in the format "key=val"' in result.stderr

    result = topics(broker, "--create", "--topic", "orders", "--partitions", "1", "--config", "retension.ms=1000")
    assert result.returncode == 1
    assert result.stderr == (
        "Error while executing topic command : retension.ms: unknown topic config (did you mean retention.ms?)\n"
    )


def test_unknown_topic_is_an_error_unless_if_exists(broker):
    for action in ("--describe", "--delete"):
        result = topics(broker, action, "--topic", "missing")
        assert result.returncode == 1
        assert result.stderr == "Error while executing topic command : Topic 'missing' does not exist as expected\n"
        assert topics(broker, action, "--topic", "missing", "--if-exists").returncode == 0
    result = topics(broker, "--alter", "--topic", "missing", "--partitions", "2")
    assert result.returncode == 1 and "does not exist" in result.stderr


def test_bad_arguments_are_refused_before_connecting(broker):
    assert topics(broker, "--create", "--topic", "x", "--partitions", "0").returncode == 1
    assert topics(broker, "--create", "--topic", "x", "--replication-factor", "0").returncode == 1
    assert topics(broker, "--alter", "--topic", "x").returncode == 1
    assert topics(broker, "--create", "--partitions", "1").returncode == 1
    assert strom("topics", "--list").returncode == 2  # argparse: --bootstrap-server is required


def test_alter_adds_partitions(broker):
    assert topics(broker, "--create", "--topic", "orders", "--partitions", "2").returncode == 0
    altered = topics(broker, "--alter", "--topic", "orders", "--partitions", "5")
    assert altered.returncode == 0, altered.stderr
    lines = topics(broker, "--describe", "--topic", "orders").stdout.splitlines()
    assert TOPIC_LINE.fullmatch(lines[0])["count"] == "5"
    assert lines[1:] == [partition_line("orders", p) for p in range(5)]

    shrink = topics(broker, "--alter", "--topic", "orders", "--partitions", "3")
    assert shrink.returncode == 1 and shrink.stderr.startswith("Error while executing topic command : ")


def test_delete_removes_the_topic(broker):
    assert topics(broker, "--create", "--topic", "orders", "--partitions", "1").returncode == 0
    assert topics(broker, "--create", "--topic", "keep", "--partitions", "1").returncode == 0
    deleted = topics(broker, "--delete", "--topic", "orders")
    assert deleted.returncode == 0, deleted.stderr
    names = topics(broker, "--list").stdout.splitlines()
    assert "orders" not in names and "keep" in names


def test_replica_assignment_places_partitions(broker):
    created = topics(broker, "--create", "--topic", "placed", "--replica-assignment", "0,0,0")
    assert created.returncode == 0, created.stderr
    lines = topics(broker, "--describe", "--topic", "placed").stdout.splitlines()
    assert TOPIC_LINE.fullmatch(lines[0])["count"] == "3"
    assert lines[1:] == [partition_line("placed", p) for p in range(3)]


def test_describe_filters(broker):
    assert topics(broker, "--create", "--topic", "plain", "--partitions", "1").returncode == 0
    assert (
        topics(broker, "--create", "--topic", "tuned", "--partitions", "1", "--config", "segment.ms=600000").returncode
        == 0
    )
    overrides = topics(broker, "--describe", "--topics-with-overrides", "--exclude-internal")
    assert [line.split("\t")[0] for line in overrides.stdout.splitlines()] == ["Topic: tuned"]
    # a healthy single broker has nothing under-replicated or unavailable
    assert topics(broker, "--describe", "--under-replicated-partitions").stdout == ""
    assert topics(broker, "--describe", "--unavailable-partitions").stdout == ""
    at_min = topics(broker, "--describe", "--at-min-isr-partitions", "--topic", "plain").stdout.splitlines()
    assert at_min == [partition_line("plain", 0)]
