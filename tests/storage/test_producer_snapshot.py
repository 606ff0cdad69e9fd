"""Producer-state snapshots: Kafka's .snapshot layout, what a reopen reads, and damaged snapshots."""

import os
import struct

import crc32c

from strom.protocol.records import NewRecord, build_batch
from strom.storage import producer_snapshot
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from strom.storage.segment import LogSegment
from tests.storage.test_transactions import NOW, txn_batch

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=128)


def idempotent_batch(producer_id: int, seq: int, count: int = 2) -> bytes:
    return build_batch(
        [NewRecord(b"x%d" % (seq + i), timestamp=NOW) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=1,
        base_sequence=seq,
    )


def build(directory: str) -> Log:
    log = Log(directory, CONFIG)
    for seq in range(0, 60, 2):
        log.append_as_leader(idempotent_batch(1, seq))
    log.append_as_leader(txn_batch(2, 0))  # open at close
    return log


def test_snapshot_file_is_kafkas_layout(tmp_path):
    directory = str(tmp_path / "t-0")
    log = build(directory)
    end = log.log_end_offset
    log.close()
    path = producer_snapshot.snapshot_path(directory, end)
    with open(path, "rb") as handle:
        data = handle.read()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2) and crc == crc32c.crc32c(data[6:])
    entries = {e[0]: e for e in (struct.unpack_from(">qhiqiqiq", data, 10 + i * 46) for i in range(count))}
    assert entries[1][1:6] == (1, 59, 59, 1, NOW)  # epoch, last seq, last offset, offset delta, timestamp
    assert entries[2][7] == 60  # the open transaction's first offset


def test_reopen_replays_only_what_follows_the_snapshot(tmp_path, monkeypatch):
    directory = str(tmp_path / "t-0")
    log = build(directory)
    assert len(log.segments) > 3
    end = log.log_end_offset
    log.close()
    scanned = []
    original = LogSegment.iter_batches

    def counting(self, *args, **kwargs):
        scanned.append(self.base_offset)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "iter_batches", counting)
    reopened = Log(directory, CONFIG, high_watermark=end)
    monkeypatch.undo()
    assert set(scanned) <= {reopened.active_segment.base_offset}  # not the older segments
    # what the snapshot carried: a retry of the last batch is recognised, the open txn holds the LSO
    retry = reopened.append_as_leader(idempotent_batch(1, 58))
    assert retry.duplicate and retry.first_offset == 58
    assert reopened.last_stable_offset == 60
    assert reopened.append_as_leader(idempotent_batch(1, 60)).first_offset == end


def test_corrupt_snapshot_falls_back_and_truncation_drops_later_snapshots(tmp_path):
    directory = str(tmp_path / "t-0")
    log = build(directory)
    end = log.log_end_offset
    log.close()
    newest = producer_snapshot.snapshot_path(directory, end)
    with open(newest, "r+b") as handle:
        handle.seek(20)
        handle.write(b"\xff")
    reopened = Log(directory, CONFIG, high_watermark=end)
    assert not os.path.exists(newest)
    assert reopened.append_as_leader(idempotent_batch(1, 58)).duplicate
    assert reopened.last_stable_offset == 60
    reopened.truncate_to(30)
    assert all(offset <= 30 for offset in producer_snapshot.snapshot_offsets(directory))
    assert reopened.append_as_leader(idempotent_batch(1, 30)).first_offset == 30
