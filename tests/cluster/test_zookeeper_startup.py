"""A broker starting while ZooKeeper is slow waits zookeeper.connection.timeout.ms, as Kafka does.

Kafka's broker waits for its ZooKeeper session up to zookeeper.connection.timeout.ms (by default
zookeeper.session.timeout.ms); a paused or restarting ZooKeeper must not make a broker give up
sooner, and one that never answers ends startup with a message naming the keys to look at.
"""

from __future__ import annotations

import os
import signal
import time

from strom.cluster import zookeeper_server
from strom.testing.nodes import ProcessNode, wait_ready
from tests.cluster.conftest import SESSION_TIMEOUT_MS

PAUSE_S = SESSION_TIMEOUT_MS / 1000 + 3  # past the session timeout: the old startup gave up here


def test_a_broker_waits_for_a_paused_zookeeper_then_starts(tmp_path):
    zk_process, zk_port = zookeeper_server.start(str(tmp_path / "zookeeper"))
    node = ProcessNode(
        1,
        tmp_path / "broker-1",
        {
            "zookeeper.connect": f"127.0.0.1:{zk_port}",
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": "60000",
        },
    )
    try:
        os.kill(zk_process.pid, signal.SIGSTOP)
        try:
            node.spawn()
            time.sleep(PAUSE_S)
            assert node.alive, node.log_tail()
        finally:
            os.kill(zk_process.pid, signal.SIGCONT)
        wait_ready([node], 60)
        log = node.log_path.read_text()
        assert "waiting up to 60s (zookeeper.connection.timeout.ms) for a ZooKeeper session" in log
        assert log.count("waiting up to") == 1, log
    finally:
        node.stop()
        zookeeper_server.stop(zk_process)


def test_a_broker_that_gets_no_zookeeper_session_exits_naming_the_keys(tmp_path):
    port = zookeeper_server.free_port()  # nothing listens there
    node = ProcessNode(
        1,
        tmp_path / "broker-1",
        {"zookeeper.connect": f"127.0.0.1:{port}", "zookeeper.connection.timeout.ms": "1500"},
    )
    node.spawn()
    assert node.process is not None
    try:
        code = node.process.wait(60)
    finally:
        node.kill()
    output = node.log_tail()
    assert code == 1, output
    assert (
        f"strom server-start: cannot start: no ZooKeeper session with 127.0.0.1:{port} (zookeeper.connect) "
        "within 1.5s (zookeeper.connection.timeout.ms)"
    ) in output
    assert "Traceback" not in output
