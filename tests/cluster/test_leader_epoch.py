"""KIP-101 and its follow-ups, step by step, as the seeds tell them.

The interleavings that matter (a fetch response lost to a crash, two replicas crashing with
unflushed data, a follower missing a leader epoch) cannot be produced on demand with real
processes, so most scenarios here drive strom's own pieces directly and deterministically:
``Log`` (real segment files, reopened after a simulated crash), ``Partition`` (leader HW and
follower tracking), the leader side of OffsetForLeaderEpoch (``LeaderEpochCache.end_offset_for``,
as the handler answers it) and the follower's truncation rule
(``ReplicaFetcher._apply_truncation``). A fetch round does what the Fetch handler and the
fetcher do: the leader records the follower's fetch offset and moves its HW, the follower
appends the returned bytes and takes min(leader HW, own log end) as its HW.

One scenario also runs on real processes: a follower restarts, then the leader is lost.

Every scenario ends with byte-identical replica logs (base offset + CRC of every batch of every
.log file) and with every committed message present.
"""

from __future__ import annotations

import os
import time
import types
from pathlib import Path

from strom.cli.dump_log import scan_log
from strom.cluster.model import PartitionState
from strom.protocol.records import NewRecord, build_batch, decode_batch_records
from strom.replication.fetcher import ReplicaFetcher
from strom.replication.partition import Partition
from strom.storage.log import Log
from strom.storage.log_config import LogConfig
from tests.cluster.conftest import SESSION_TIMEOUT_MS, wait_until
from tests.cluster.workload import Workload, verify
from tests.replication.replicas import make_replicas

TOPIC = "kip101"


class Replica:
    """One broker's replica of TOPIC-0: a real Log in its own directory, crashable."""

    def __init__(self, root: Path, broker_id: int, config: LogConfig):
        self.broker_id = broker_id
        self.directory = root / f"broker-{broker_id}" / f"{TOPIC}-0"
        self.config = config
        self.alive = False
        self.durable_bytes = 0  # .log bytes known to be on disk (fsynced)
        self.checkpointed_hw = 0  # the HW as the last replication-offset-checkpoint recorded it
        self.open(high_watermark=0, clean=True)

    def open(self, high_watermark: int, clean: bool) -> None:
        self.log = Log(str(self.directory), self.config, high_watermark=high_watermark, had_clean_shutdown=clean)
        self.partition = Partition(TOPIC, 0, self.log, self.broker_id)
        self.alive = True

    def flush(self) -> None:
        self.log.flush()
        self.durable_bytes = self.segment_file().stat().st_size
        self.checkpointed_hw = self.log.high_watermark

    def segment_file(self) -> Path:
        return self.directory / f"{0:020d}.log"

    def crash(self, lose_unflushed: bool = False) -> None:
        """kill -9 (page cache survives) or a power failure (unflushed bytes are gone)."""
        self.log.close_crashlike()
        if lose_unflushed:
            os.truncate(self.segment_file(), self.durable_bytes)
        self.alive = False

    def restart(self) -> None:
        self.open(high_watermark=self.checkpointed_hw, clean=False)

    def values(self) -> list[tuple[int, bytes]]:
        """(offset, value) of every record in the .log files."""
        found = []
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(".log"):
                for header, data in scan_log(str(self.directory / name))[0]:
                    for record in decode_batch_records(data):
                        found.append((record.offset, record.value))
        return found

    def batches(self) -> list[tuple[int, int]]:
        found = []
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(".log"):
                found += [(h.base_offset, h.crc) for h, _ in scan_log(str(self.directory / name))[0]]
        return found


