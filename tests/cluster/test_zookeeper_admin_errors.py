"""ZooKeeper paused in the middle of an admin write: an error code for the client, then a retry that works.

Issue 14: CreatePartitions, DeleteTopics, AlterConfigs and IncrementalAlterConfigs let a store
error out of the handler, and the broker dropped the client's connection. Each must answer
REQUEST_TIMED_OUT for the topic or resource, with a message naming ZooKeeper and saying whether
a retry is safe; once ZooKeeper is back, a retry succeeds (or answers that the first try did
it) and the cluster ends as the user asked.

ZooKeeper is stopped (SIGSTOP) exactly when the broker sends the operation's write (see
zk_tripwire.py), and resumed once the client has its answer. The write still reaches ZooKeeper,
so the first try may or may not have taken effect: the hardest case for a retry. One broker
serves every test (each pause costs a ZooKeeper call timeout); each test uses its own topic.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kazoo.client import KazooClient

from strom.cluster import model, zookeeper_server
from strom.testing.nodes import ProcessNode
from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until
from tests.cluster.zk_tripwire import CREATE_OPS, ZkTripwire, stop_process

DELETE_OP, SET_DATA_OP = 2, 5
RETRY_S = 40  # the broker's ZooKeeper session may need to come back (expire, then a new one) first
WAIT_S = 60  # a paused call waits a session timeout (6 s) for ZooKeeper before the broker answers


def never(op: int, path: str) -> bool:
    return False


@dataclass
class Cluster:
    zookeeper: subprocess.Popen  # the ZooKeeper server's process: its tests stop and resume it
    chroot: str
    zk: KazooClient
    proxy: ZkTripwire
    node: ProcessNode
    admin: AdminClient


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A ZooKeeper of this module's own (its tests stop it) and one broker reaching it through the tripwire."""
    process, port = zookeeper_server.start(str(tmp_path_factory.mktemp("zookeeper")))
    chroot = f"/admin-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
    proxy = ZkTripwire(port, never, lambda _: stop_process(process.pid))
    node = ProcessNode(
        1,
        tmp_path_factory.mktemp("admin-errors") / "broker-1",
        {
            "zookeeper.connect": proxy.address + chroot,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": "30000",
        },
    )
    try:
        zk.start(timeout=30)
        zk.ensure_path(chroot)
        node.start()
        yield Cluster(process, chroot, zk, proxy, node, AdminClient({"bootstrap.servers": f"127.0.0.1:{node.port}"}))
    finally:
        os.kill(process.pid, signal.SIGCONT)
        node.stop()
        proxy.close()
        zk.stop()
        zk.close()
        zookeeper_server.stop(process)


@contextlib.contextmanager
def zookeeper_paused_at(cluster: Cluster, ops: set[int] | frozenset[int], path: str) -> Iterator[None]:
    """Stop ZooKeeper when the broker sends an ``ops`` request on ``path`` (below the chroot), inside the block.

    ZooKeeper is resumed when the block ends, whatever happened in it.
    """
    cluster.proxy.match = lambda op, sent: op in ops and sent == cluster.chroot + path
    cluster.proxy.tripped.clear()  # armed: the next matching request stops ZooKeeper
    try:
        yield
        assert cluster.proxy.tripped.is_set(), f"the broker sent no request {sorted(ops)} on {path}"
    finally:
        cluster.proxy.match = never
        os.kill(cluster.zookeeper.pid, signal.SIGCONT)


def fails_with_zookeeper_timeout(cluster: Cluster, call: Callable[[], object], what: str | None) -> None:
    """``call`` fails with REQUEST_TIMED_OUT (a Kafka error code, not a transport error) whose
    message names ZooKeeper, ``what`` was under way, and what a retry does; the broker lives.

    ``what`` is None where the request version the client sends has no error message field."""
    with pytest.raises(KafkaException) as raised:
        call()
    error = raised.value.args[0]
    assert error.code() == KafkaError.REQUEST_TIMED_OUT, error
    if what is not None:
        assert f"ZooKeeper did not answer while {what}" in error.str(), error
        assert "; retry: " in error.str(), error
    assert cluster.node.alive, cluster.node.log_tail()


def retry(call: Callable[[], object], already_done: int | None = None) -> str:
    """Retry ``call`` while the broker answers REQUEST_TIMED_OUT (its ZooKeeper session is coming
    back); "done", or "already done" when it answers ``already_done`` (the first try did it)."""
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            call()
            return "done"
        except KafkaException as exc:
            code = exc.args[0].code()
            if already_done is not None and code == already_done:
                return "already done"
            if code != KafkaError.REQUEST_TIMED_OUT or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def create_topic(cluster: Cluster, name: str, partitions: int) -> None:
    """With retries: the broker's ZooKeeper session may still be coming back from the last test's pause."""

    def create() -> None:
        cluster.admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=WAIT_S)[name].result(WAIT_S)

    retry(create, already_done=KafkaError.TOPIC_ALREADY_EXISTS)
    wait_until(lambda: leaders(cluster, name) == {p: 1 for p in range(partitions)}, 30, f"{name} to have leaders")


