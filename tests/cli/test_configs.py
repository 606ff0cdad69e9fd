"""``strom configs`` against a real broker: DescribeConfigs and IncrementalAlterConfigs as a user sees them."""

import re
import subprocess
import sys


def strom(*args):
    return subprocess.run([sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=60)


def configs(broker, *args):
    return strom("configs", "--bootstrap-server", broker.bootstrap, *args)


def create(broker, topic, *extra):
    result = strom(
        "topics",
        "--bootstrap-server",
        broker.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        *extra,
    )
    assert result.returncode == 0, result.stderr


ENTRY = re.compile(
    r"  (?P<name>[a-z0-9._-]+)=(?P<value>.*) sensitive=(?P<sensitive>true|false) "
    r"synonyms=\{(?P<synonyms>.*)\}"
)


def entries(stdout):
    lines = stdout.splitlines()
    parsed = [ENTRY.fullmatch(line) for line in lines[1:]]
    assert all(parsed), stdout
    return {m["name"]: m for m in parsed}


def test_describe_shows_the_dynamic_topic_configs(broker):
    create(broker, "orders", "--config", "retention.ms=86400000")
    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--describe")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "Dynamic configs for topic orders are:"
    found = entries(result.stdout)
    assert list(found) == ["retention.ms"]
    assert found["retention.ms"]["value"] == "86400000"
    assert found["retention.ms"]["sensitive"] == "false"
    assert found["retention.ms"]["synonyms"].startswith("DYNAMIC_TOPIC_CONFIG:retention.ms=86400000")


def test_alter_adds_and_deletes_configs(broker):
    create(broker, "orders")
    added = configs(
        broker,
        "--entity-type",
        "topics",
        "--entity-name",
        "orders",
        "--alter",
        "--add-config",
        "retention.ms=1234567,cleanup.policy=[compact,delete]",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for topic orders.\n"
    found = entries(configs(broker, "--topic", "orders", "--describe").stdout)
    assert {name: m["value"] for name, m in found.items()} == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "1234567",
    }

    deleted = configs(
        broker, "--entity-type", "topics", "--entity-name", "orders", "--alter", "--delete-config", "retention.ms"
    )
    assert deleted.returncode == 0, deleted.stderr
    found = entries(configs(broker, "--topic", "orders", "--describe").stdout)
    assert list(found) == ["cleanup.policy"]

    # and kafka-topics --describe shows the remaining override
    described = strom("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "orders")
    assert "\tConfigs: cleanup.policy=compact,delete" in described.stdout.splitlines()[0]


def test_describe_all_lists_defaults_with_their_broker_synonyms(broker):
    create(broker, "orders", "--config", "segment.ms=600000")
    result = configs(broker, "--entity-type", "topics", "--entity-name", "orders", "--describe", "--all")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "All configs for topic orders are:"
    found = entries(result.stdout)
    assert list(found) == sorted(found)
    assert found["segment.ms"]["value"] == "600000"
    assert found["retention.ms"]["value"] == str(7 * 24 * 3600 * 1000)
    assert "DEFAULT_CONFIG:log.retention.hours=168" in found["retention.ms"]["synonyms"]
    assert found["max.message.bytes"]["synonyms"].startswith("DEFAULT_CONFIG:message.max.bytes=")


def test_describe_a_broker(broker):
    result = configs(broker, "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "All configs for broker 0 are:"
    found = entries(result.stdout)
    assert found["broker.id"]["value"] == "0"
    dynamic = configs(broker, "--broker", "0", "--describe")
    assert dynamic.returncode == 0, dynamic.stderr
    assert dynamic.stdout == "Dynamic configs for broker 0 are:\n"


def test_errors_are_one_line_and_exit_1(broker):
    create(broker, "orders")
    unknown_key = configs(
        broker, "--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "no.such.config=1"
    )
    assert unknown_key.returncode == 1
    assert unknown_key.stderr.count("\n") == 1 and "no.such.config" in unknown_key.stderr
    misspelt = configs(
        broker, "--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "cleanup.polcy=compact"
    )
    assert misspelt.returncode == 1
    assert misspelt.stderr.count("\n") == 1
    assert "cleanup.polcy: unknown topic config (did you mean cleanup.policy?)" in misspelt.stderr

    not_set = configs(
        broker, "--entity-type", "topics", "--entity-name", "orders", "--alter", "--delete-config", "retention.ms"
    )
    assert not_set.returncode == 1
    assert not_set.stderr == "Invalid config(s): retention.ms\n"

    missing_topic = configs(broker, "--entity-type", "topics", "--entity-name", "missing", "--describe")
    assert missing_topic.returncode == 1 and missing_topic.stderr.count("\n") == 1

    malformed = configs(
        broker, "--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "retention.ms"
    )
    assert malformed.returncode == 1 and 'format "key=val"' in malformed.stderr

    assert configs(broker, "--entity-type", "brokers", "--entity-name", "zero", "--describe").returncode == 1
    assert configs(broker, "--entity-type", "topics", "--describe", "--alter").returncode == 2
