"""A partition idle for longer than replica.lag.time.max.ms keeps its followers in sync on its next write.

Found by the fault campaign (``python -m strom.chaos --seed 401 --minutes 3``): clients were cut
off from a leader for 6 s, so one partition got no writes while its followers went on fetching
it idle through their fetch sessions. The first write after the cut was appended, and the
periodic ISR check ran before the followers' next fetch: the leader, which counts idle session
fetches only while a follower is at its log end, saw both followers 6 s behind, shrank the ISR
to itself, and answered the acks=all producer NOT_ENOUGH_REPLICAS_AFTER_APPEND. Kafka records
every session fetch, so its followers were caught up 0.1 s before the write and stay in the ISR.

The interleaving (the ISR check between an append and the followers' next fetch) cannot be
produced on demand with real processes, so this drives strom's own pieces: a real ``Log``, the
leader's ``Partition`` and real fetch sessions, with the times each step happens at.
"""

from __future__ import annotations

import time
import types

from strom.cluster.model import PartitionState
from strom.protocol.records import NewRecord, build_batch
from strom.replication.fetch_session import CachedPartition, FetchSession
from strom.replication.partition import Partition
from strom.storage.log import Log
from strom.storage.log_config import LogConfig

MAX_LAG_MS = 3000


def _leader(tmp_path) -> Partition:
    log = Log(str(tmp_path / "idle-0"), LogConfig().with_overrides({"min.insync.replicas": "2"}))
    partition = Partition("idle", 0, log, 1)
    partition.make_leader(PartitionState(1, 0, [1, 2, 3]), [1, 2, 3])
    return partition


def _session(partition: Partition, follower: int, session_id: int, now_ms: int) -> FetchSession:
    """A follower's fetch session holding the partition, its first request read at ``now_ms``."""
    wanted = types.SimpleNamespace(partition=0, fetch_offset=partition.log.log_end_offset, partition_max_bytes=1 << 20)
    cached = CachedPartition("idle", None, wanted)
    session = FetchSession(session_id, True, False, {("idle", 0): cached}, now_ms)
    partition.update_follower(follower, partition.log.log_end_offset, now_ms, cached)
    return session


def _idle_fetch(session: FetchSession, now_ms: int) -> None:
    """A session request that finds the partition idle: the leader does not read it (as FetchSessionCache.touch)."""
    session.previous_used_ms, session.last_used_ms = session.last_used_ms, now_ms


def test_the_first_write_after_an_idle_spell_does_not_drop_followers_that_kept_fetching(tmp_path):
    partition = _leader(tmp_path)
    start = int(time.monotonic() * 1000)
    partition.append_as_leader(build_batch([NewRecord(b"before")]), -1)
    sessions = {b: _session(partition, b, 100 + b, start) for b in (2, 3)}
    assert partition.lagging_followers(start, MAX_LAG_MS) == []

    # 6 s without writes; the followers long-poll every 500 ms and find nothing new
    for t in range(start + 500, start + 6001, 500):
        for session in sessions.values():
            _idle_fetch(session, t)
    assert partition.lagging_followers(start + 6050, MAX_LAG_MS) == []

    # a write at 6.1 s; the ISR check at 6.15 s comes before the followers' next fetch
    info = partition.append_as_leader(build_batch([NewRecord(b"after")]), -1)
    assert partition.lagging_followers(start + 6150, MAX_LAG_MS) == []
    assert partition.log.high_watermark == info.first_offset  # not committed until they fetch it

    # both fetch it: committed by all three
    for b in (2, 3):
        partition.update_follower(b, partition.log.log_end_offset, start + 6200, sessions[b].partitions[("idle", 0)])
    partition.maybe_increment_high_watermark()
    assert partition.log.high_watermark == info.last_offset + 1


def test_a_follower_that_stopped_fetching_still_leaves_the_isr(tmp_path):
    partition = _leader(tmp_path)
    start = int(time.monotonic() * 1000)
    sessions = {b: _session(partition, b, 200 + b, start) for b in (2, 3)}
    for t in range(start + 500, start + 6001, 500):
        _idle_fetch(sessions[2], t)  # broker 3 fetches nothing after its first request

    assert partition.lagging_followers(start + 6050, MAX_LAG_MS) == [3]
    partition.append_as_leader(build_batch([NewRecord(b"after")]), 1)
    assert partition.lagging_followers(start + 6150, MAX_LAG_MS) == [3]
