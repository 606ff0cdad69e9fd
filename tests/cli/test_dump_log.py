import os
import subprocess
import sys

from strom.protocol.records import NewRecord, build_batch
from strom.storage.log import Log
from strom.storage.log_config import LogConfig


def make_log(tmp_path):
    log = Log(str(tmp_path / "orders-0"), LogConfig(index_interval_bytes=1))
    log.append_as_leader(
        build_batch(
            [
                NewRecord(b"hello", key=b"k1", headers=[("h", b"x")], timestamp=1000),
                NewRecord(None, key=b"k2", timestamp=1001),
            ]
        ),
        leader_epoch=3,
    )
    log.append_as_leader(
        build_batch(
            [NewRecord(b"gz" * 50, timestamp=2000)], compression=1, producer_id=7, producer_epoch=0, base_sequence=0
        ),
        leader_epoch=3,
    )
    log.append_as_leader(build_batch([NewRecord(b"third", timestamp=3000)]), leader_epoch=3)
    log.close()
    return str(tmp_path / "orders-0")


def strom(*args):
    return subprocess.run([sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=60)


def test_dump_log_prints_batches_and_records(tmp_path):
    directory = make_log(tmp_path)
    result = strom("dump-log", "--print-data-log", os.path.join(directory, "00000000000000000000.log"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == "Log starting offset: 0"
    batch_lines = [line for line in lines if line.startswith("baseOffset")]
    assert len(batch_lines) == 3
    assert batch_lines[0].startswith("baseOffset: 0 lastOffset: 1 count: 2 ")
    assert "partitionLeaderEpoch: 3" in batch_lines[0] and "isvalid: true" in batch_lines[0]
    assert "compresscodec: gzip" in batch_lines[1] and "producerId: 7" in batch_lines[1]
    assert "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 5 headerKeys: [h] key: k1 payload: hello" in lines
    assert any(line.startswith("| offset: 1 ") and "valueSize: -1" in line for line in lines)
    assert any(line.startswith("| offset: 2 ") and "payload: " + "gz" * 50 in line for line in lines)


def test_dump_log_flags_a_bad_crc_and_index_mismatch(tmp_path):
    directory = make_log(tmp_path)
    log_path = os.path.join(directory, "00000000000000000000.log")
    with open(log_path, "r+b") as handle:
        data = bytearray(handle.read())
        data[70] ^= 0xFF
        handle.seek(0)
        handle.write(data)
    result = strom("dump-log", log_path)
    assert "isvalid: false" in result.stdout.splitlines()[2]
    index = os.path.join(directory, "00000000000000000000.index")
    good = strom("dump-log", index)
    assert good.returncode == 0 and "MISMATCH" not in good.stdout and "offset: 2 position:" in good.stdout
    with open(index, "r+b") as handle:
        handle.write(b"\x00\x00\x00\x02\x00\x00\x00\x05")
    bad = strom("dump-log", index)
    assert bad.returncode == 2 and "MISMATCH" in bad.stdout
    time_index = strom("dump-log", os.path.join(directory, "00000000000000000000.timeindex"))
    assert "timestamp: 3000 offset: 3" in time_index.stdout and "MISMATCH" not in time_index.stdout


def test_dump_log_missing_file(tmp_path):
    result = strom("dump-log", str(tmp_path / "nope.log"))
    assert result.returncode == 1 and "no such file" in result.stderr


def test_dump_log_shows_markers_and_the_txnindex(tmp_path):
    log = Log(str(tmp_path / "pay-0"), LogConfig())
    txn = build_batch([NewRecord(b"doomed")], producer_id=11, producer_epoch=2, base_sequence=0, transactional=True)
    log.append_as_leader(txn, leader_epoch=0)
    log.append_marker(11, 2, commit=False, coordinator_epoch=5)
    log.close()
    directory = str(tmp_path / "pay-0")
    result = strom(
        "dump-log",
        "--print-data-log",
        os.path.join(directory, "00000000000000000000.log"),
        os.path.join(directory, "00000000000000000000.txnindex"),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("isTransactional: true isControl: true" in line and "producerId: 11" in line for line in lines)
    assert any(line.startswith("| offset: 1 ") and "endTxnMarker: ABORT coordinatorEpoch: 5" in line for line in lines)
    assert "version: 0 producerId: 11 firstOffset: 0 lastOffset: 1 lastStableOffset: 2" in lines
