"""Transactions in the log: open transactions, markers, the LSO, .txnindex, recovery and compaction."""

import os
import shutil
import struct
import time

import pytest

from strom.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    TransactionCoordinatorFencedError,
)
from strom.protocol.records import (
    NewRecord,
    build_batch,
    build_control_batch,
    iter_batch_headers,
    iter_records,
    read_control_record,
)
from strom.storage.cleaner import clean_log
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from strom.storage.txn_index import AbortedTxn, TransactionIndex

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=128)
NOW = int(time.time() * 1000)  # markers carry the time they are written: keep data near it (segment.ms)
COMPACTED = LogConfig(
    segment_bytes=1500, index_interval_bytes=128, cleanup_policy="compact", min_cleanable_dirty_ratio=0.0
)


def txn_batch(
    producer_id: int, seq: int, count: int = 2, *, epoch: int = 0, key: bytes | None = None, prefix: bytes = b"v"
) -> bytes:
    records = [NewRecord(prefix + b"-%d" % (seq + i), key=key, timestamp=NOW + seq + i) for i in range(count)]
    return build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=seq, transactional=True)


def plain_batch(prefix: bytes = b"p", key: bytes | None = None) -> bytes:
    return build_batch([NewRecord(prefix, key=key, timestamp=NOW)])


def committed_read(log: Log, start: int) -> tuple[list[bytes], set[int]]:
    """What a read_committed consumer keeps: values below the LSO minus aborted transactions' batches."""
    upper = log.last_stable_offset
    aborted = log.aborted_transactions(start, upper)
    data = b"".join(s.read() for s in log.read(start, 1 << 20, upper).slices)
    values, skipped = [], set()
    for header in iter_batch_headers(data):
        if header.is_control:
            continue
        if any(
            a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset
            for a in aborted
        ):
            skipped.add(header.producer_id)
            continue
        chunk = data[header.position : header.position + header.size]
        values.extend(r.value for r in iter_records(chunk))
    return values, skipped


def test_open_transaction_holds_the_lso_until_its_marker_is_below_the_hw(tmp_path):
    log = Log(str(tmp_path / "t-0"), CONFIG)
    log.append_as_leader(plain_batch(b"before"))
    first = log.append_as_leader(txn_batch(7, 0)).first_offset
    log.append_as_leader(plain_batch(b"during"))
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == first == 1
    marker = log.append_marker(7, 0, commit=True, coordinator_epoch=3)
    # the marker is written but not yet committed: a new leader could still see the txn as open
    assert log.last_stable_offset == first
    log.update_high_watermark(marker.last_offset)
    assert log.last_stable_offset == first
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset
    values, skipped = committed_read(log, 0)
    assert values == [b"before", b"v-0", b"v-1", b"during"] and not skipped
    assert log.aborted_transactions(0, log.log_end_offset) == []


def test_abort_is_indexed_and_hidden_from_read_committed(tmp_path):
    log = Log(str(tmp_path / "t-0"), CONFIG)
    a = log.append_as_leader(txn_batch(1, 0, prefix=b"a")).first_offset
    b = log.append_as_leader(txn_batch(2, 0, prefix=b"b")).first_offset
    log.append_as_leader(txn_batch(1, 2, prefix=b"a"))
    abort = log.append_marker(1, 0, commit=False, coordinator_epoch=0)
    log.append_marker(2, 0, commit=True, coordinator_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    expected = AbortedTxn(1, a, abort.first_offset, b)  # LSO then: producer 2's transaction still open
    assert log.aborted_transactions(0, log.log_end_offset) == [expected]
    assert log.active_segment.txn_index.entries == [expected]
    with open(log.active_segment.txn_index.path, "rb") as handle:  # Kafka's 34-byte entry
        assert handle.read() == struct.pack(">hqqqq", 0, 1, a, abort.first_offset, b)
    values, skipped = committed_read(log, 0)
    assert values == [b"b-0", b"b-1"] and skipped == {1}


def test_markers_from_fenced_producers_and_old_coordinators_are_refused(tmp_path):
    log = Log(str(tmp_path / "t-0"), CONFIG)
    log.append_as_leader(txn_batch(5, 0, epoch=3))
    log.append_marker(5, 3, commit=False, coordinator_epoch=4)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(5, 2, commit=True, coordinator_epoch=4)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(5, 3, commit=True, coordinator_epoch=3)
    assert log.log_end_offset == end
    # a fencing abort with a bumped epoch ends the open transaction and restarts sequences
    log.append_as_leader(txn_batch(5, 2, epoch=3))
    log.append_marker(5, 4, commit=False, coordinator_epoch=4)
    assert 5 not in log.producer_state.ongoing
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(5, 4, epoch=3))
    log.append_as_leader(txn_batch(5, 0, epoch=4))


