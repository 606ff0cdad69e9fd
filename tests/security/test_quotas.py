"""Client quotas with real clients: a producer held to its byte rate, a consumer throttled, the admin APIs and CLI.

The broker measures rates over ``quota.window.num=2`` samples of one second here. Kafka's rate
(and strom's, which is the same) lets a client that has been idle burst (num - 1) x window x quota
bytes before it is throttled, and again each time its oldest sample expires: with the default
11 one-second samples a producer sending as fast as it can gets 10 MB up front and then waits, so
its 20-second average depends on where the 11-second cycle falls (0.6 to 1.13 x the quota in a
simulation of the code). With 2 samples the cycle is 2 s and 20 s hold ten of them.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time

import pytest

from strom.protocol.api import ApiKey
from tests.broker_process import BrokerProcess
from tests.integration.clients import WAIT_S, RawClient, unique_topic, wait_until

QUOTA = 1048576  # 1 MiB/s


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data", {"quota.window.num": "2"}) as process:
        yield process


def configs(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "configs", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def alter(
    bootstrap: str,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float | None]],
    validate_only: bool = False,
):
    with RawClient(bootstrap) as client:
        return client.request(
            ApiKey.ALTER_CLIENT_QUOTAS,
            1,
            {
                "validate_only": validate_only,
                "entries": [
                    {
                        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                        "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops],
                    }
                ],
            },
        )


def describe(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False):
    with RawClient(bootstrap) as client:
        response = client.request(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            1,
            {
                "strict": strict,
                "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            },
        )
    assert response.error_code == 0, response.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in response.entries
    }


def test_alter_and_describe_client_quotas_round_trip(broker):
    bootstrap = broker.bootstrap
    response = alter(
        bootstrap,
        [("user", "alice"), ("client-id", "app")],
        [("producer_byte_rate", 2048.0), ("request_percentage", 150.5)],
    )
    assert [e.error_code for e in response.entries] == [0]
    assert alter(bootstrap, [("client-id", None)], [("consumer_byte_rate", 4096.0)]).entries[0].error_code == 0
    assert describe(bootstrap, [("user", 0, "alice")]) == {
        (("user", "alice"), ("client-id", "app")): {"producer_byte_rate": 2048.0, "request_percentage": 150.5}
    }
    assert describe(bootstrap, [("user", 0, "alice")], strict=True) == {}
    assert describe(bootstrap, [("client-id", 1, None)], strict=True) == {
        (("client-id", None),): {"consumer_byte_rate": 4096.0}
    }
    # removing the last key removes the entity
    alter(bootstrap, [("client-id", None)], [("consumer_byte_rate", None)])
    assert describe(bootstrap, [("client-id", 1, None)], strict=True) == {}
    # refusals: an unknown key, a fractional byte rate, an ip entity; nothing is written
    bad = alter(bootstrap, [("client-id", "x")], [("nonsense_rate", 1.0)]).entries[0]
    assert bad.error_code == 42 and "nonsense_rate" in bad.error_message
    assert alter(bootstrap, [("client-id", "x")], [("producer_byte_rate", 1.5)]).entries[0].error_code == 42
    assert alter(bootstrap, [("ip", "1.2.3.4")], [("producer_byte_rate", 1.0)]).entries[0].error_code == 42
    assert (
        alter(bootstrap, [("client-id", "y")], [("producer_byte_rate", 1.0)], validate_only=True).entries[0].error_code
        == 0
    )
    assert describe(bootstrap, [("client-id", 2, None)]) == {
        (("user", "alice"), ("client-id", "app")): {"producer_byte_rate": 2048.0, "request_percentage": 150.5}
    }
    alter(
        bootstrap,
        [("user", "alice"), ("client-id", "app")],
        [("producer_byte_rate", None), ("request_percentage", None)],
    )


def test_configs_cli_sets_describes_and_deletes_quotas(broker):
    added = configs(
        broker,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "cli-app",
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout == "Completed updating config for client cli-app.\n"
    shown = configs(broker, "--describe", "--entity-type", "clients", "--entity-name", "cli-app")
    assert shown.stdout == (
        "Quota configs for client-id 'cli-app' are consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n"
    ), shown.stderr
    default = configs(
        broker, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "request_percentage=200"
    )
    assert default.stdout == "Completed updating default config for users in the cluster.\n", default.stderr
    both = configs(broker, "--alter", "--user", "bob", "--client", "cli-app", "--add-config", "producer_byte_rate=10")
    assert both.returncode == 0, both.stderr
    users = configs(broker, "--describe", "--entity-type", "users", "--entity-default")
    assert users.stdout == "Quota configs for the default user-principal are request_percentage=200.0\n"
    pair = configs(broker, "--describe", "--user", "bob", "--client", "cli-app")
    assert pair.stdout == "Quota configs for user-principal 'bob', client-id 'cli-app' are producer_byte_rate=10.0\n"
    bad = configs(
        broker,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "cli-app",
        "--add-config",
        "producer_byte_rate=fast",
    )
    assert bad.returncode == 1 and "producer_byte_rate" in bad.stderr
    for args in (
        [
            "--entity-type",
            "clients",
            "--entity-name",
            "cli-app",
            "--delete-config",
            "producer_byte_rate,consumer_byte_rate",
        ],
        ["--entity-type", "users", "--entity-default", "--delete-config", "request_percentage"],
        ["--user", "bob", "--client", "cli-app", "--delete-config", "producer_byte_rate"],
    ):
        assert configs(broker, "--alter", *args).returncode == 0
    assert configs(broker, "--describe", "--entity-type", "clients").stdout == ""


def test_producer_is_held_to_its_byte_rate_and_told_it_is_throttled(broker):
    from confluent_kafka import Producer

    topic = unique_topic("quota")
    assert (
        alter(broker.bootstrap, [("client-id", "held-producer")], [("producer_byte_rate", float(QUOTA))])
        .entries[0]
        .error_code
        == 0
    )
    throttles: list[int] = []
    acked = [0]

    def delivered(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "held-producer",
            "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
            "queue.buffering.max.kbytes": 4096,
            "batch.size": 65536,
        }
    )
    value = b"q" * 10_000
    duration = 20.0
    started = time.monotonic()
    while time.monotonic() - started < duration:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    elapsed = time.monotonic() - started
    counted = acked[0]  # what was acknowledged within the 20 s
    producer.flush(WAIT_S * 3)
    rate = counted / elapsed
    print(
        f"producer held to {rate / QUOTA:.3f} x quota ({counted} bytes acked in {elapsed:.1f} s), "
        f"{len(throttles)} throttle callbacks, max {max(throttles, default=0)} ms"
    )
    assert 0.9 * QUOTA <= rate <= 1.1 * QUOTA
    assert throttles and max(throttles) > 0


def fetch_request(topic: str) -> dict:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "forgotten_topics_data": [],
        "rack_id": "",
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


def test_consumer_over_its_byte_rate_gets_throttle_time(broker):
    from tests.integration.clients import Msg, confluent_produce

    topic = unique_topic("quota-fetch")
    confluent_produce(broker.bootstrap, topic, [Msg(None, b"f" * 50_000, (), None) for _ in range(10)])
    assert (
        alter(broker.bootstrap, [("client-id", "slow-consumer")], [("consumer_byte_rate", 100_000.0)])
        .entries[0]
        .error_code
        == 0
    )
    throttled = []
    with RawClient(broker.bootstrap, client_id="slow-consumer") as client:

        def fetch_throttled() -> bool:
            response = client.request(ApiKey.FETCH, 11, fetch_request(topic))
            throttled.append(response.throttle_time.total_seconds() * 1000)
            return throttled[-1] > 0

        wait_until(fetch_throttled, what="a throttled fetch")
        # the connection is muted for the throttle time: the next answer comes no sooner (KIP-219)
        sent = time.monotonic()
        client.request(ApiKey.FETCH, 11, fetch_request(topic))
        assert time.monotonic() - sent >= throttled[-1] / 1000 * 0.9
    with RawClient(broker.bootstrap, client_id="another-consumer") as other:  # other clients are not limited
        response = other.request(ApiKey.FETCH, 11, fetch_request(topic))
        assert response.throttle_time.total_seconds() == 0
        assert len(response.responses[0].partitions[0].records) > 0


def test_request_percentage_throttles_every_api_with_a_throttle_field(broker):
    assert (
        alter(broker.bootstrap, [("user", "ANONYMOUS"), ("client-id", "busy")], [("request_percentage", 0.01)])
        .entries[0]
        .error_code
        == 0
    )
    try:
        with RawClient(broker.bootstrap, client_id="busy") as client:

            def throttled() -> bool:
                response = client.request(
                    ApiKey.METADATA,
                    9,
                    {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
                )
                return response.throttle_time.total_seconds() > 0

            wait_until(throttled, what="a throttled Metadata")
    finally:
        alter(broker.bootstrap, [("user", "ANONYMOUS"), ("client-id", "busy")], [("request_percentage", None)])


def test_request_percentage_counts_loop_time_not_waits(broker):
    """Long-poll fetches are async: their handler time is counted after the wait, without the wait."""
    from tests.integration.clients import Msg, confluent_produce

    topic = unique_topic("quota-poll")
    confluent_produce(broker.bootstrap, topic, [Msg(None, b"x", (), None)])
    poll = fetch_request(topic)
    poll["max_wait"] = 300  # nothing after offset 1: every fetch waits its 300 ms in the purgatory
    poll["topics"][0]["partitions"][0]["fetch_offset"] = 1
    entity = [("user", "ANONYMOUS"), ("client-id", "poller")]
    try:
        # half a thread: back-to-back polls would be ~100 % of one if their waits were counted
        assert alter(broker.bootstrap, entity, [("request_percentage", 50.0)]).entries[0].error_code == 0
        with RawClient(broker.bootstrap, client_id="poller") as client:
            for _ in range(6):
                response = client.request(ApiKey.FETCH, 11, poll)
                assert response.responses[0].partitions[0].records in (None, b"")
                assert response.throttle_time.total_seconds() == 0
        assert alter(broker.bootstrap, entity, [("request_percentage", 0.01)]).entries[0].error_code == 0
        with RawClient(broker.bootstrap, client_id="poller") as client:

            def throttled() -> bool:
                return client.request(ApiKey.FETCH, 11, poll).throttle_time.total_seconds() > 0

            wait_until(throttled, what="a throttled long-poll Fetch")
    finally:
        alter(broker.bootstrap, entity, [("request_percentage", None)])


def test_throttle_field_is_patched_where_each_version_keeps_it():
    from strom.protocol.frame import RequestHeader
    from strom.server.dispatcher import RawResponse
    from strom.server.handlers import fetch, produce
    from strom.server.quotas import with_throttle

    for version in (3, 8, 9):
        header = RequestHeader(ApiKey.PRODUCE, version, 1, "c", 1)
        body = produce._encode_one_partition("t", produce.PartitionResult(0, base_offset=5), version).chunks[0]
        patched = with_throttle(header, RawResponse([body]), 1234).chunks[0]
        end = len(body) - (1 if version >= 9 else 0)
        assert struct.unpack_from(">i", patched, end - 4)[0] == 1234 and len(patched) == len(body)
    header = RequestHeader(ApiKey.FETCH, 12, 1, "c", 2)
    patched = with_throttle(header, fetch.encode_response([], 12), 77).chunks[0]
    assert struct.unpack_from(">i", patched, 0)[0] == 77
