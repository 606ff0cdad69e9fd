"""The consumer-group checker over synthetic histories: planted anomalies are caught, and what
concurrency or at-least-once delivery allows is not reported as one."""

from confluent_kafka import KafkaError

from strom.chaos.group import GroupHistory, check_group, queue_outcomes
from strom.chaos.workload import History, Verdict


def _clean() -> GroupHistory:
    """Member 0 reads p0 0..2 and commits 3; a rebalance gives p0 to member 1, which starts at
    the committed 2 (the commit of 3 was answered with an error), reads 2 again and commits 3."""
    h = GroupHistory()
    h.rebalances += [(0.5, 0, "assign", [0, 1]), (0.6, 1, "assign", [])]
    h.reads += [(1.0, 0, 0, 0, "0:0"), (1.0, 0, 0, 1, "0:1")]
    h.watermarks += [(1.1, 0, 0, 2)]
    h.commits += [(1.2, 1.3, 0, {0: 2}, None)]
    h.reads += [(2.0, 0, 0, 2, "0:2")]
    h.watermarks += [(2.1, 0, 0, 3)]
    h.commits += [(2.2, 9.0, 0, {0: 3}, 'KafkaError{code=REBALANCE_IN_PROGRESS,val=27,str="..."}')]
    h.rebalances += [(3.0, 0, "revoke", [0, 1]), (3.5, 1, "assign", [0])]
    h.readbacks += [(3.6, 3.7, 1, {0: 2})]
    h.reads += [(4.0, 1, 0, 2, "0:2")]
    h.watermarks += [(4.1, 1, 0, 3)]
    h.commits += [(4.2, 4.3, 1, {0: 3}, None)]
    h.readbacks += [(5.0, 5.1, -1, {0: 3})]
    return h


def test_a_clean_history_passes_and_counts_rereads_after_a_rebalance_apart():
    verdict = check_group(_clean(), {"0:0", "0:1", "0:2"}, set(), set())
    assert verdict.ok, verdict.summary()
    assert (verdict.reads, verdict.distinct, verdict.duplicate_reads) == (4, 3, 1)
    assert (verdict.commits, verdict.commits_failed, verdict.readbacks, verdict.rebalances) == (3, 1, 2, 3)


def test_a_committed_offset_read_back_lower_than_an_answered_commit_is_caught():
    h = _clean()
    h.readbacks.append((6.0, 6.1, -1, {0: 2}))  # after the commit of 3 was answered
    verdict = check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
    assert not verdict.ok
    assert verdict.commit_backwards == [
        "partition 0: read back by the reader at 6.000 saw 2, after commit by member 1 saw 3 (answered 4.300)"
    ]


def test_a_successful_commit_lower_than_an_earlier_read_back_is_caught():
    h = _clean()
    h.commits.append((6.0, 6.2, 0, {0: 1}, None))
    assert (
        check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
        .commit_backwards[0]
        .startswith("partition 0: commit by member 0 at 6.000 saw 1, after")
    )


def test_overlapping_requests_and_failed_commits_are_not_ordered():
    h = _clean()
    h.readbacks.append((4.25, 4.5, -1, {0: 2}))  # sent before the commit of 3 was answered: may precede it
    h.commits.append((6.0, 6.1, 0, {0: 1}, 'KafkaError{code=ILLEGAL_GENERATION,val=22,str="..."}'))
    assert check_group(h, {"0:0", "0:1", "0:2"}, set(), set()).ok


def test_a_watermark_going_back_for_one_member_is_caught_but_not_across_members():
    h = _clean()
    h.watermarks.append((4.5, 0, 0, 2))  # member 0 saw 3 before
    h.watermarks.append((4.6, 1, 1, 7))
    h.watermarks.append((4.7, 0, 1, 5))  # member 0's own view of p1: first sighting, lower than member 1's
    verdict = check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
    assert verdict.watermark_backwards == ["member 0 partition 0: watermark 2 at 4.500 after 3"]


def test_a_watermark_below_an_offset_already_read_is_caught():
    h = _clean()
    h.reads.append((4.4, 1, 0, 9, "1:0"))  # fetched below a watermark of at least 10
    h.watermarks.append((4.5, 1, 0, 8))
    verdict = check_group(h, {"0:0", "0:1", "0:2", "1:0"}, set(), set())
    assert verdict.watermark_backwards == ["member 1 partition 0: watermark 8 at 4.500 after 10"]


def test_values_acknowledged_but_never_read_and_definite_failures_read_are_caught():
    h = _clean()
    h.reads += [(4.4, 1, 1, 0, "1:0"), (4.4, 1, 1, 1, "1:1"), (4.4, 1, 1, 2, "1:2")]
    producer = History(
        acked={"0:0": (0, 0), "0:1": (0, 1), "0:2": (0, 2), "0:3": (0, 3)},
        failed={
            "1:0": str(KafkaError(KafkaError._MSG_TIMED_OUT)),  # may have landed
            "1:1": str(KafkaError(KafkaError._PURGE_QUEUE)),  # never left the client
        },
    )
    acked, definite, indeterminate = queue_outcomes(producer)
    assert (definite, indeterminate) == ({"1:1"}, {"1:0"})
    verdict = check_group(h, acked, definite, indeterminate)
    assert (verdict.missed, verdict.failed_read) == (["0:3"], ["1:1"])
    assert (verdict.indeterminate_read, verdict.unreported_read) == (1, 1)  # "1:2" had no report at all


def test_a_failing_group_fails_the_run_verdict():
    verdict = Verdict(3, 0, 3, [], [], [], [], 0, [])
    assert verdict.ok
    h = _clean()
    h.watermarks.append((4.5, 0, 0, 2))
    verdict.group = check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
    assert not verdict.ok
    assert "watermark backwards 1" in verdict.summary()


def test_a_watermark_back_soon_after_the_partitions_leader_changed_is_reported_apart():
    """A new leader's watermark can lag its predecessor's: reported, not failing the run; the
    same step back with no election near it fails."""
    h = _clean()
    h.watermarks.append((24.5, 0, 0, 2))
    h.elections.append((20.0, 0, 1))  # partition 0's leader epoch changed 4.5 s before
    h.elections.append((24.0, 1, 3))  # another partition's election explains nothing here
    verdict = check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
    assert verdict.ok, verdict.summary()
    assert verdict.watermark_back_after_election == [
        "member 0 partition 0: watermark 2 at 24.500 after 3 (leader epoch 1 at 20.000)"
    ]
    h.elections[0] = (2.0, 0, 1)  # long before: no excuse
    verdict = check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
    assert verdict.watermark_backwards == ["member 0 partition 0: watermark 2 at 24.500 after 3"]
    assert not verdict.ok


def test_no_committed_offset_read_back_after_a_commit_is_a_step_back():
    h = _clean()
    h.readbacks.append((6.0, 6.1, -1, {0: -1}))  # a coordinator that lost the group's offsets
    verdict = check_group(h, {"0:0", "0:1", "0:2"}, set(), set())
    assert len(verdict.commit_backwards) == 1 and "saw -1" in verdict.commit_backwards[0]
