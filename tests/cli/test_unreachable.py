"""The client tools when no broker answers: one line that names the servers, a non-zero exit, a bounded wait.

A new user who mistypes the port must not get librdkafka's retry log (hundreds of "Connect ...
failed" lines) but one error; a tool that was connected says once per broker that it lost it.
"""

from __future__ import annotations

import re
import select
import socket
import subprocess
import sys

import pytest

from tests.broker_process import BrokerProcess
from tests.group.support import create_topic, produce, unique

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def dead_address():
    """127.0.0.1:<port> bound by this test but not listening: every connection is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def strom(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, input=stdin, timeout=60
    )


@pytest.mark.parametrize(
    "tool",
    [
        ("topics", "--list", "--timeout", "2000"),
        ("configs", "--describe", "--entity-type", "brokers", "--entity-name", "0", "--timeout", "2000"),
        (
            "producer-perf-test",
            "--topic",
            "t",
            "--num-records",
            "5",
            "--record-size",
            "10",
            "--throughput",
            "-1",
            "--timeout",
            "2000",
        ),
        ("consumer-perf-test", "--topic", "t", "--messages", "5", "--timeout", "2000"),
        ("console-consumer", "--topic", "t", "--connect-timeout-ms", "2000"),
        ("leader-election", "--election-type", "preferred", "--all-topic-partitions", "--timeout", "2000"),
    ],
    ids=lambda tool: tool[0],
)
def test_a_tool_that_cannot_reach_the_bootstrap_servers_fails_with_one_line(dead_address, tool):
    result = strom(tool[0], "--bootstrap-server", dead_address, *tool[1:])
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert f"cannot reach the bootstrap servers {dead_address} within 2 s" in lines[0]
    assert "Connection refused" in lines[0]
    if tool[0] != "consumer-perf-test":  # Kafka's tool prints its header before connecting
        assert result.stdout == ""


def test_console_producer_says_it_before_reading_input(dead_address):
    result = strom(
        "console-producer",
        "--bootstrap-server",
        dead_address,
        "--topic",
        "t",
        "--connect-timeout-ms",
        "2000",
        stdin="one\ntwo\n",
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"strom console-producer: cannot reach the bootstrap servers {dead_address} within 2 s: "
        f"Connect to ipv4#{dead_address} failed: Connection refused\n"
    )


def test_consumer_groups_prints_kafkas_error_line(dead_address):
    result = strom("consumer-groups", "--bootstrap-server", dead_address, "--list", "--timeout", "2000")
    assert result.returncode == 1
    assert result.stderr == ""
    assert result.stdout == (
        f"\nError: Executing consumer group command failed due to cannot reach the bootstrap "
        f"servers {dead_address} within 2 s: Connect to ipv4#{dead_address} failed: "
        "Connection refused\n"
    )


def test_a_consumer_whose_broker_goes_away_says_so_once_per_broker(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    consumer = None
    try:
        topic = create_topic(broker.bootstrap, unique("away"), 1)
        produce(broker.bootstrap, topic, [b"only"])
        consumer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "strom.cli.main",
                "console-consumer",
                "--bootstrap-server",
                broker.bootstrap,
                "--topic",
                topic,
                "--from-beginning",
                "--timeout-ms",
                "8000",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        ready, _, _ = select.select([consumer.stdout], [], [], 30)
        assert ready and consumer.stdout.readline() == "only\n"
        broker.stop()
        # librdkafka now retries both connections (bootstrap and broker 0) for 8 s, again and again
        _, err = consumer.communicate(timeout=60)
    finally:
        if consumer is not None and consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
        broker.stop()
    lines = err.splitlines()
    assert consumer.returncode == 0
    assert lines[-1] == "Processed a total of 1 messages"
    warnings = lines[:-1]
    assert len(warnings) <= 2, err
    brokers = [
        re.match(rf"WARNING cannot reach broker ({re.escape(broker.bootstrap)}/\w+): .*\(retrying; said once\)$", line)
        for line in warnings
    ]
    assert all(brokers), err
    assert len({match[1] for match in brokers}) == len(warnings)  # never twice for one broker