class Cluster:
    """The controller's part (elect, bump the epoch) and the replication protocol's steps."""

    def __init__(self, root: Path, broker_ids: list[int], min_insync_replicas: int = 1):
        config = LogConfig().with_overrides({"min.insync.replicas": str(min_insync_replicas)})
        self.ids = list(broker_ids)
        self.replicas = {b: Replica(root, b, config) for b in broker_ids}
        self.epoch = -1
        self.leader = -1
        self.isr: list[int] = []

    def __getitem__(self, broker_id: int) -> Replica:
        return self.replicas[broker_id]

    def elect(self, leader: int, isr: list[int]) -> None:
        """A new leader epoch: the leader starts it at its log end; live followers truncate first."""
        self.epoch += 1
        self.leader, self.isr = leader, list(isr)
        state = PartitionState(leader, self.epoch, self.isr)
        self[leader].partition.make_leader(state, self.ids)
        for follower in self.ids:
            if follower != leader and self[follower].alive:
                self.become_follower(follower)

    def become_follower(self, follower: int) -> None:
        state = PartitionState(self.leader, self.epoch, self.isr)
        self[follower].partition.make_follower(state, self.ids)
        self.truncate(follower)

    def truncate(self, follower: int) -> None:
        """The fetcher's first step with a (new) leader: OffsetForLeaderEpoch, then truncate."""
        leader_log = self[self.leader].log
        follower_log = self[follower].log
        epoch, end = leader_log.leader_epoch_cache.end_offset_for(
            follower_log.leader_epoch_cache.latest_epoch, leader_log.log_end_offset
        )
        ReplicaFetcher._apply_truncation(self[follower].partition, epoch, end)

    def produce(self, value: bytes, acks: int = -1) -> int:
        info = self[self.leader].partition.append_as_leader(build_batch([NewRecord(value)]), acks)
        return info.first_offset

    def fetch(self, follower: int, deliver: bool = True) -> None:
        """One fetch round; with deliver=False the follower crashes before reading the response."""
        leader = self[self.leader].partition
        mine = self[follower].log
        leader.update_follower(follower, mine.log_end_offset, int(time.time() * 1000))
        leader.maybe_increment_high_watermark()
        read = leader.read(mine.log_end_offset, 1 << 20, for_replica=True)
        if not deliver:
            return
        data = b"".join(s.read() for s in read.data.slices)
        if data:
            mine.append_as_follower(data)
        mine.update_high_watermark(min(read.high_watermark, mine.log_end_offset))

    def committed(self) -> int:
        return self[self.leader].log.high_watermark

    def assert_identical(self, *broker_ids: int) -> list[tuple[int, bytes]]:
        ids = broker_ids or self.ids
        first = self[ids[0]]
        for other in ids[1:]:
            assert self[other].batches() == first.batches(), f"replicas {ids[0]} and {other} diverge"
            assert self[other].values() == first.values()
            assert self[other].log.leader_epoch_cache.entries == first.log.leader_epoch_cache.entries
        return first.values()


def test_a_follower_restart_then_leader_loss_keeps_committed_m2(tmp_path):
    """Seeds, "数据丢失": B leads, A follows, min.insync.replicas=1.

    A fetched m2 and then fetched again (LEO 2), which moved B's HW to 2 and answered the
    producer; A crashed before it read that response, so A's HW is 1. Truncating to the HW on
    restart would drop m2, and losing B next would lose it for good. With KIP-101 A asks B where
    epoch 0 ends (2) and keeps m2.
    """
    A, B = 0, 1
    c = Cluster(tmp_path, [B, A])
    c.elect(B, [B, A])
    c.produce(b"m1")
    c.fetch(A)  # A: m1
    c.fetch(A)  # B's HW 1; nothing new
    c.produce(b"m2")
    c.fetch(A)  # A: m2, HW 1
    c.fetch(A, deliver=False)  # B's HW 2: m2 is committed and acknowledged; A never hears it
    assert c.committed() == 2
    assert c[A].log.log_end_offset == 2 and c[A].log.high_watermark == 1
    c[A].checkpointed_hw = c[A].log.high_watermark

    c[A].crash()
    c[A].restart()
    assert c[A].log.high_watermark == 1  # the HW alone would say: truncate m2
    c.become_follower(A)
    assert c[A].log.log_end_offset == 2, "A truncated committed m2"

    c[B].crash()
    c.elect(A, [A])  # A was in the ISR: a clean election
    assert [v for _, v in c[A].values()] == [b"m1", b"m2"]
    c.produce(b"m3")
    assert c.committed() == 3

    c[B].restart()
    c.become_follower(B)
    c.fetch(B)
    c.fetch(B)
    values = c.assert_identical()
    assert values == [(0, b"m1"), (1, b"m2"), (2, b"m3")]
    assert c[A].log.leader_epoch_cache.entries == [(0, 0), (1, 2)]


