"""A broker holding 1,000 idle client connections still serves clients, and every idle one too.

Each idle connection completes an ApiVersions exchange (what every client sends first) and then
stays silent, as strom.bench.connections does with 5,000; meanwhile confluent-kafka creates a
topic, produces and consumes through the same broker. Afterwards every idle connection is asked
ApiVersions again and answers.
"""

from __future__ import annotations

from strom.bench.connections import IdleConnections
from strom.resources import raise_open_files_limit
from strom.testing import Broker

IDLE = 1000
MESSAGES = 200


def test_a_thousand_idle_connections_and_a_producer_consumer_round_trip():
    soft, _ = raise_open_files_limit()  # before the broker starts: it inherits the limit
    assert soft >= IDLE + 256, f"the open files limit ({soft}) is too low for {IDLE} connections"
    with Broker() as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        idle = IdleConnections(host, int(port))
        try:
            idle.open(IDLE, timeout_s=60)
            assert len(idle) == IDLE

            broker.create_topic("busy", 1)
            messages = [(b"k%d" % i, b"value %d" % i) for i in range(MESSAGES)]
            produced = broker.produce("busy", messages, partition=0)
            assert [r.offset for r in produced] == list(range(MESSAGES))
            consumed = broker.consume("busy", MESSAGES, timeout=30)
            assert [(r.offset, r.key, r.value) for r in consumed] == [(i, k, v) for i, (k, v) in enumerate(messages)]

            assert idle.ping(timeout_s=60) == IDLE
        finally:
            idle.close()