def test_clients_cannot_write_control_batches(tmp_path):
    log = Log(str(tmp_path / "t-0"), CONFIG)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(build_control_batch(1, 0, True, 0))
    assert log.log_end_offset == 0


def test_control_batch_round_trip():
    batch = build_control_batch(9, 2, False, 17, timestamp=5)
    header = next(iter_batch_headers(batch))
    assert header.is_control and header.is_transactional and header.base_sequence == -1
    assert read_control_record(batch, header) == (False, 17)


def test_follower_appends_track_transactions_too(tmp_path):
    leader = Log(str(tmp_path / "leader" / "t-0"), CONFIG)
    leader.append_as_leader(txn_batch(3, 0))
    leader.append_marker(3, 0, commit=False, coordinator_epoch=1)
    leader.append_as_leader(txn_batch(4, 0))
    data = b"".join(s.read() for s in leader.read(0, 1 << 20).slices)
    follower = Log(str(tmp_path / "follower" / "t-0"), CONFIG)
    follower.append_as_follower(data)
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.aborted_transactions(0, 100) == leader.aborted_transactions(0, 100)
    assert follower.last_stable_offset == 3  # producer 4's transaction is open
    assert follower.producer_state.producers[3].coordinator_epoch == 1


def build_txn_log(directory: str) -> Log:
    """Committed, aborted and open transactions across several segments."""
    log = Log(directory, CONFIG)
    for round_ in range(6):
        pid = 100 + round_
        log.append_as_leader(txn_batch(pid, 0, count=3))
        log.append_as_leader(plain_batch(b"plain-%d" % round_))
        log.append_as_leader(txn_batch(pid, 3, count=3))
        log.append_marker(pid, 0, commit=round_ % 2 == 0, coordinator_epoch=round_)
    log.append_as_leader(txn_batch(200, 0, count=2))  # left open
    log.update_high_watermark(log.log_end_offset)
    return log


def test_reopen_restores_lso_and_index_and_rebuilds_a_torn_txnindex(tmp_path):
    directory = str(tmp_path / "t-0")
    log = build_txn_log(directory)
    lso, aborted = log.last_stable_offset, log.aborted_transactions(0, log.log_end_offset)
    assert len(log.segments) > 2 and len(aborted) == 3 and lso < log.log_end_offset
    hw = log.high_watermark
    log.close()
    victim = next(s.txn_index.path for s in log.segments if s.txn_index.entries)
    # as in Kafka, only a segment holding an abort marker has a .txnindex
    assert sorted(n for n in os.listdir(directory) if n.endswith(".txnindex")) == sorted(
        os.path.basename(s.txn_index.path) for s in log.segments if s.txn_index.entries
    )
    reopened = Log(directory, CONFIG, high_watermark=hw)
    assert reopened.last_stable_offset == lso
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborted
    with open(victim, "ab") as handle:  # a torn entry: rebuilt, not trusted
        handle.write(b"\x00\x01")
    reopened.close()
    again = Log(directory, CONFIG, high_watermark=hw)
    assert again.aborted_transactions(0, again.log_end_offset) == aborted
    assert TransactionIndex.read_entries(victim) == [
        e for s in again.segments for e in s.txn_index.entries if s.txn_index.path == victim
    ]


def test_a_txnindex_that_a_crash_lost_is_rebuilt(tmp_path):
    """The .txnindex made by an abort that no flush covered: a crash may lose the file. The
    restart replays the log from the newest producer snapshot and writes it again."""
    directory = str(tmp_path / "t-0")
    log = build_txn_log(directory)
    log.append_marker(200, 0, commit=False, coordinator_epoch=7)
    log.update_high_watermark(log.log_end_offset)
    aborted = log.aborted_transactions(0, log.log_end_offset)
    victim = log.active_segment.txn_index.path
    assert aborted[-1].producer_id == 200 and os.path.exists(victim)
    log.close_crashlike()
    os.unlink(victim)
    reopened = Log(directory, CONFIG, recovery_point=0, had_clean_shutdown=False)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborted
    assert TransactionIndex.read_entries(victim) == reopened.active_segment.txn_index.entries
    reopened.close()