def test_b_divergence_after_both_crash_with_unflushed_data(tmp_path):
    """Seeds, "数据错乱": A leads, B follows, both in the ISR, min.insync.replicas=1.

    A wrote m2 and flushed it; B fetched m2 into its page cache only. Both crash: B loses m2
    (losing data when every replica crashes is accepted). B returns first, is elected and takes
    m3 at offset 1. A returns with its HW at 2: by the HW it would keep m2 at offset 1 where B
    has m3, and the logs would silently differ. With KIP-101 A learns that epoch 0 ends at 1 on
    B, truncates m2 and copies m3.
    """
    A, B = 0, 1
    c = Cluster(tmp_path, [A, B])
    c.elect(A, [A, B])
    c.produce(b"m1")
    c.fetch(B)
    c.fetch(B)
    c[A].flush()
    c[B].flush()
    c.produce(b"m2")
    c[A].flush()
    c.fetch(B)  # B: m2 in the page cache
    c.fetch(B, deliver=False)  # A's HW 2
    c[A].checkpointed_hw = 2
    assert c.committed() == 2

    c[A].crash()
    c[B].crash(lose_unflushed=True)
    c[B].restart()
    assert [v for _, v in c[B].values()] == [b"m1"]
    c.elect(B, [B])
    assert c.produce(b"m3") == 1
    assert c.committed() == 2

    c[A].restart()
    assert c[A].values() == [(0, b"m1"), (1, b"m2")] and c[A].log.high_watermark == 2
    assert c[A].values()[1] != c[B].values()[1]  # offset 1 differs: what the HW rule would keep
    c.become_follower(A)
    assert c[A].log.log_end_offset == 1, "A did not truncate its divergent m2"
    c.fetch(A)
    c.fetch(A)
    assert c.assert_identical() == [(0, b"m1"), (1, b"m3")]
    assert c.committed() == 2  # m1 and m3, committed on the ISR that survived, are both there


def test_three_replica_fast_failover_with_a_missed_epoch(tmp_path):
    """KAFKA-6361 / KAFKA-7164: leadership moves twice while one follower is not looking.

    Replicas 1, 2, 3. Epoch 0: 1 leads; 3 fetches an uncommitted m1 that 2 never got. 1 fails;
    2 is elected (epoch 1) and writes m2 at offset 1; 3 misses epoch 1 altogether. 1 returns
    and follows 2, and the controller bumps the epoch again (epoch 2, leader still 2). Only now
    does 3 hear anything. Its latest epoch is 0, which on the leader ended at offset 1 (epoch 1
    starts there), so 3 must drop m1 before it fetches m2, although its own log end is 2.
    """
    c = Cluster(tmp_path, [1, 2, 3])
    c.elect(1, [1, 2, 3])
    c.produce(b"m0")
    for f in (2, 3):
        c.fetch(f)
        c.fetch(f)
    assert c.committed() == 1
    c.produce(b"m1")
    c.fetch(3)  # only 3 has m1; it stays uncommitted (2 has not fetched it)
    assert c.committed() == 1

    c[1].crash()
    # 2 is elected; 3 misses the change (it is still "following 1" at epoch 0)
    c.epoch += 1
    c.leader, c.isr = 2, [2, 3]
    c[2].partition.make_leader(PartitionState(2, c.epoch, c.isr), c.ids)
    c.produce(b"m2")  # offset 1, epoch 1

    # 1 returns and follows 2; then epoch 2 (same leader), the first change 3 hears of
    c[1].restart()
    c.become_follower(1)
    c.fetch(1)
    c.fetch(1)
    c.elect(2, [2, 1, 3])  # elect() makes 3 a follower: the truncation must happen here
    assert [v for _, v in c[3].values()] == [b"m0"], "3 kept m1, which the leader never had"
    c.fetch(3)
    c.fetch(3)
    c.produce(b"m3")
    for f in (1, 3):
        c.fetch(f)
        c.fetch(f)
    assert c.committed() == 3
    assert c.assert_identical() == [(0, b"m0"), (1, b"m2"), (2, b"m3")]


