"""A leader cut off from ZooKeeper but not from its clients fences itself, and clients move.

Each broker reaches ZooKeeper through its own fault-injecting proxy (strom/chaos/proxy.py).
The leader of a partition is cut off from ZooKeeper; its session expires and the controller
elects another leader. Without fencing the cut-off broker goes on answering Metadata as the
leader and clients keep talking to it (issue 14 measured 9 acknowledged writes in 20 s); fenced,
it answers NOT_LEADER_OR_FOLLOWER and claims no leadership, so writes flow to the new leader.
Afterwards nothing acknowledged is lost and the ISR heals.
"""

from __future__ import annotations

import time

from strom.chaos.proxy import TcpProxy
from strom.protocol.records import NewRecord, build_batch
from tests.cluster.conftest import SESSION_TIMEOUT_MS, Cluster, create_topic, wait_until
from tests.cluster.workload import Workload, verify
from tests.integration.clients import RawClient, raw_produce

TOPIC = "fenced"
CUT_S = 20
NOT_LEADER_OR_FOLLOWER = 6


def test_leader_cut_off_from_zookeeper_is_fenced_and_writes_move_on(tmp_path, zookeeper):
    zk_port = int(zookeeper.rsplit(":", 1)[1])
    cluster = Cluster(tmp_path / "cluster", zookeeper, 3)
    proxies = {b: TcpProxy(zk_port) for b in cluster.brokers}
    for broker_id, process in cluster.brokers.items():
        process.overrides["zookeeper.connect"] = proxies[broker_id].address + cluster.chroot
    workload = None
    try:
        cluster.start()
        create_topic(cluster, TOPIC, 3, 3, {"min.insync.replicas": "2"})
        workload = Workload(cluster.bootstrap, TOPIC, 3).start()
        workload.wait_progress(range(3), 20, 20)
        victim = cluster.leader(TOPIC, 0)
        led = [p for p in range(3) if cluster.leader(TOPIC, p) == victim]
        before = {p: workload.acked_count(p) for p in led}
        proxies[victim].blackhole()
        cut_at = time.monotonic()
        wait_until(
            lambda: all(cluster.leader(TOPIC, p) not in (victim, -1) for p in led),
            SESSION_TIMEOUT_MS / 1000 + 10,
            f"new leaders for {led} away from broker {victim}",
        )
        # what a client talking to the cut-off broker hears within the session timeout: it claims no
        # leadership, and a write to it gets NOT_LEADER_OR_FOLLOWER
        with RawClient(cluster.brokers[victim].bootstrap) as client:

            def claimed():
                response = client.request(3, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
                return [p.partition_index for p in response.topics[0].partitions if p.leader_id == victim]

            wait_until(
                lambda: not claimed(),
                max(1.0, cut_at + SESSION_TIMEOUT_MS / 1000 + 3 - time.monotonic()),
                f"broker {victim} to stop claiming leadership",
                interval_s=0.2,
            )
            code, _ = raw_produce(client, TOPIC, build_batch([NewRecord(b"to-the-fenced")]), partition=led[0])
        assert code == NOT_LEADER_OR_FOLLOWER
        time.sleep(max(0.0, cut_at + CUT_S - time.monotonic()))
        during = {p: workload.acked_count(p) - before[p] for p in led}
        proxies[victim].heal()
        # about 80 writes a second per partition; the move takes about the session timeout
        floor = 80 * (CUT_S - 2 * SESSION_TIMEOUT_MS / 1000) / 2
        assert all(n >= floor for n in during.values()), (
            f"only {during} writes acknowledged on {led} in the {CUT_S}s broker {victim} was cut off"
        )
        assert "fenced" in cluster.brokers[victim].log_path.read_text(errors="replace")
        cluster.wait_full_isr(TOPIC, 60)
        workload.stop()
        verify(cluster.bootstrap, workload)
        cluster.wait_logs_equal(TOPIC, 30)
    except BaseException:
        print(cluster.logs()[-20000:])
        raise
    finally:
        cluster.close()
        for proxy in proxies.values():
            proxy.close()