def leaders(cluster: Cluster, name: str) -> dict[int, int]:
    topic = cluster.admin.list_topics(timeout=15).topics.get(name)  # all topics: naming one may auto-create it
    if topic is None or topic.error is not None:
        return {}
    return {p: meta.leader for p, meta in topic.partitions.items()}


def config_value(cluster: Cluster, resource: ConfigResource, key: str) -> str | None:
    described = cluster.admin.describe_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)
    return described[key].value if key in described else None


def no_dropped_connection(cluster: Cluster) -> None:
    assert "internal error" not in cluster.node.log_path.read_text(errors="replace")


def test_create_partitions_while_zookeeper_pauses(cluster):
    name = "grow"
    create_topic(cluster, name, 2)

    def grow() -> None:
        cluster.admin.create_partitions([NewPartitions(name, 4)], request_timeout=WAIT_S)[name].result(WAIT_S)

    with zookeeper_paused_at(cluster, {SET_DATA_OP}, model.topic_path(name)):  # the write that counts
        fails_with_zookeeper_timeout(cluster, grow, f"partitions were being added to topic '{name}'")
    outcome = retry(grow, already_done=KafkaError.INVALID_PARTITIONS)
    wait_until(lambda: leaders(cluster, name) == {p: 1 for p in range(4)}, 40, f"4 partitions with leaders ({outcome})")
    no_dropped_connection(cluster)


def test_delete_topics_while_zookeeper_pauses(cluster):
    name = "doomed"
    create_topic(cluster, name, 2)

    def delete() -> None:
        cluster.admin.delete_topics([name], request_timeout=WAIT_S)[name].result(WAIT_S)

    with zookeeper_paused_at(cluster, {DELETE_OP}, model.topic_path(name)):  # the topic znode goes last
        # librdkafka sends DeleteTopics v1: an error message is in the response from v5 only
        fails_with_zookeeper_timeout(cluster, delete, None)
    outcome = retry(delete, already_done=KafkaError.UNKNOWN_TOPIC_OR_PART)
    wait_until(lambda: name not in cluster.admin.list_topics(timeout=15).topics, 40, f"{name} gone ({outcome})")
    assert cluster.zk.exists(cluster.chroot + model.topic_path(name)) is None
    no_dropped_connection(cluster)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # the API under test
def test_alter_configs_while_zookeeper_pauses(cluster):
    name = "tuned"
    create_topic(cluster, name, 1)
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "123456"})

    def alter() -> None:
        cluster.admin.alter_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)

    with zookeeper_paused_at(cluster, {SET_DATA_OP}, model.topic_config_path(name)):
        fails_with_zookeeper_timeout(cluster, alter, f"the configs of topic '{name}' were being written")
    retry(alter)
    assert config_value(cluster, ConfigResource(ResourceType.TOPIC, name), "retention.ms") == "123456"
    no_dropped_connection(cluster)


def test_incremental_alter_topic_configs_while_zookeeper_pauses(cluster):
    name = "tuned-incrementally"
    create_topic(cluster, name, 1)
    entry = ConfigEntry("retention.bytes", "7654321", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[entry])

    def alter() -> None:
        cluster.admin.incremental_alter_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)

    with zookeeper_paused_at(cluster, {SET_DATA_OP}, model.topic_config_path(name)):
        fails_with_zookeeper_timeout(cluster, alter, f"the configs of topic '{name}' were being written")
    retry(alter)
    assert config_value(cluster, ConfigResource(ResourceType.TOPIC, name), "retention.bytes") == "7654321"
    no_dropped_connection(cluster)


def test_incremental_alter_broker_configs_while_zookeeper_pauses(cluster):
    key, rate = "leader.replication.throttled.rate", "1048576"
    entry = ConfigEntry(key, rate, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[entry])

    def alter() -> None:
        cluster.admin.incremental_alter_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)

    # created on first use (a create, makepath), else overwritten (a setData)
    with zookeeper_paused_at(cluster, CREATE_OPS | {SET_DATA_OP}, model.broker_config_path("1")):
        fails_with_zookeeper_timeout(cluster, alter, "the dynamic configs of broker '1' were being written")
    retry(alter)
    assert config_value(cluster, ConfigResource(ResourceType.BROKER, "1"), key) == rate
    no_dropped_connection(cluster)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # the API under test
def test_alter_broker_configs_while_zookeeper_pauses(cluster):
    key, rate = "follower.replication.throttled.rate", "2097152"
    resource = ConfigResource(ResourceType.BROKER, "1", set_config={key: rate})

    def alter() -> None:
        cluster.admin.alter_configs([resource], request_timeout=WAIT_S)[resource].result(WAIT_S)

    with zookeeper_paused_at(cluster, CREATE_OPS | {SET_DATA_OP}, model.broker_config_path("1")):
        fails_with_zookeeper_timeout(cluster, alter, "the dynamic configs of broker '1' were being written")
    retry(alter)
    assert config_value(cluster, ConfigResource(ResourceType.BROKER, "1"), key) == rate
    no_dropped_connection(cluster)
