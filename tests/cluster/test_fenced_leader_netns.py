"""Clients move off a fenced leader (issue 33), on real network namespaces.

ZooKeeper and three brokers each run in a network namespace of their own; the producer stays in
the root namespace, bootstraps from the leader alone and writes only to its partition (RF=3,
min.insync.replicas=2, idempotent, acks=all, librdkafka's defaults): the client that a fenced
leader used to strand. It had no connection to another broker, asked the fenced one for metadata
again and again and heard "no leader" each time: no write was acknowledged in a 20 s cut. The
fenced broker now names the replica the controller elects in its place (strom.server.leader_hints),
and writes resume within the ZooKeeper session timeout plus 3 s. See strom.chaos.fenced_leader
for the shapes and what is measured; ``python -m strom.bench.fenced_leader`` prints the figures.

Needs root and nftables (scripts/setup.sh installs it), as CI has; without them the tests fail
saying so, they are never skipped.
"""

from __future__ import annotations

import pytest

from strom.chaos import fenced_leader
from strom.testing.cluster import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS
from tests.tls_certs import make_certificates, sasl_ssl_plain

CUT_S = 12.0
RESUME_BOUND_S = SESSION_TIMEOUT_MS / 1000 + 3
# a follower whose fetch hangs on a dead connection gives up after replica.socket.timeout.ms (30 s,
# Kafka's default) plus replica.fetch.wait.max.ms; TCP's own retransmission usually revives it first
FOLLOWERS_BACK_S = 30 + 0.5 + 5


def assert_moved(outcome: fenced_leader.Outcome) -> None:
    print(outcome.summary())
    assert outcome.victim_fenced, outcome.summary()
    assert outcome.leader_during_cut not in (outcome.victim, -1), outcome.summary()
    assert outcome.longest_silence_s <= RESUME_BOUND_S, (
        f"writes stopped for {outcome.longest_silence_s:.1f} s, more than the session timeout plus 3 s "
        f"({RESUME_BOUND_S} s): {outcome.summary()}"
    )
    assert not outcome.lost, outcome.lost[:5]
    assert not outcome.duplicated, outcome.duplicated[:5]


@pytest.mark.parametrize("shape", ["zookeeper-and-followers", "zookeeper", "one-way-to-zookeeper", "controller"])
def test_writes_leave_a_leader_cut_from_zookeeper_within_the_session_timeout(tmp_path, shape):
    assert_moved(fenced_leader.run(tmp_path, shape, CUT_S))


def test_over_sasl_ssl_writes_leave_a_leader_cut_from_zookeeper_and_its_followers(tmp_path):
    """The issue's shape with clients and brokers on one SASL_SSL listener (PLAIN), replication too."""
    brokers, client = sasl_ssl_plain(make_certificates(tmp_path / "certs"))
    # the certificate names 127.0.0.1, not 10.77.N.x
    brokers["ssl.endpoint.identification.algorithm"] = ""
    client["ssl.endpoint.identification.algorithm"] = "none"
    outcome = fenced_leader.run(tmp_path / "cluster", "zookeeper-and-followers", CUT_S, "SASL_SSL", brokers, client)
    assert_moved(outcome)


def test_a_leader_cut_from_its_followers_keeps_leading_and_takes_writes_again_once_healed(tmp_path):
    """It keeps its ZooKeeper session, so nobody else may lead: its ISR shrinks to itself after
    replica.lag.time.max.ms and acks=all writes are refused (NOT_ENOUGH_REPLICAS, retried by the
    client) until the followers are back, as in Kafka. Nothing acknowledged is lost meanwhile."""
    outcome = fenced_leader.run(tmp_path, "followers", CUT_S)
    print(outcome.summary())
    assert not outcome.victim_fenced, outcome.summary()
    assert outcome.leader_during_cut == outcome.victim, outcome.summary()
    assert outcome.longest_silence_s >= CUT_S - LAG_TIME_MAX_MS / 1000 - 3, outcome.summary()
    assert outcome.resumed_after_heal_s is not None, outcome.summary()
    assert outcome.resumed_after_heal_s <= FOLLOWERS_BACK_S, outcome.summary()
    assert not outcome.lost, outcome.lost[:5]
    assert not outcome.duplicated, outcome.duplicated[:5]
