"""The application against three brokers and ZooKeeper (the strom_cluster fixture): a broker dies."""

import json

import orders


def test_orders_keep_flowing_when_a_leader_is_killed(strom_cluster):
    topic = strom_cluster.create_topic(
        "payments", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    before = [{"id": i, "customer": f"c{i % 5}", "total": float(i)} for i in range(30)]
    orders.place(strom_cluster.bootstrap_servers, topic, before)

    victim = strom_cluster.leader(topic, 0)
    strom_cluster.kill(victim)  # kill -9
    assert not strom_cluster.alive(victim)

    after = [{"id": i, "customer": f"c{i % 5}", "total": float(i)} for i in range(30, 60)]
    orders.place(strom_cluster.bootstrap_servers, topic, after)  # acks=all with two of three replicas
    assert strom_cluster.leader(topic, 0) not in (victim, -1)

    records = strom_cluster.consume(topic, 60, timeout=60)
    assert sorted(json.loads(r.value)["id"] for r in records) == list(range(60))  # nothing lost, nothing twice
    assert len({(r.partition, r.offset) for r in records}) == 60

    strom_cluster.restart(victim)
    strom_cluster.wait_for_isr(topic, timeout=60)  # the restarted broker caught up
    strom_cluster.produce(topic, [("c0", json.dumps({"id": 60, "customer": "c0", "total": 1.0}))])
    assert len(strom_cluster.consume(topic, 61, timeout=60)) == 61
