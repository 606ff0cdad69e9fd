"""ElectLeaders through confluent-kafka's AdminClient and ``strom leader-election``, on real brokers."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.errors import ErrorCode
from tests.cluster.conftest import SESSION_TIMEOUT_MS, create_topic, wait_until
from tests.cluster.workload import read_partition

FAILOVER_S = SESSION_TIMEOUT_MS / 1000 + 10
NO_REBALANCE = {"auto.leader.rebalance.enable": "false"}


def strom(*args):
    return subprocess.run([sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=90)


def error_of(value):
    """The KafkaError code of an elect_leaders result (None on success)."""
    if value is None:
        return None
    error = value.args[0] if isinstance(value, KafkaException) else value
    return None if error.code() == KafkaError.NO_ERROR else error.code()


def produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    errors = []
    for value in values:
        producer.produce(topic, value, partition=partition, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(30) == 0 and not errors, errors


def test_preferred_election_moves_leadership_back(cluster_factory):
    cluster = cluster_factory(overrides=NO_REBALANCE)
    create_topic(cluster, "pref", 3, 3)
    preferred = {p: r[0] for p, r in cluster.replicas("pref").items()}
    assert all(cluster.leader("pref", p) == preferred[p] for p in preferred)
    victim = preferred[0]
    moved = [p for p in preferred if preferred[p] == victim]
    cluster.kill(victim)
    wait_until(
        lambda: all(cluster.leader("pref", p) not in (-1, victim) for p in moved),
        FAILOVER_S,
        "leaders away from the killed broker",
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    everything = [TopicPartition("pref", p) for p in preferred]

    # the preferred replica is down: PREFERRED_LEADER_NOT_AVAILABLE, nothing changes
    results = admin.elect_leaders(ElectionType.PREFERRED, everything).result(timeout=30)
    codes = {tp.partition: error_of(e) for tp, e in results.items()}
    assert {codes[p] for p in moved} == {KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
    assert {codes[p] for p in preferred if p not in moved} == {KafkaError.ELECTION_NOT_NEEDED}
    cli = strom(
        "leader-election",
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--topic",
        "pref",
        "--partition",
        str(moved[0]),
    )
    assert cli.returncode == 1
    assert (
        f"Error completing leader election (PREFERRED) for partition: pref-{moved[0]}: PREFERRED_LEADER_NOT_AVAILABLE"
    ) in cli.stdout
    assert "1 replica(s) could not be elected" in cli.stderr

    cluster.restart(victim)
    cluster.wait_full_isr("pref", 30)
    assert all(cluster.leader("pref", p) != victim for p in moved)  # leadership does not come back by itself
    epochs = {p: cluster.state("pref", p).leader_epoch for p in preferred}

    results = admin.elect_leaders(ElectionType.PREFERRED, everything).result(timeout=30)
    codes = {tp.partition: error_of(e) for tp, e in results.items()}
    assert codes == {p: (None if p in moved else KafkaError.ELECTION_NOT_NEEDED) for p in preferred}
    for p in preferred:
        state = cluster.state("pref", p)
        assert state.leader == preferred[p]
        assert state.leader_epoch == epochs[p] + (1 if p in moved else 0)
        assert sorted(state.isr) == sorted(cluster.replicas("pref")[p])
    # the new leader serves at once
    produce(cluster.bootstrap, "pref", moved[0], [b"after-election"])
    assert read_partition(cluster.bootstrap, "pref", moved[0])[-1][1] == "after-election"

    # all partitions, nothing to do: Kafka leaves ELECTION_NOT_NEEDED out of the answer
    cli = strom(
        "leader-election",
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert cli.returncode == 0, cli.stderr
    assert "Error" not in cli.stdout and "Successfully" not in cli.stdout
    cli = strom(
        "leader-election",
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "PREFERRED",
        "--topic",
        "pref",
        "--partition",
        "0",
    )
    assert cli.returncode == 0 and cli.stdout == "Valid replica already elected for partitions pref-0\n", cli.stdout


def raw_elect(cluster, broker_id: int, version: int, values: dict):
    """An ElectLeaders request of ``version`` sent straight to ``broker_id`` (not to the controller)."""
    import asyncio

    from strom.protocol.api import ApiKey
    from strom.replication.client import BrokerClient

    async def send():
        client = BrokerClient("127.0.0.1", cluster.brokers[broker_id].port, "elect-test", timeout_s=20)
        try:
            return await client.request(ApiKey.ELECT_LEADERS, version, values)
        finally:
            client.close()

    return asyncio.run(send())


def test_preferred_election_on_any_broker_and_through_the_cli(cluster_factory):
    cluster = cluster_factory(overrides=NO_REBALANCE)
    create_topic(cluster, "cli", 3, 3)
    preferred = {p: r[0] for p, r in cluster.replicas("cli").items()}
    victim = preferred[0]
    moved = sorted(p for p in preferred if preferred[p] == victim)
    cluster.kill(victim)
    wait_until(
        lambda: all(cluster.leader("cli", p) not in (-1, victim) for p in moved),
        FAILOVER_S,
        "new leaders for the killed broker's partitions",
    )
    cluster.restart(victim)
    cluster.wait_full_isr("cli", 30)

    # a broker that is not the controller performs the election too (v0: no election type = preferred)
    other = next(b for b in cluster.brokers if b != cluster.controller())
    untouched = next(p for p in preferred if p not in moved)
    response = raw_elect(
        cluster,
        other,
        0,
        {
            "topic_partitions": [
                {"topic": "cli", "partitions": [moved[0], untouched]},
                {"topic": "nope", "partitions": [0]},
            ]
        },
    )
    codes = {
        (r.topic, p.partition_id): int(p.error_code)
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert codes == {
        ("cli", moved[0]): ErrorCode.NONE,
        ("cli", untouched): ErrorCode.ELECTION_NOT_NEEDED,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert cluster.leader("cli", moved[0]) == victim
    response = raw_elect(
        cluster, other, 2, {"election_type": 1, "topic_partitions": [{"topic": "cli", "partitions": [untouched]}]}
    )
    assert int(response.error_code) == ErrorCode.NONE
    assert int(response.replica_election_results[0].partition_result[0].error_code) == ErrorCode.ELECTION_NOT_NEEDED

    cli = strom(
        "leader-election",
        "--bootstrap-server",
        cluster.bootstrap,
        "--election-type",
        "preferred",
        "--all-topic-partitions",
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    rest = [f"cli-{p}" for p in moved[1:]]
    assert cli.stdout == (
        f"Successfully completed leader election (PREFERRED) for partitions {', '.join(rest)}\n" if rest else ""
    )
    assert all(cluster.leader("cli", p) == preferred[p] for p in preferred)


def test_unclean_election_revives_a_partition_without_live_isr(cluster):
    a, b = 0, 1
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [
            NewTopic("dirty", num_partitions=1, replica_assignment=[[a, b]]),
            NewTopic("lonely", num_partitions=1, replica_assignment=[[a]]),
        ],
        operation_timeout=10,
    )
    for future in futures.values():
        future.result(timeout=20)
    cluster.wait_full_isr("dirty", 20)
    produce(cluster.bootstrap, "dirty", 0, [b"m1", b"m2"])

    # unclean with a live leader: nothing to do
    results = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("dirty", 0)]).result(timeout=30)
    assert [error_of(e) for e in results.values()] == [KafkaError.ELECTION_NOT_NEEDED]

    cluster.kill(b)
    wait_until(lambda: cluster.state("dirty", 0).isr == [a], FAILOVER_S, "b leaving the ISR")
    produce(cluster.bootstrap, "dirty", 0, [b"only-on-a"])  # committed by a alone; lost by an unclean election
    cluster.kill(a)
    wait_until(lambda: cluster.leader("dirty", 0) == -1, FAILOVER_S, "dirty-0 going offline")
    cluster.restart(b)
    state = cluster.state("dirty", 0)
    assert state.leader == -1 and state.isr == [a]  # b is alive but not in sync: no clean election

    cli = strom(
        "leader-election",
        "--bootstrap-server",
        cluster.brokers[b].bootstrap,
        "--election-type",
        "unclean",
        "--topic",
        "lonely",
        "--partition",
        "0",
    )
    assert cli.returncode == 1
    assert "for partition: lonely-0: ELIGIBLE_LEADERS_NOT_AVAILABLE" in cli.stdout

    cli = strom(
        "leader-election",
        "--bootstrap-server",
        cluster.brokers[b].bootstrap,
        "--election-type",
        "unclean",
        "--topic",
        "dirty",
        "--partition",
        "0",
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert cli.stdout == "Successfully completed leader election (UNCLEAN) for partitions dirty-0\n"
    state = cluster.state("dirty", 0)
    assert state.leader == b and state.isr == [b]
    produce(cluster.brokers[b].bootstrap, "dirty", 0, [b"m3"])
    assert [v for _, v in read_partition(cluster.bootstrap, "dirty", 0)] == ["m1", "m2", "m3"]

    # the old leader returns, truncates what only it had, and the replicas agree again
    cluster.restart(a)
    cluster.wait_full_isr("dirty", 30)
    cluster.wait_logs_equal("dirty", 20)
    assert [v for _, v in read_partition(cluster.bootstrap, "dirty", 0)] == ["m1", "m2", "m3"]