def test_a_same_leader_epoch_bump_restarts_truncation(tmp_path):
    """KAFKA-7164's fix, in the replica manager: a new epoch with the same leader is not skipped.

    The follower may have missed the epochs in between, so it must go through truncation again.
    """
    followed: list[tuple[str, int]] = []
    manager = make_replicas(tmp_path, broker_id=3).manager
    manager.fetchers = types.SimpleNamespace(follow=lambda p: followed.append(p.key), unfollow=lambda key: None)
    log = Log(str(tmp_path / f"{TOPIC}-0"), LogConfig())
    partition = Partition(TOPIC, 0, log, 3)
    manager._apply_state(partition, PartitionState(2, 1, [2, 3]), [2, 3], 0)
    assert followed == [(TOPIC, 0)]
    manager._apply_state(partition, PartitionState(2, 1, [2, 3]), [2, 3], 1)  # an ISR-only change
    assert followed == [(TOPIC, 0)]
    manager._apply_state(partition, PartitionState(2, 3, [2, 3]), [2, 3], 2)  # epoch 2 was missed
    assert followed == [(TOPIC, 0), (TOPIC, 0)]


def test_real_processes_follower_restart_then_leader_loss(cluster):
    """Scenario (a) on real processes: kill -9 a follower, restart it at once (its HW checkpoint
    is stale), let it rejoin, then kill -9 the leader. The follower must not have truncated
    anything on restart, and after it takes over every acknowledged message is there."""
    from confluent_kafka.admin import AdminClient, NewTopic

    leader, follower = 0, 1
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(
                "kip101-real",
                num_partitions=1,
                replica_assignment=[[leader, follower]],
                config={"min.insync.replicas": "1"},
            )
        ],
        operation_timeout=10,
    )
    for future in futures.values():
        future.result(timeout=20)
    cluster.wait_full_isr("kip101-real", 20)
    workload = Workload(cluster.bootstrap, "kip101-real", 1).start()
    try:
        workload.wait_progress([0], 50, 20)
        cluster.kill(follower)
        before = cluster.log_end(follower, "kip101-real", 0)
        log_size = cluster.brokers[follower].log_path.stat().st_size
        cluster.restart(follower)  # waits for the old registration to expire, then rejoins
        cluster.wait_full_isr("kip101-real", 30)
        assert cluster.log_end(follower, "kip101-real", 0) >= before
        restarted_log = cluster.brokers[follower].log_path.read_text(errors="replace")[log_size:]
        assert "truncating" not in restarted_log, restarted_log
        workload.wait_progress([0], 20, 20)

        cluster.kill(leader)
        wait_until(
            lambda: cluster.leader("kip101-real", 0) == follower,
            SESSION_TIMEOUT_MS / 1000 + 10,
            f"broker {follower} taking over",
        )
        workload.wait_progress([0], 20, 20)
        cluster.restart(leader)
        cluster.wait_full_isr("kip101-real", 30)
        workload.stop()
        verify(cluster.bootstrap, workload)
        cluster.wait_logs_equal("kip101-real", 20)
    except BaseException:
        print(cluster.logs())
        raise