def test_recovery_cut_at_every_byte_of_the_last_batch(tmp_path):
    """An abort marker as the last batch, cut at every byte: recovery drops it and re-opens the txn."""
    template = str(tmp_path / "template" / "t-0")
    log = build_txn_log(template)
    log.append_as_leader(txn_batch(300, 0, count=2))
    before_last = log.log_end_offset
    lso_before = log.last_stable_offset
    aborted_before = log.aborted_transactions(0, before_last)
    log.append_marker(300, 0, commit=False, coordinator_epoch=9)
    log.close_crashlike()
    last_log = os.path.join(template, sorted(n for n in os.listdir(template) if n.endswith(".log"))[-1])
    with open(last_log, "rb") as handle:
        data = handle.read()
    last = list(iter_batch_headers(data))[-1]
    assert last.is_control
    for cut in range(last.size):
        work = str(tmp_path / f"work{cut}" / "t-0")
        shutil.copytree(template, work)
        with open(os.path.join(work, os.path.basename(last_log)), "r+b") as handle:
            handle.truncate(last.position + cut)
        recovered = Log(work, CONFIG, recovery_point=0, had_clean_shutdown=False, high_watermark=before_last)
        assert recovered.log_end_offset == before_last, cut
        assert recovered.last_stable_offset == lso_before, cut
        assert recovered.aborted_transactions(0, before_last) == aborted_before, cut
        assert 300 in recovered.producer_state.ongoing, cut
        recovered.close()
        shutil.rmtree(os.path.dirname(work))


def test_truncation_forgets_aborts_after_the_cut(tmp_path):
    log = build_txn_log(str(tmp_path / "t-0"))
    aborted = log.aborted_transactions(0, log.log_end_offset)
    cut = aborted[-1].last_offset  # the last abort marker goes
    log.truncate_to(cut)
    assert log.aborted_transactions(0, log.log_end_offset) == aborted[:-1]
    assert all(e.last_offset < cut for s in log.segments for e in s.txn_index.entries)
    assert aborted[-1].producer_id in log.producer_state.ongoing  # its transaction is open again


def test_compaction_removes_aborted_records_and_never_lets_them_win_a_key(tmp_path):
    log = Log(str(tmp_path / "t-0"), COMPACTED)
    log.append_as_leader(plain_batch(b"committed-1", key=b"k"))
    log.append_as_leader(txn_batch(50, 0, count=1, key=b"k", prefix=b"aborted"))
    log.append_marker(50, 0, commit=False, coordinator_epoch=0)
    log.append_as_leader(txn_batch(51, 0, count=1, key=b"j", prefix=b"committed"))
    log.append_marker(51, 0, commit=True, coordinator_epoch=0)
    log.roll()
    log.append_as_leader(txn_batch(52, 0, count=1, key=b"j", prefix=b"open"))  # holds the LSO
    log.roll()
    log.append_as_leader(plain_batch(b"filler", key=b"f"))
    log.update_high_watermark(log.log_end_offset)
    assert clean_log(log, 0).records_removed == 1  # the aborted record; it shadows nothing
    data = b"".join(s.read_batch(h) for s in log.segments for h in s.iter_batches())
    headers = list(iter_batch_headers(data))
    values = [r.value for r in iter_records(data) if r.key in (b"k", b"j")]
    assert b"aborted-0" not in values and b"committed-1" in values
    # the committed transaction's "j" is shadowed only by the open one, which is past the LSO
    assert b"committed-0" in values and b"open-0" in values  # the open txn is past the LSO: untouched
    assert sum(h.is_control for h in headers) == 2  # markers are kept
    assert log.aborted_transactions(0, log.log_end_offset) != []


def test_a_batch_without_sequences_from_an_older_epoch_is_refused(tmp_path):
    """TxnOffsetCommit writes carry no sequence, but a fenced epoch must not roll the producer back."""
    log_ = Log(str(tmp_path / "t-0"), CONFIG)
    log_.append_as_leader(txn_batch(7, 0, epoch=3))
    stale = build_batch([NewRecord(b"old", timestamp=NOW)], producer_id=7, producer_epoch=2, transactional=True)
    with pytest.raises(InvalidProducerEpochError):
        log_.append_as_leader(stale)
    assert log_.producer_state.producers[7].epoch == 3
    log_.close()
