"""Three brokers replicating over a SASL_SSL inter-broker listener while clients use PLAINTEXT.

Each broker has CLIENT (PLAINTEXT) and INTERNAL (SASL_SSL, SCRAM-SHA-512) listeners, with
inter.broker.listener.name=INTERNAL. The brokers' own SCRAM credential is written into ZooKeeper
before they start, in Kafka's /config/users layout (as kafka-configs.sh --zookeeper does). Broker 2
first starts with a wrong inter-broker password: it cannot follow, which shows replication really
goes through the SASL_SSL listener with the broker's own credentials.
"""

from __future__ import annotations

import json

from strom.cluster import model
from tests.cluster.conftest import Cluster, add_scram_user, internal_sasl_ssl, split_listeners, wait_until
from tests.integration.clients import assert_same, confluent_consume, confluent_produce, sample_messages
from tests.integration.tv2_support import TxnProducer
from tests.integration.txn_support import read_confluent
from tests.tls_certs import make_certificates

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="{}";'


def test_replication_and_failover_over_a_sasl_ssl_inter_broker_listener(tmp_path, zookeeper):
    certs = make_certificates(tmp_path / "certs")
    cluster = Cluster(
        tmp_path / "cluster",
        zookeeper,
        3,
        {**internal_sasl_ssl(certs), "min.insync.replicas": "2"},
    )
    ports = split_listeners(cluster)
    for broker_id, process in cluster.brokers.items():
        password = "nope" if broker_id == 2 else "admin-secret"
        process.overrides["listener.name.internal.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS.format(password)
    add_scram_user(cluster, "admin", "admin-secret")

    with cluster:
        registration = json.loads(cluster.zk.get(model.broker_path(0))[0])
        client_port, internal_port = ports[0]
        assert registration["endpoints"] == [
            f"CLIENT://127.0.0.1:{client_port}",
            f"INTERNAL://127.0.0.1:{internal_port}",
        ]
        assert registration["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}
        assert (registration["host"], registration["port"]) == ("127.0.0.1", client_port)

        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for future in admin.create_topics(
            [NewTopic("replicated", num_partitions=1, replica_assignment=[[0, 1, 2]])], request_timeout=15
        ).values():
            future.result(timeout=20)
        wait_until(lambda: cluster.state("replicated", 0) is not None, 10, "the partition's state")
        wait_until(
            lambda: sorted(cluster.state("replicated", 0).isr) == [0, 1],
            30,
            "broker 2, unable to log in, to leave the ISR",
        )
        first = sample_messages(12)
        confluent_produce(cluster.bootstrap, "replicated", first, acks="all")
        assert cluster.log_end(2, "replicated", 0) == 0
        assert "cannot log in to 127.0.0.1:" in cluster.brokers[2].read_log()
        assert cluster.log_end(1, "replicated", 0) == len(first)

        cluster.brokers[2].stop()  # now with the right password: it catches up over SASL_SSL
        cluster.brokers[2].overrides["listener.name.internal.scram-sha-512.sasl.jaas.config"] = SCRAM_JAAS.format(
            "admin-secret"
        )
        cluster.restart(2)
        cluster.wait_full_isr("replicated", 30)
        cluster.wait_logs_equal("replicated")
        _transaction_across_three_leaders(cluster)
        _transactions_v2_across_three_leaders(cluster)

        leader = cluster.leader("replicated", 0)
        cluster.kill(leader)  # the kill-the-leader scenario: the others take over
        survivors = [b for b in cluster.brokers if b != leader]
        bootstrap = ",".join(f"127.0.0.1:{ports[b][0]}" for b in survivors)
        wait_until(lambda: cluster.leader("replicated", 0) in survivors, 30, "a new leader")
        second = sample_messages(6, ts_base=1_800_000_000_000)
        confluent_produce(bootstrap, "replicated", second, acks="all")
        assert_same(confluent_consume(bootstrap, "replicated", len(first) + len(second)), first + second)
        wait_until(
            lambda: cluster.batches(survivors[0], "replicated", 0) == cluster.batches(survivors[1], "replicated", 0),
            20,
            "identical surviving replicas",
        )

        # a credential created through one broker works on another without a restart
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[survivors[0]][0]}"})
        for future in admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"dave-secret"
                )
            ],
            request_timeout=15,
        ).values():
            future.result(timeout=20)
        secure = {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "dave",
            "sasl.password": "dave-secret",
        }
        other = f"127.0.0.1:{ports[survivors[1]][1]}"
        got = wait_until(
            lambda: _read_or_none(other, len(first) + len(second), secure), 20, "dave's login on another broker"
        )
        assert_same(got, first + second)


def _read_or_none(bootstrap: str, count: int, config: dict):
    from confluent_kafka import KafkaException

    try:
        got = confluent_consume(bootstrap, "replicated", count, timeout=5, **config, logger=None, log_level=0)
    except (KafkaException, AssertionError):
        return None
    return got if len(got) == count else None


def _transaction_across_three_leaders(cluster: Cluster) -> None:
    """The coordinator writes markers to the other two leaders over the INTERNAL listener (WriteTxnMarkers)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics(
        [NewTopic("txn", num_partitions=3, replica_assignment=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])], request_timeout=15
    ).values():
        future.result(timeout=20)
    cluster.wait_full_isr("txn", 30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "secure-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in range(3):
        producer.produce("txn", f"committed-{partition}".encode(), partition=partition)
    producer.commit_transaction(30)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "txn-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("txn", p, 0) for p in range(3)])
        got = set()

        def read_all():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.add(message.value())
            return len(got) == 3

        wait_until(read_all, 30, "the committed records on all three leaders")
    finally:
        consumer.close()
    assert got == {b"committed-0", b"committed-1", b"committed-2"}


def _transactions_v2_across_three_leaders(cluster: Cluster) -> None:
    """Transactions v2 (KIP-890 part 2): each leader asks the coordinator over the INTERNAL listener
    to add its partition (AddPartitionsToTxn v5), and the markers carry the bumped epoch."""
    producer = TxnProducer(cluster.bootstrap, "secure-tv2")
    try:
        for partition in range(3):
            assert producer.produce("txn", partition, [f"tv2-{partition}".encode()])[0] == 0
        answer = producer.end(commit=True)
        assert answer.error_code == 0
    finally:
        producer.close()
    rows = read_confluent(cluster.bootstrap, {("txn", p): 2 for p in range(3)}, "read_committed")
    assert {(p, v) for (_, p), items in rows.items() for _, v in items} == {
        (p, v) for p in range(3) for v in (f"committed-{p}".encode(), f"tv2-{p}".encode())
    }
