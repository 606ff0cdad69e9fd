"""Issue 31's chaos run: an Iceberg topic on 3 brokers (RF=3, one shared SQL catalog) written by an
idempotent and a transactional producer at the same time, while the leader of a partition is
killed with kill -9 and started again, a leader is moved (replicas reordered, preferred election)
and a leader restarts cleanly. Afterwards pyiceberg's scan holds exactly what the producers were
told: each (partition, offset) once, every acknowledged and committed record with its bytes,
timestamp and headers, no aborted record, no control record; in value_schema_id_prefix mode, with
two schema versions, the bad records in ``<topic>~dlq`` once each with their reason. See
strom.chaos.iceberg for the run and ``python -m strom.chaos.iceberg`` for longer campaigns.

The seed is fixed; its schedule has every fault kind once, each on a healthy cluster.
"""

from __future__ import annotations

import pytest

from strom.chaos import iceberg

SECONDS = 16.0  # of writing under faults: the seed's schedule fits kill, move and restart in it
SEED = 2


def assert_exactly_once(outcome: iceberg.Outcome, mode: str) -> None:
    print(outcome.summary())
    for line in outcome.faults:
        print(" ", line)
    verdict = outcome.verdict
    assert verdict.ok, verdict.details()
    assert outcome.caught_up_s is not None, "the tables never held every committed record"
    done = " ".join(outcome.faults)
    assert "(kill -9)" in done and "restarted broker" in done and " moved " in done, outcome.faults
    assert verdict.acknowledged > 100 and verdict.txn_committed > 100 and verdict.txn_aborted > 10, outcome.summary()
    assert verdict.transactions["committed"] > verdict.transactions["aborted"] > 0, outcome.summary()
    if mode == "key_value":
        assert verdict.dlq_rows == 0 and verdict.rows >= verdict.acknowledged + verdict.txn_committed
    else:  # one record in ten is bad, so both tables have rows; check() compared each with its reason
        assert verdict.dlq_rows > 20 and verdict.rows > 9 * verdict.dlq_rows // 2, outcome.summary()


@pytest.mark.parametrize("mode", iceberg.MODES)
def test_the_tables_hold_exactly_the_committed_records_through_kills_moves_and_restarts(tmp_path, mode):
    assert_exactly_once(iceberg.run(tmp_path / "run", SEED, SECONDS, mode, catch_up_s=60), mode)


def test_over_sasl_ssl_the_table_holds_exactly_the_committed_records(tmp_path):
    """Clients, replication and the admin calls of the faults on one SASL_SSL listener (PLAIN), set
    up as ``python -m strom.chaos.iceberg --security sasl_ssl`` sets it up (its CA, certificate and
    passwords made in the run's directory)."""
    brokers, client = iceberg.sasl_ssl(tmp_path / "run")
    assert client["security.protocol"] == "SASL_SSL" and brokers["security.inter.broker.protocol"] == "SASL_SSL"
    outcome = iceberg.run(tmp_path / "run", SEED, SECONDS, "key_value", "SASL_SSL", brokers, client, catch_up_s=60)
    assert_exactly_once(outcome, "key_value")
