"""The queue workload's read-back checker over synthetic histories: an acknowledgement that
carries no offset (librdkafka's implicit ack) is checked by partition, not reported as moved."""

from strom.chaos.workload import History, check


def test_an_acknowledgement_without_an_offset_is_checked_by_partition_and_counted():
    # seed 401 of the campaign: "0:29071" failed NOT_ENOUGH_REPLICAS_AFTER_APPEND, the request after
    # it succeeded, and librdkafka reported it delivered with no offset
    history = History(acked={"0:0": (1, 0), "0:1": (1, None), "0:2": (1, 2)})
    read = {0: [], 1: [(0, "0:0"), (1, "0:1"), (2, "0:2")]}
    verdict = check(history, read, [])
    assert verdict.ok, verdict.summary()
    assert verdict.offset_unknown == 1
    assert "acknowledged without an offset 1" in verdict.summary()


def test_an_acknowledgement_without_an_offset_read_in_another_partition_is_moved():
    history = History(acked={"0:0": (1, 0), "0:1": (1, None)})
    read = {0: [(0, "0:1")], 1: [(0, "0:0")]}
    verdict = check(history, read, [])
    assert verdict.moved == ["0:1"]
    assert not verdict.ok


def test_an_acknowledged_offset_that_differs_is_still_moved():
    history = History(acked={"0:0": (1, 0), "0:1": (1, 5)})
    read = {1: [(0, "0:0"), (1, "0:1")]}
    assert check(history, read, []).moved == ["0:1"]
