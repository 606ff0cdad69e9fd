"""One partition replica on this broker: leader or follower, with LEO, HW, ISR and leader epoch.

The leader's high watermark is the smallest log end offset among the in-sync replicas; only
offsets below it are committed, and only they are shown to consumers. With a single replica the
HW follows the log end at once, so acks=all completes on append, through the same code path a
cluster uses.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from strom.cluster.model import PartitionState
from strom.protocol.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderError,
    UnknownLeaderEpochError,
)
from strom.storage.log import FetchData, Log, LogAppendInfo
from strom.storage.txn_index import AbortedTxn

log = logging.getLogger("strom.replication")


@dataclass
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = 0
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_end: int = 0  # the leader's log end at the follower's previous fetch
    # The follower's fetch session entry for this partition (a fetch_session.CachedPartition):
    # while it is in a live session, each request of that session fetches it, even when the
    # request does not name it and the leader does not read it (it is idle: nothing new).
    fetched: Any = None

    def session_fetch_ms(self, previous: bool = False) -> int:
        """When the follower's session last fetched this partition (its last request, or the one
        before) after the request that brought it in, or -1 outside a live session."""
        cached = self.fetched
        session = cached.session if cached is not None else None
        if session is None or session.closed:
            return -1
        at = session.previous_used_ms if previous else session.last_used_ms
        return at if at > cached.since_ms else -1


@dataclass
class ReadResult:
    data: FetchData
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted: list[AbortedTxn] | None = None  # read_committed only: aborted transactions in the range


class Partition:
    def __init__(self, topic: str, index: int, log_: Log, local_broker_id: int):
        self.topic = topic
        self.index = index
        self.log = log_
        self.local_broker_id = local_broker_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []  # as written in the state znode
        # an ISR change this leader proposed and the store has not answered yet (Kafka's
        # AlterPartition in flight): the high watermark counts both (see ``maximal_isr``)
        self.pending_isr: list[int] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.state_version = -1
        # where this leader's epoch began (its log end when it took over); None as a follower
        self.leader_epoch_start_offset: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR and a pending change together (KIP-497's maximal ISR): the high watermark
        waits for every replica of either, so a shrink frees it only once it is written and an
        expansion holds it for its new member at once."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + [b for b in pending if b not in self.isr]

    # -- role changes ------------------------------------------------------------------------------
    def make_leader(self, state: PartitionState, replicas: list[int], state_version: int = -1) -> None:
        now = int(time.monotonic() * 1000)  # follower times are monotonic (see ReplicaManager.shrink_isrs)
        became = not self.is_leader or state.leader_epoch != self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = list(replicas)
        self.isr = list(state.isr)
        self.state_version = state_version
        if became:
            self.pending_isr = None  # proposed at an older epoch: its answer is ignored
            self.followers = {b: FollowerState(last_caught_up_ms=now) for b in replicas if b != self.local_broker_id}
            # KIP-101: the new epoch starts at this leader's log end.
            self.log.leader_epoch_cache.assign(state.leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
            log.info("%s-%d: leader at epoch %d (isr %s)", self.topic, self.index, state.leader_epoch, state.isr)
        self.maybe_increment_high_watermark()

    def make_follower(self, state: PartitionState, replicas: list[int], state_version: int = -1) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = list(replicas)
        self.isr = list(state.isr)
        self.state_version = state_version
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = None

    # -- leader side -------------------------------------------------------------------------------
    @property
    def high_watermark_lagging(self) -> bool:
        """KIP-207: a new leader's high watermark is still below where its epoch began.

        A leader learns the high watermark from its followers, so right after an election it can
        be below what the old leader had acknowledged (a follower learns it one fetch late, and a
        broker killed -9 restarts with its last checkpoint). Until the followers have fetched,
        "latest" would then be an offset that went backwards; ListOffsets answers
        OFFSET_NOT_AVAILABLE instead and the client asks again.
        """
        start = self.leader_epoch_start_offset
        return start is not None and self.log.high_watermark < start

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client or follower that knows a different epoch is refused, not served stale data."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"{self.topic}-{self.index}: leader epoch {current_leader_epoch} is older than {self.leader_epoch}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{self.topic}-{self.index}: leader epoch {current_leader_epoch} is newer than {self.leader_epoch}"
            )

    def append_as_leader(
        self, records, required_acks: int, decompressed: dict[int, bytes] | None = None
    ) -> LogAppendInfo:
        """``decompressed``: records sections already decompressed, by batch position (see Log)."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.index}")
        log = self.log
        min_isr = log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.index} has {len(self.isr)} in-sync replicas, min.insync.replicas is {min_isr}"
            )
        self._record_idle_fetches()
        info = log.append_as_leader(records, self.leader_epoch, decompressed)
        isr = self.maximal_isr
        if len(isr) == 1 and isr[0] == self.local_broker_id:  # alone in sync: all appended is committed
            log.high_watermark = log.log_end_offset
        else:
            self.maybe_increment_high_watermark()
        return info

    def append_marker_as_leader(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> LogAppendInfo:
        """A transaction marker (WriteTxnMarkers); committed like any acks=all append, by the ISR."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.local_broker_id} is not the leader of {self.topic}-{self.index}")
        self._record_idle_fetches()
        info = self.log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    def _record_idle_fetches(self) -> None:
        """Before the log end moves: a follower at it was caught up at its session's last fetch.

        Kafka records every fetch of every session partition; strom records a follower's fetch
        only when it reads (``update_follower``), and counts the idle ones in between while the
        follower is still at the log end (``_caught_up_ms``). Once an append moves the log end,
        that no longer holds, so they are recorded now: otherwise a partition idle for longer
        than replica.lag.time.max.ms would lose its followers from the ISR on its next write,
        before they could fetch it (seen in the fault campaign: the first write after a 6 s
        client partition was answered NOT_ENOUGH_REPLICAS_AFTER_APPEND).
        """
        end = self.log.log_end_offset
        for follower in self.followers.values():
            if follower.fetched is not None and follower.log_end_offset >= end:
                at = follower.session_fetch_ms()
                if at > follower.last_caught_up_ms:
                    follower.last_caught_up_ms = at

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the maximal ISR; returns whether it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for broker_id in self.maximal_isr:
            if broker_id != self.local_broker_id:
                follower = self.followers.get(broker_id)
                new_hw = min(new_hw, follower.log_end_offset if follower else 0)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int, fetched: Any = None) -> bool:
        """A follower fetched from ``fetch_offset`` (its log end): track it, maybe expand the ISR.

        Kafka's caught-up rule: a follower is caught up when it has fetched up to the leader's
        log end as of its previous fetch. ``fetched`` is the partition's entry in the follower's
        fetch session (None for a fetch outside one). Returns whether the ISR must be written.
        """
        follower = self.followers.get(replica_id)
        if follower is None:
            follower = self.followers[replica_id] = FollowerState(last_caught_up_ms=now_ms)
        if fetched is not None:
            # The session's previous request fetched this partition idle (at the leader's log
            # end) without the leader recording it: record it now, as Kafka did then.
            previous = follower.session_fetch_ms(previous=True) if follower.fetched is fetched else -1
            if previous > follower.last_fetch_ms:
                follower.last_caught_up_ms = max(follower.last_caught_up_ms, previous)
                follower.last_fetch_ms = previous
                follower.last_fetch_leader_end = follower.log_end_offset
        follower.fetched = fetched
        leader_end = self.log.log_end_offset
        if fetch_offset >= leader_end:
            follower.last_caught_up_ms = now_ms
        elif fetch_offset >= follower.last_fetch_leader_end and follower.last_fetch_ms:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_ms = now_ms
        follower.last_fetch_leader_end = leader_end
        epoch_start = self._epoch_start_offset()
        return (
            replica_id not in self.isr
            and replica_id in self.replicas
            and fetch_offset >= self.log.high_watermark
            and fetch_offset >= epoch_start
        )

    def _epoch_start_offset(self) -> int:
        entries = self.log.leader_epoch_cache.entries
        return entries[-1][1] if entries and entries[-1][0] == self.leader_epoch else 0

    def _caught_up_ms(self, follower: FollowerState) -> int:
        """Kafka's last caught-up time, counting the session fetches that found the follower idle
        at the leader's log end (which the leader does not record one by one)."""
        caught_up = follower.last_caught_up_ms
        if follower.fetched is not None and follower.log_end_offset >= self.log.log_end_offset:
            caught_up = max(caught_up, follower.session_fetch_ms())
        return caught_up

    def lagging_followers(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR members that have not caught up within replica.lag.time.max.ms."""
        lagging = []
        for broker_id in self.isr:
            if broker_id == self.local_broker_id:
                continue
            follower = self.followers.get(broker_id)
            if follower is None or now_ms - self._caught_up_ms(follower) > max_lag_ms:
                lagging.append(broker_id)
        return lagging

    def caught_up_outside_isr(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """Replicas out of the ISR that a fetch found caught up (as ``update_follower`` checks)
        and that still fetch: a retry for an ISR expansion that did not get written, when the
        partition has gone idle and its fetches no longer reach ``update_follower``."""
        if len(self.isr) >= len(self.replicas):
            return []
        epoch_start = self._epoch_start_offset()
        found = []
        for broker_id in self.replicas:
            follower = self.followers.get(broker_id)
            if (
                broker_id not in self.isr
                and follower is not None
                and follower.log_end_offset >= self.log.high_watermark
                and follower.log_end_offset >= epoch_start
                and now_ms - max(follower.last_fetch_ms, follower.session_fetch_ms()) <= max_lag_ms
            ):
                found.append(broker_id)
        return found

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        for_replica: bool = False,
        min_one_message: bool = True,
        read_committed: bool = False,
    ) -> ReadResult:
        """Consumers read below the HW (read_committed: below the LSO); followers up to the log end."""
        log_ = self.log
        high_watermark = log_.high_watermark
        stable = log_.last_stable_offset
        if for_replica:
            upper = log_.log_end_offset
        else:
            upper = stable if read_committed else high_watermark
        data = log_.read(offset, max_bytes, upper, min_one_message)
        aborted = log_.aborted_transactions(offset, upper) if read_committed and data.slices else None
        return ReadResult(data, high_watermark, stable, log_.log_start_offset, log_.log_end_offset, aborted)
