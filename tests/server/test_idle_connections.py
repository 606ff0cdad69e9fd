"""connections.max.idle.ms: a silent connection is closed; a busy one and a long poll are not.

Kafka closes a connection that has carried nothing for connections.max.idle.ms (ten minutes by
default), so a broker does not keep the sockets of clients that vanished behind a NAT or a
crashed host forever. A client that comes back reconnects and carries on.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from strom.protocol.api import ApiKey
from tests.broker_process import BrokerProcess
from tests.integration.clients import ConnectionClosed, RawClient

MAX_IDLE_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    overrides = {"connections.max.idle.ms": str(MAX_IDLE_MS)}
    with BrokerProcess(tmp_path_factory.mktemp("idle") / "data", overrides) as process:
        yield process


def api_versions(client: RawClient) -> None:
    correlation = client.send_request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    client.read_response(ApiKey.API_VERSIONS, 3, correlation)


def test_a_silent_connection_is_closed_and_an_active_one_is_not(broker):
    with RawClient(broker.bootstrap, timeout=15) as silent, RawClient(broker.bootstrap, timeout=15) as active:
        api_versions(silent)
        api_versions(active)
        deadline = time.monotonic() + MAX_IDLE_MS / 1000 * 2
        while time.monotonic() < deadline:  # a request every 0.3 s: never idle for the limit
            api_versions(active)
            time.sleep(0.3)
        api_versions(active)
        # the silent one is closed by the broker, within the limit plus the check interval
        with pytest.raises(ConnectionClosed):
            silent.read_frame(timeout=MAX_IDLE_MS / 1000 * 3)


def test_clients_idle_past_the_limit_reconnect_and_lose_nothing(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    producer.produce("idle-topic", b"before", partition=0)
    assert producer.flush(15) == 0
    time.sleep(MAX_IDLE_MS / 1000 * 2)  # the broker closes the producer's connections meanwhile
    producer.produce("idle-topic", b"after", partition=0)
    assert producer.flush(15) == 0

    # a consumer whose Fetch long-polls longer than the limit is waiting, not idle
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "idle", "fetch.wait.max.ms": MAX_IDLE_MS * 2}
    )
    consumer.assign([TopicPartition("idle-topic", 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [b"before", b"after"]
