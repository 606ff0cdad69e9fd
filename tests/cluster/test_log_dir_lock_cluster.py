"""A cluster broker whose config points at another running broker's log dir is refused at once,
before it registers in ZooKeeper, and the broker owning the dir serves on."""

from __future__ import annotations

from tests.broker_process import BrokerProcess
from tests.cluster.conftest import create_topic
from tests.integration.test_log_dir_lock import Clients, assert_refused, payloads, start_refused


def test_a_broker_configured_with_another_brokers_dir_is_refused(cluster_factory, tmp_path):
    cluster = cluster_factory(size=2)
    create_topic(cluster, "shared", partitions=2, replication_factor=2)
    clients = Clients(cluster.bootstrap)
    sent = payloads(40)
    clients.produce("shared", sent[:20])

    owner = cluster.brokers[0]
    own_dir = tmp_path / "broker-7"
    intruder = BrokerProcess(
        own_dir,
        {"zookeeper.connect": cluster.connect, "log.dirs": f"{own_dir},{owner.data_dir}"},
        broker_id=7,
    )
    assert_refused(*start_refused(intruder), owner.data_dir, owner.process.pid)
    assert cluster.registered() == {0, 1}

    clients.produce("shared", sent[20:])
    read = clients.consume("shared", 40, timeout=30)
    assert sorted((r.key, r.value) for r in read) == sorted(sent)
    clients._close_clients()
    assert cluster.alive(0) and cluster.alive(1)
