"""A consumer killed with SIGKILL at each moment of the group protocol costs its group no more than
its session timeout plus the initial rebalance delay (plus 1 s for the next member to start), on a
3-broker cluster made by ``strom cluster start``, over PLAINTEXT and over SASL_SSL, with the classic
protocol and KIP-848's. The cases and their member processes are ``strom.bench.vanished_members``'s,
which prints the same times as a benchmark.

Over SASL_SSL a member killed while its JoinGroup was parked used to hold its group for the whole
rebalance timeout (5 minutes: the closed connection cancelled its join, so the group waited for
it), and over PLAINTEXT for about 17 s (the next member, parked in SyncGroup, expired with it).
"""

from __future__ import annotations

import uuid

import pytest

from strom.bench import vanished_members
from tests.cluster.test_cluster_cli import cleanup


@pytest.mark.parametrize("security", ["PLAINTEXT", "SASL_SSL"])
def test_a_killed_member_is_replaced_within_its_session_timeout(tmp_path, zookeeper, security):
    directory = tmp_path / "cluster"
    try:
        bootstrap, props = vanished_members.start_cluster(
            str(directory), secure=security == "SASL_SSL", zookeeper=f"{zookeeper}/vanished-{uuid.uuid4().hex[:8]}"
        )
        outcomes = vanished_members.run_cases(bootstrap, props)
        took = {outcome.case.name: round(outcome.seconds, 2) for outcome in outcomes}
        print(f"{security}: seconds from the kill to the next member's assignment: {took}")
        assert len(took) == len(vanished_members.CASES)
        late = {name: s for name, s in took.items() if s > vanished_members.bound_s()}
        assert not late, f"over {vanished_members.bound_s()} s from the kill to the next assignment: {took}"
        # the member was removed by its session expiring, with a line that says who it was
        logs = "".join(path.read_text() for path in (directory / "logs").glob("server-*.log"))
        assert "expired: no heartbeat within its session timeout" in logs
        assert "(client rdkafka, host /127.0.0.1" in logs
    finally:
        cleanup(directory)
