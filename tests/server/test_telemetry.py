"""Client telemetry (KIP-714): not advertised, so librdkafka never asks; answered on the wire anyway.

A Kafka broker without a telemetry receiver plugin leaves GetTelemetrySubscriptions and
PushTelemetry out of ApiVersions; librdkafka 2.5+ asks any broker that lists them, and logs an info
line per client even for an empty subscription. What a user would notice is that line on every
kcat command, or a client asking again and again; librdkafka's debug log says what it does.
"""

from __future__ import annotations

import logging
import uuid

import pytest
from confluent_kafka import Producer

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("telemetry") / "data") as process:
        yield process


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_telemetry_is_not_advertised_and_librdkafka_never_asks(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        response = client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    advertised = {k.api_key for k in response.api_keys}
    assert ApiKey.PRODUCE in advertised
    assert not advertised & {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}

    lines = Lines()
    logger = logging.getLogger(f"rdkafka-telemetry-{uuid.uuid4().hex[:6]}")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "debug": "telemetry", "logger": logger})
    try:
        producer.produce("telemetry-probe", b"x")
        assert producer.flush(WAIT_S) == 0  # connected, ApiVersions read, a request served
    finally:
        producer.flush(1)
    assert not [s for s in lines.lines if "GetTelemetry" in s or "PushTelemetry" in s], "\n".join(lines.lines)
    assert not [s for s in lines.lines if "instance id changed" in s]


def test_get_and_push_on_the_wire(shared_broker):
    with RawClient(shared_broker.bootstrap) as client:
        first = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": None})
        assert first.error_code == ErrorCode.NONE
        assert first.client_instance_id is not None  # assigned for the zero id
        assert (first.requested_metrics, first.push_interval.total_seconds()) == ((), 300)
        assert set(first.accepted_compression_types) == {1, 2, 3, 4}
        again = client.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": first.client_instance_id})
        assert (again.client_instance_id, again.subscription_id) == (first.client_instance_id, first.subscription_id)

        def push(**fields) -> int:
            body = {
                "client_instance_id": first.client_instance_id,
                "subscription_id": first.subscription_id,
                "terminating": False,
                "compression_type": 0,
                "metrics": b"\x0a\x00",
                **fields,
            }
            return client.request(ApiKey.PUSH_TELEMETRY, 0, body).error_code

        assert push() == ErrorCode.NONE
        assert push(terminating=True, compression_type=4) == ErrorCode.NONE
        assert push(subscription_id=first.subscription_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert push(client_instance_id=None) == ErrorCode.INVALID_REQUEST
        assert push(compression_type=9) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert push(metrics=b"x" * (first.telemetry_max_bytes + 1)) == ErrorCode.TELEMETRY_TOO_LARGE
