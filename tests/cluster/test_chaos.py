"""The fault campaign's short, fixed version: one fault of every kind, nothing acknowledged lost.

``python -m strom.chaos --runs 50 --minutes 3`` runs the long, randomized campaign outside CI;
this runs the same cluster, workload and checker with a fixed schedule that holds each kind of
fault once: kill -9, SIGSTOP past the ZooKeeper session, clean restart, ZooKeeper paused past
every session, a broker cut off from ZooKeeper both ways and one way.
"""

from strom.chaos.__main__ import PROCESS_FAULTS, Fault, run_once

SCHEDULE = [
    Fault("kill", 1, 3.0, 4.0),
    Fault("pause", 2, 13.0, 8.0),
    Fault("restart", 3, 28.0, 0.0),
    Fault("zookeeper-pause", 1, 38.0, 8.0),
    Fault("zookeeper-cut", 2, 53.0, 8.0),
    Fault("zookeeper-cut-one-way", 3, 68.0, 8.0),
]


def test_every_fault_kind_once_loses_and_duplicates_nothing(tmp_path):
    assert {f.kind for f in SCHEDULE} == set(PROCESS_FAULTS)
    verdict, injected = run_once(tmp_path, SCHEDULE, 84, unclean=False)
    assert injected == {kind: 1 for kind in PROCESS_FAULTS}
    assert verdict.acknowledged > 1000, verdict.summary()
    assert verdict.ok, (
        verdict.summary(),
        verdict.lost[:5],
        verdict.duplicated[:5],
        verdict.moved[:5],
        verdict.out_of_order[:5],
        verdict.replica_differences,
        verdict.group and verdict.group.failures(),
        verdict.epoch_bumps[:6],
    )
    # the consumer group read through every fault, and its members crashed and rejoined under them
    group = verdict.group
    assert group is not None and group.commits > 0 and group.crashes >= 1, verdict.summary()
