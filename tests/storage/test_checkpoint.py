import threading

from strom.storage import checkpoint
from strom.storage.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    deferred_syncs,
    wait_for_deferred,
)


def test_offset_checkpoint_is_kafkas_text_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(str(path)).write({("my.topic_x", 1): 42, ("a-b", 0): 7})
    assert path.read_text() == "0\n2\na-b 0 7\nmy.topic_x 1 42\n"
    assert OffsetCheckpointFile(str(path)).read() == {("my.topic_x", 1): 42, ("a-b", 0): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_kafka_written_checkpoint_parses(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n3\n__consumer_offsets 22 0\ntest 0 1000\ntest 1 999\n")
    assert OffsetCheckpointFile(str(path)).read() == {
        ("__consumer_offsets", 22): 0,
        ("test", 0): 1000,
        ("test", 1): 999,
    }


def test_damaged_checkpoint_reads_as_empty(tmp_path):
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n5\nx 0 1\n")
    assert OffsetCheckpointFile(str(path)).read() == {}
    assert OffsetCheckpointFile(str(tmp_path / "missing")).read() == {}


def test_leader_epoch_checkpoint(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(str(path)).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(str(path)).read() == [(0, 0), (3, 120)]


def test_deferred_writes_appear_whole_at_the_end_of_the_block(tmp_path):
    """Inside the block a write leaves the old file in place; on leaving every file is replaced,
    no .tmp is left, and a write whose directory went away meanwhile is dropped, not an error."""
    (tmp_path / "a").mkdir()
    kept = LeaderEpochCheckpointFile(str(tmp_path / "a" / LEADER_EPOCH_CHECKPOINT))
    kept.write([(0, 0)])
    (tmp_path / "b").mkdir()
    doomed = LeaderEpochCheckpointFile(str(tmp_path / "b" / LEADER_EPOCH_CHECKPOINT))
    with deferred_syncs():
        kept.write([(0, 0), (1, 40)])
        kept.write([(0, 0), (1, 40), (2, 90)])  # the last write of a file wins
        with deferred_syncs():  # nested: the outer block finishes the work
            doomed.write([(3, 7)])
        assert kept.read() == [(0, 0)]
        (tmp_path / "b").rename(tmp_path / "b.deleted")  # as a replica deleted in the same pass
    assert kept.read() == [(0, 0), (1, 40), (2, 90)]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [LEADER_EPOCH_CHECKPOINT]
    # outside a block, writes are immediate again
    kept.write([(5, 100)])
    assert kept.read() == [(5, 100)]


def test_background_batches_land_in_order_and_a_later_plain_write_wins(tmp_path):
    """A batch made durable on the checkpoint thread leaves the old file until it is done; a plain
    write made meanwhile is newer than the batch's text, so the batch must not rename over it;
    two batches writing one file land in the order they were made."""
    for name in "abc":
        (tmp_path / name).mkdir()
    a, b, c = (LeaderEpochCheckpointFile(str(tmp_path / n / LEADER_EPOCH_CHECKPOINT)) for n in "abc")
    for f in (a, b, c):
        f.write([(0, 0)])
    gate = threading.Event()
    checkpoint._writer.submit(gate.wait, 30)  # holds the checkpoint thread: the batches queue behind it
    try:
        with deferred_syncs(background_from=1) as first:
            a.write([(0, 0), (1, 40)])
            b.write([(0, 0), (1, 10)])
            c.write([(0, 0), (1, 5)])
        with deferred_syncs(background_from=1) as second:
            b.write([(0, 0), (1, 10), (2, 20)])
        assert first.future is not None and second.future is not None
        a.write([(0, 0), (1, 40), (2, 60)])  # plain, durable at once: newer than the first batch's text
        assert (a.read(), b.read(), c.read()) == ([(0, 0), (1, 40), (2, 60)], [(0, 0)], [(0, 0)])
    finally:
        gate.set()
    assert wait_for_deferred(30)
    first.future.result()
    second.future.result()
    assert a.read() == [(0, 0), (1, 40), (2, 60)]
    assert b.read() == [(0, 0), (1, 10), (2, 20)]
    assert c.read() == [(0, 0), (1, 5)]
    assert sorted(p.name for d in "abc" for p in (tmp_path / d).iterdir()) == [LEADER_EPOCH_CHECKPOINT] * 3
