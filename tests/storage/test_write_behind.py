"""Leader appends written once per event-loop turn: readers see them, and a failed write is reported."""

from __future__ import annotations

import asyncio
import errno
import os

from strom.protocol.records import NewRecord, build_batch
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from strom.storage.write_behind import WriteBehind


def test_appends_reach_the_file_by_the_end_of_the_turn_and_before_any_read(tmp_path):
    async def scenario():
        writes = WriteBehind()
        log = Log(str(tmp_path / "t-0"), LogConfig(), write_behind=writes)
        segment = log.active_segment
        for i in range(3):
            log.append_as_leader(build_batch([NewRecord(b"v%d" % i)]), leader_epoch=0)
        held = (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size
        log.update_high_watermark(log.log_end_offset)
        data = log.read(1, 1 << 20, log.high_watermark)  # a read writes the buffer first
        on_disk_after_read = (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size
        log.append_as_leader(build_batch([NewRecord(b"late")]), leader_epoch=0)
        await asyncio.sleep(0)  # the end of the turn
        await asyncio.sleep(0)
        final = (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size
        log.close()
        return held, on_disk_after_read, final, segment.size, data

    held, after_read, final, size, data = asyncio.run(scenario())
    assert held == 0  # three appends waiting in the buffer: no write yet
    assert after_read > 0 and final == size
    assert data.slices and data.slices[0].length > 0


def test_without_an_event_loop_appends_are_written_at_once(tmp_path):
    log = Log(str(tmp_path / "t-0"), LogConfig(), write_behind=WriteBehind())
    log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0)
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == log.active_segment.size > 0
    log.close()


def test_a_failed_deferred_write_reports_the_log_dir_and_drops_the_unwritten_appends(tmp_path):
    """The broker no longer halts: the owner of the log dirs takes the failed one offline."""
    reported = []

    async def scenario():
        writes = WriteBehind(lambda directory, exc, doing: reported.append((directory, exc.errno, doing)))
        log = Log(str(tmp_path / "t-0"), LogConfig(), write_behind=writes)
        log.append_as_leader(build_batch([NewRecord(b"v")]), leader_epoch=0)
        segment = log.active_segment
        os.close(segment._fd)  # the file can no longer be written: EBADF, as an I/O error would
        await asyncio.sleep(0)  # the end of the turn tries the write
        await asyncio.sleep(0)
        return segment

    segment = asyncio.run(scenario())
    assert reported == [(str(tmp_path / "t-0"), errno.EBADF, f"writing {segment.log_path}")]
    assert not segment._pending  # never written, never acknowledged: dropped
    segment._fd = -1
