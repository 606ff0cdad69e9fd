"""The seeds' multi-broker quickstart and fault-tolerance test, typed as a user would type it.

Three brokers on one ZooKeeper; ``my-replicated-topic`` with replication factor 3 created and
described with ``strom topics``; two messages through ``strom console-producer``; the leader is
killed; --describe shows the new leader and the shrunken ISR; ``strom console-consumer
--from-beginning`` still prints everything.
"""

from __future__ import annotations

import re
import subprocess
import sys

from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until

TOPIC = "my-replicated-topic"
PARTITION_LINE = re.compile(
    r"\tTopic: my-replicated-topic\tPartition: 0\tLeader: (?P<leader>-?\d+|none)"
    r"\tReplicas: (?P<replicas>[\d,]+)\tIsr: (?P<isr>[\d,]*)\tElr: N/A\tLastKnownElr: N/A"
)


def strom(*args, input=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], input=input, capture_output=True, text=True, timeout=timeout
    )


def describe(bootstrap: str, check: bool = True) -> tuple[str, list[str]] | None:
    described = strom("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC)
    if not check and described.returncode != 0:
        return None  # e.g. "Timed out waiting for controller" while ZooKeeper has not yet expired it
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert len(lines) == 2, described.stdout
    return lines[0], lines[1:]


def test_replicated_topic_survives_its_leader(cluster):
    bootstrap = cluster.bootstrap
    created = strom(
        "topics",
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--replication-factor",
        "3",
        "--partitions",
        "1",
        "--topic",
        TOPIC,
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout == f"Created topic {TOPIC}.\n"

    def in_sync():
        head, partitions = describe(bootstrap)
        match = PARTITION_LINE.fullmatch(partitions[0])
        return (head, match) if match and sorted(match["isr"].split(",")) == ["0", "1", "2"] else None

    head, line = wait_until(in_sync, 20, "Isr: with all three brokers")
    assert f"Topic: {TOPIC}\t" in head and "PartitionCount: 1\tReplicationFactor: 3\tConfigs: " in head
    # `Leader: 1  Replicas: 1,2,0  Isr: 1,2,0`: the preferred (first) replica leads, all in sync
    replicas = [int(b) for b in line["replicas"].split(",")]
    assert sorted(replicas) == [0, 1, 2]
    assert int(line["leader"]) == replicas[0]
    assert line["isr"] == line["replicas"]

    produced = strom(
        "console-producer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        TOPIC,
        input="my test message 1\nmy test message 2\n",
    )
    assert produced.returncode == 0, produced.stderr

    leader = int(line["leader"])
    cluster.kill(leader)
    # ZooKeeper notices after the session timeout; until then even Kafka's tools wait for the dead
    # controller, so look at --describe once the new leader is in place
    wait_until(
        lambda: cluster.leader(TOPIC, 0) not in (-1, leader),
        SESSION_TIMEOUT_MS / 1000 + 15,
        "the controller electing a new leader",
    )

    def failed_over():
        described = describe(bootstrap, check=False)
        if described is None:
            return None
        match = PARTITION_LINE.fullmatch(described[1][0])
        return (
            match
            if match and match["leader"] not in (str(leader), "none") and str(leader) not in match["isr"].split(",")
            else None
        )

    after = wait_until(failed_over, SESSION_TIMEOUT_MS / 1000 + 40, "a new leader and an ISR without the dead one")
    assert after["replicas"] == line["replicas"]  # the assignment does not change
    survivors = [b for b in replicas if b != leader]
    assert sorted(int(b) for b in after["isr"].split(",")) == sorted(survivors)
    # the new leader is the next replica in preference order that was in sync
    assert int(after["leader"]) == survivors[0]

    consumed = strom(
        "console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--from-beginning",
        "--topic",
        TOPIC,
        "--max-messages",
        "2",
        "--timeout-ms",
        "20000",
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == "my test message 1\nmy test message 2\n"

    # the cluster keeps taking writes with two of three brokers, and the third catches up on return
    produced = strom("console-producer", "--bootstrap-server", bootstrap, "--topic", TOPIC, input="my test message 3\n")
    assert produced.returncode == 0, produced.stderr
    cluster.restart(leader)
    cluster.wait_full_isr(TOPIC, 30)
    consumed = strom(
        "console-consumer",
        "--bootstrap-server",
        bootstrap,
        "--from-beginning",
        "--topic",
        TOPIC,
        "--max-messages",
        "3",
        "--timeout-ms",
        "20000",
    )
    assert consumed.stdout == "my test message 1\nmy test message 2\nmy test message 3\n"
    cluster.wait_logs_equal(TOPIC, 20)
