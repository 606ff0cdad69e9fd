"""The fault campaign's network, overlapping and unclean-election faults, short and fixed.

``python -m strom.chaos --faults <kinds>`` runs these randomized and long outside CI; here each
kind is held once on a fixed schedule against 3 broker processes whose every broker-to-broker,
broker-to-ZooKeeper and client-to-broker connection goes through a fault-injecting proxy, and
the history is checked as a user would: nothing acknowledged lost, nothing duplicated.
"""

from strom.chaos import faults
from strom.chaos.__main__ import Fault, run_once


def _check(verdict) -> None:
    assert verdict.ok, (
        verdict.summary(),
        verdict.lost[:5],
        verdict.duplicated[:5],
        verdict.moved[:5],
        verdict.out_of_order[:5],
        verdict.replica_differences,
        verdict.anomalies[:5],
        verdict.group and verdict.group.failures(),
    )
    # the consumer group read through every fault, and a member crashed and rejoined under them
    group = verdict.group
    assert group is not None and group.commits > 0 and group.crashes >= 1, verdict.summary()


def test_partitions_between_brokers_zookeeper_and_clients_lose_and_duplicate_nothing(tmp_path):
    """The Jepsen case (leader cut off from ZooKeeper, clients still reach it), a follower cut off
    from its leader, a broker cut off from every other broker, a one-way drop between brokers,
    clients cut off from the leader."""
    schedule = [
        Fault("leader-zookeeper-cut", 1, 3.0, 7.0),
        Fault("follower-leader-cut", 1, 12.0, 3.0),
        Fault("broker-isolated", 1, 17.0, 3.0),
        Fault("broker-one-way", 2, 22.0, 3.0),
        Fault("client-leader-cut", 1, 27.0, 3.0),
    ]
    seen: list[faults.Observation] = []
    verdict, injected = run_once(tmp_path, schedule, 31, unclean=False, observations=seen)
    assert injected == {f.kind: 1 for f in schedule}
    assert [o.kind for o in seen] == [f.kind for f in schedule]
    assert verdict.acknowledged > 1000, verdict.summary()
    _check(verdict)


def test_overlapping_faults_and_a_stale_isr_under_transactions_lose_no_committed_batch(tmp_path):
    """kill -9 of the leader while a follower is cut off from the other brokers, a follower paused
    while the leader is cut off from ZooKeeper; then, with unclean election off, the ISR
    partitioned down to the leader (min.insync.replicas=1) and the leader killed: the partition
    has no leader until it returns. Under transactional producers, read_committed sees every
    committed batch once and nothing aborted."""
    schedule = [
        Fault("kill+partition", 1, 3.0, 5.0),
        Fault("pause+partition", 2, 14.0, 7.0),
        Fault(faults.UNCLEAN_FAULT, 1, 24.0, 1.0),
    ]
    seen: list[faults.Observation] = []
    verdict, injected = run_once(tmp_path, schedule, 40, unclean=False, workload="txn", observations=seen)
    assert injected == {f.kind: 1 for f in schedule}
    assert verdict.acknowledged > 200, verdict.summary()
    _check(verdict)
    stale = seen[-1]
    assert "then leader" in stale.target, stale.describe()  # the ISR did shrink to the leader alone
    assert stale.during[0] is not None and stale.during[0].leader == -1, stale.describe()
