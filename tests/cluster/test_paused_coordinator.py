"""A group coordinator paused past its ZooKeeper session does not answer from its stale cache.

Found by the fault campaign (seed 410): the paused broker's session expires, another broker
becomes the group's coordinator and takes a newer commit, and when the paused process resumes,
asyncio serves the requests that queued during the pause before anything tells the broker its
session is gone. A committed-offset read answered then went backwards. Now a broker whose session
check has not run for half the session timeout leads nothing until ZooKeeper confirms the session.
"""

from __future__ import annotations

import os
import signal

from confluent_kafka import Consumer, TopicPartition

from strom.group.records import partition_for_group
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.cluster.conftest import SESSION_TIMEOUT_MS, create_topic, wait_until
from tests.integration.clients import RawClient

TOPIC = "paused-coordinator"
GROUP = "paused-coordinator-group"
OFFSETS_PARTITIONS = 3
OVERRIDES = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "offsets.topic.replication.factor": "3"}


def _commit(bootstrap: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_a_coordinator_resumed_after_its_session_expired_answers_not_coordinator(cluster_factory):
    cluster = cluster_factory(3, OVERRIDES)
    create_topic(cluster, TOPIC, 1, 3)
    _commit(cluster.bootstrap, 5)
    offsets_partition = partition_for_group(GROUP, OFFSETS_PARTITIONS)
    coordinator = cluster.leader("__consumer_offsets", offsets_partition)
    others = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != coordinator)

    with RawClient(cluster.brokers[coordinator].bootstrap, timeout=30) as stale:
        fetch = {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}], "require_stable": False}
        first = stale.request(ApiKey.OFFSET_FETCH, 7, fetch)
        assert (first.error_code, first.topics[0].partitions[0].committed_offset) == (ErrorCode.NONE, 5)

        pid = cluster.brokers[coordinator].process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            asked = stale.send_request(ApiKey.OFFSET_FETCH, 7, fetch)  # queued until it resumes
            wait_until(
                lambda: cluster.leader("__consumer_offsets", offsets_partition) not in (coordinator, -1),
                SESSION_TIMEOUT_MS / 1000 + 20,
                "another coordinator for the group",
            )
            _commit(others, 9)  # taken by the new coordinator
        finally:
            os.kill(pid, signal.SIGCONT)
        answer = stale.read_response(ApiKey.OFFSET_FETCH, 7, asked)

    codes = {answer.error_code, *(p.error_code for t in answer.topics for p in t.partitions)}
    offsets = [p.committed_offset for t in answer.topics for p in t.partitions]
    assert ErrorCode.NOT_COORDINATOR in codes, (codes, offsets)  # never the stale 5
