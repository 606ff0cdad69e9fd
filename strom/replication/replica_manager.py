"""The broker's partitions: creating them from metadata, appending, reading and waiting.

Leadership comes from the partition state in the metadata cache: where this broker is the
leader it serves Produce and Fetch, elsewhere it answers NOT_LEADER_OR_FOLLOWER. Waiting
(acks=all, long-poll Fetch) goes through the purgatory, woken by appends and HW moves.

A replica whose log dir failed is offline (Kafka's HostedPartition.Offline): it answers
KAFKA_STORAGE_ERROR, neither leads nor follows, and the broker's registration lists it so that
the controller elects another leader and drops this broker from its ISR. A restart brings it
back (the registration it makes then lists nothing offline).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from strom.cluster import model
from strom.cluster.metadata_cache import MetadataCache, TopicInfo
from strom.cluster.model import PartitionState
from strom.cluster.store import MetadataStore, StoreError
from strom.loop_handoff import handoff_loop, on_loop_when_done
from strom.protocol.errors import (
    KafkaStorageError,
    NotLeaderError,
    RequestTimedOutError,
    ResourceExhaustedError,
    UnknownTopicOrPartitionError,
)
from strom.replication.fetcher import FetcherConfig, FetcherContext, ReplicaFetcherManager, ReplicationBytesIn
from strom.replication.partition import Partition
from strom.replication.purgatory import Purgatory
from strom.replication.throttle import ReplicationQuotas
from strom.storage.checkpoint import DeferredBatch, DeferredSyncError, deferred_syncs
from strom.storage.log import LogAppendInfo
from strom.storage.log_config import LogConfig
from strom.storage.log_manager import LogManager

if TYPE_CHECKING:
    from strom.security.client import ClientSecurity

log = logging.getLogger("strom.replication")

# Creating a replica's log costs about a millisecond (a directory, files, preallocated indexes);
# a topic of 10,000 partitions would hold the event loop for tens of seconds, and the broker would
# answer nobody meanwhile, not even the CreateTopics that made them. A metadata pass creates at
# most this many and leaves the rest to a next pass, after the loop has served what is waiting.
NEW_REPLICAS_PER_PASS = 250
# A pass that writes this many leader-epoch checkpoints or more has them written on the checkpoint
# thread (a few ms each on a busy disk); fewer are written before the pass returns, which costs
# less than a round trip through the thread for a single change of leadership.
BACKGROUND_CHECKPOINTS_FROM = 32


class ReplicaManagerConfig(FetcherConfig, Protocol):
    """The broker configs that the replica manager and its fetchers follow (``BrokerConfig`` has them all)."""

    @property
    def replica_lag_time_max_ms(self) -> int: ...


class TopicCounters(Protocol):
    """A topic's produce counters (``strom.metrics.stats.TopicStats``)."""

    produce_requests: int
    failed_produce: int
    messages_in: int
    bytes_in: int


class ReplicaCounters(ReplicationBytesIn, Protocol):
    """The counters that appends and ISR changes bump (``strom.metrics.stats.BrokerStats``)."""

    isr_shrinks: int
    isr_expands: int

    def topic(self, name: str) -> TopicCounters: ...


class ReplicaManager:
    """This broker's replicas. ``store`` takes the leaders' ISR changes; ``controller_epoch`` reads
    the current controller's epoch that they carry; ``request_metadata_reload`` asks for a re-read of
    a state znode whose write lost a race; ``publish_offline_replicas`` re-registers the broker
    with its offline replicas listed (``Broker`` passes its own methods)."""

    def __init__(
        self,
        broker_id: int,
        config: ReplicaManagerConfig,
        log_manager: LogManager,
        metadata: MetadataCache,
        store: MetadataStore,
        stats: ReplicaCounters,
        *,
        controller_epoch: Callable[[], int],
        request_metadata_reload: Callable[[str], None],
        publish_offline_replicas: Callable[[], None],
        inter_broker_security: ClientSecurity | None = None,
        schema_check: Callable[[str, LogConfig, bytes], dict[int, bytes]] | None = None,
    ):
        self.broker_id = broker_id
        # topics with confluent.value/key.schema.validation: raises RecordValidationError for a batch
        # whose records lack registered schema ids (strom.schemas.validation, composed by the broker);
        # returns the compressed batches' records decompressed, which the log's checks then reuse
        self._schema_check = schema_check
        self.config = config
        self.log_manager = log_manager
        self.metadata = metadata
        self.store = store
        self.stats = stats
        self._controller_epoch = controller_epoch
        self._request_metadata_reload = request_metadata_reload
        self._publish_offline_replicas = publish_offline_replicas
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.purgatory = Purgatory()
        self.quotas = ReplicationQuotas(self.broker_id)  # replication throttles (a reassignment's)
        self.fetchers = ReplicaFetcherManager(
            FetcherContext(
                broker_id, config, metadata, log_manager, self.quotas, self.purgatory, stats, inter_broker_security
            )
        )
        # called with (partition, is_leader) whenever this broker gains or loses a leadership
        self.leadership_listeners: list[Callable[[Partition, bool], None]] = []
        self._known_topics: set[str] | None = None
        # Set while this broker cannot confirm its ZooKeeper session: it then leads nothing, as a
        # KRaft broker fenced by its controller, so clients move to the leader elected meanwhile.
        self._fenced = False
        # monotonic time and process CPU time of the broker's last ZooKeeper session check (None:
        # no ZooKeeper), and how long without one means the process may have been stopped
        self.session_checked_at: float | None = None
        self.session_checked_cpu = 0.0
        self.stall_fence_s = float("inf")
        self.offline: set[tuple[str, int]] = set()  # replicas in a failed log dir
        self._next_pass_scheduled = False
        self._unmade: set[tuple[str, int]] = set()  # replicas whose log a pass left for the next one
        self._refused: set[tuple[str, int]] = set()  # replicas whose log could not be made: tried on the next change
        # leaders whose new epoch's checkpoint is not yet on disk -> set once it is; appends wait for it
        self.epochs_pending: dict[tuple[str, int], asyncio.Event] = {}
        self._new_epochs: list[Partition] = []  # leaders at a new epoch in the running pass
        self._isr_writer: ThreadPoolExecutor | None = None  # made on the first ISR change (see _write_isr)
        self.log_manager.failure_listeners.append(self._on_log_dir_failure)

    @property
    def fenced(self) -> bool:
        """Whether this broker leads nothing now (see ``_fenced``).

        Also while its session check has not run for ``stall_fence_s`` and the process has used
        less than half that time in CPU: a process stopped (SIGSTOP, a frozen VM, starved) past its
        session timeout wakes up believing it still leads, and asyncio serves the requests that
        queued meanwhile before the check's timer. Until the check has run and ZooKeeper has
        confirmed the session, those requests get NOT_LEADER_OR_FOLLOWER and NOT_COORDINATOR
        instead of answers from a cache another broker has moved past. A loop that was only busy
        (a metadata pass over 10,000 partitions) kept running, and kazoo's heartbeats with it.
        """
        if self._fenced:
            return True
        checked = self.session_checked_at
        if checked is None:
            return False
        silent_for = time.monotonic() - checked
        return silent_for > self.stall_fence_s and time.process_time() - self.session_checked_cpu < silent_for / 2

    @fenced.setter
    def fenced(self, value: bool) -> None:
        self._fenced = value

    def apply_metadata(self, changed: Iterable[tuple[str, int]] | None = None) -> None:
        """Bring local replicas in line with the metadata: create, lead, follow or delete.

        ``changed`` names the partitions whose metadata changed (a ``MetadataDelta``'s); the pass
        then looks at those, and at replicas whose log a previous pass left to make. Without it
        the pass looks at every partition (at startup, after a full read of the store, and when
        topics are deleted, whose stray logs only a full pass finds). A 10,000-partition topic
        whose logs are made 250 at a time would otherwise walk all 10,000 partitions 40 times.

        The leader-epoch checkpoints that the pass writes are made durable together after it
        (checkpoint.deferred_syncs), many of them on the checkpoint thread: a broker
        taking over thousands of leaderships would otherwise spend two fsyncs on each, or hold
        the loop for seconds of renames. Until its checkpoint is on disk a partition that took a
        new leader epoch accepts no append (NOT_LEADER_OR_FOLLOWER, which producers retry), so no
        record of the new epoch can reach the disk, and be counted as recovered, before the
        epoch's start does (as Kafka's makeLeader, which appends nothing before the fsync).
        Fetches, which only read what earlier epochs wrote, are served meanwhile.
        """
        loop = _running_loop()
        batch = None
        try:
            with deferred_syncs(BACKGROUND_CHECKPOINTS_FROM if loop is not None else None) as batch:
                self._apply_metadata(changed)
        except DeferredSyncError as exc:  # the syncs or renames at the end: a disk under a log dir failed
            if not self._deferred_sync_failed(exc):
                raise
        finally:
            new_epochs, self._new_epochs = self._new_epochs, []
            if loop is not None and batch is not None and batch.future is not None:
                self._hold_until_durable(loop, batch, new_epochs)

    def _hold_until_durable(
        self, loop: asyncio.AbstractEventLoop, batch: DeferredBatch, leaders: list[Partition]
    ) -> None:
        durable = asyncio.Event()
        held = []
        for partition in leaders:
            if partition.log.leader_epoch_cache.path in batch.texts:
                self.epochs_pending[partition.key] = durable
                held.append(partition.key)
        started = time.monotonic()

        def done(_future: object) -> None:  # on the checkpoint thread
            with contextlib.suppress(RuntimeError):  # the loop closed: the broker is gone
                loop.call_soon_threadsafe(self._batch_durable, batch, durable, held, started)

        assert batch.future is not None
        batch.future.add_done_callback(done)

    def _batch_durable(
        self, batch: DeferredBatch, durable: asyncio.Event, held: list[tuple[str, int]], started: float
    ) -> None:
        for key in held:
            if self.epochs_pending.get(key) is durable:  # a later pass may have taken the key over
                del self.epochs_pending[key]
        durable.set()
        assert batch.future is not None
        exc = batch.future.exception()
        if isinstance(exc, DeferredSyncError):
            if not self._deferred_sync_failed(exc):
                log.error("making %d checkpoints durable failed: %s", len(batch.texts), exc)
        elif exc is not None:
            log.error("making %d checkpoints durable failed: %r", len(batch.texts), exc)
        else:  # only large batches come here: worth a line
            log.info(
                "%d checkpoints durable after %.2fs; %d new leader epochs take appends now",
                len(batch.texts),
                time.monotonic() - started,
                len(held),
            )

    async def until_epochs_durable(self, keys: Iterable[tuple[str, int]], timeout_s: float) -> None:
        """Wait until the new leader epochs of ``keys`` are on disk, as Kafka's makeLeader makes
        its appends wait; NOT_LEADER_OR_FOLLOWER (retriable) if that takes over ``timeout_s``.

        Callers that append as leader await this first: an append at an epoch that a crash could
        forget would be counted as recovered at the wrong epoch. Refusing them instead, as a
        first version did, made the group coordinator answer NOT_COORDINATOR to the commits that
        followed the creation of __consumer_offsets (50 new leaders written on the thread).
        """
        deadline = time.monotonic() + timeout_s
        for key in keys:
            while (durable := self.epochs_pending.get(key)) is not None:
                left = deadline - time.monotonic()
                try:
                    await asyncio.wait_for(durable.wait(), max(left, 0.0))
                except TimeoutError:
                    raise NotLeaderError(
                        f"broker {self.broker_id} is still making the new leader epoch of {key[0]}-{key[1]} durable"
                    ) from None

    def _deferred_sync_failed(self, exc: DeferredSyncError) -> bool:
        """The log dir under a checkpoint that could not be made durable goes offline; False if none is."""
        failed = exc.filename if isinstance(exc.filename, str) else ""
        log_dir = next((d for d in self.log_manager.log_dirs if failed.startswith(d)), None)
        if log_dir is None:
            return False
        self.log_manager.fail_dir(log_dir, exc, "making leader-epoch checkpoints durable")
        return True

    def _check_epoch_durable(self, topic: str, index: int) -> None:
        """The last guard for a caller that did not await ``until_epochs_durable``."""
        if (topic, index) in self.epochs_pending:
            raise NotLeaderError(
                f"broker {self.broker_id} is still making the new leader epoch of {topic}-{index} durable"
            )

    def _apply_metadata(self, changed: Iterable[tuple[str, int]] | None) -> None:
        self.quotas.update(self.metadata)
        topics = self.metadata.topics
        if changed is None:
            keys: Iterable[tuple[str, int]] = [
                (name, index)
                for name, topic in topics.items()
                for index, replicas in topic.replicas.items()
                if self.broker_id in replicas
            ]
        else:
            keys = set(changed) | self._unmade | self._refused
        self._unmade, self._refused = set(), set()
        budget = [NEW_REPLICAS_PER_PASS]
        configs: dict[str, LogConfig] = {}
        for key in keys:
            topic = topics.get(key[0])
            replicas = topic.replicas.get(key[1]) if topic is not None else None
            if topic is None or replicas is None or self.broker_id not in replicas:
                # the topic is gone, or a reassignment moved this replica away (Kafka's StopReplica with
                # delete): either way its log goes (a failed dir keeps its files until it is back)
                self.offline.discard(key)
                if key in self.partitions:
                    self._remove_replica(key, delete=True)
                continue
            config = configs.get(key[0])
            if config is None:
                config = configs[key[0]] = self.log_manager.config_for(key[0])
            self._apply_partition(key, topic, replicas, config, budget)
        if changed is None:
            wanted = set(keys)
            self.offline.intersection_update(wanted)
            for key in [k for k in self.partitions if k not in wanted]:
                self._remove_replica(key, delete=True)
            # Logs of topics deleted while we watched go too; strays found at startup are kept
            # (deleting data on a possibly incomplete view would be worse than keeping it).
            if self._known_topics is not None:
                for key in [k for k in list(self.log_manager.logs) if k not in wanted]:
                    if key[0] in self._known_topics and key[0] not in topics:
                        self.log_manager.delete_log(key)
            self._known_topics = set(topics)
        elif self._known_topics is not None:
            self._known_topics.update(topics)  # those deleted later are in it when the full pass runs
        if self._unmade and not self._next_pass_scheduled:
            self._next_pass_scheduled = True
            self._schedule(self._next_pass)

    def _apply_partition(
        self, key: tuple[str, int], topic: TopicInfo, replicas: list[int], config: LogConfig, budget: list[int]
    ) -> None:
        """One replica this broker holds: make its log (``budget`` new logs per pass), set its role."""
        if key in self.offline:
            return
        partition = self.partitions.get(key)
        if partition is None:
            if key not in self.log_manager.logs:  # a log loaded at startup costs nothing here
                if budget[0] <= 0:
                    self._unmade.add(key)
                    return
                budget[0] -= 1
            try:
                log_ = self.log_manager.get_or_create_log(key, config)
            except ResourceExhaustedError:
                self._refused.add(key)  # logged, naming the resource; the next metadata pass tries again
                return
            except KafkaStorageError as exc:
                log.warning("replica %s-%d is offline: %s", key[0], key[1], exc)
                self.offline.add(key)
                self._schedule(self._publish_offline_replicas)
                return
            partition = self.partitions[key] = Partition(key[0], key[1], log_, self.broker_id)
        partition.log.config = config
        state = topic.states.get(key[1])
        if state is not None:
            try:
                self._apply_state(partition, state, replicas, topic.state_versions.get(key[1], -1))
            except OSError as exc:  # an epoch checkpoint, a truncation, a coordinator's load
                self.log_manager.storage_error(key, exc, "changing the role of")
            except KafkaStorageError:
                pass  # reported by the segment: the replica is offline now

    def _next_pass(self) -> None:
        self._next_pass_scheduled = False
        self.apply_metadata(set())

    def _apply_state(self, partition: Partition, state, replicas: list[int], version: int) -> None:
        was_leader = partition.is_leader
        changed = state.leader != partition.leader_id or state.leader_epoch != partition.leader_epoch
        if state.leader == self.broker_id:
            if not was_leader:
                self.fetchers.unfollow(partition.key)
            partition.make_leader(state, replicas, version)
        else:
            partition.make_follower(state, replicas, version)
            if changed or was_leader:
                if state.leader >= 0:
                    self.fetchers.follow(partition)
                else:
                    self.fetchers.unfollow(partition.key)
        if partition.is_leader and (not was_leader or changed):
            self._new_epochs.append(partition)  # its epoch checkpoint is in this pass's batch
        if partition.is_leader != was_leader:
            for listener in self.leadership_listeners:
                listener(partition, partition.is_leader)
        if changed:
            self.purgatory.notify(partition.key)  # waiting fetches and produces re-check leadership

    def _remove_replica(self, key: tuple[str, int], delete: bool) -> None:
        log.info("removing replica %s-%d", *key)
        removed = self.partitions.pop(key)
        self.offline.discard(key)
        self.fetchers.unfollow(key)
        if removed.is_leader:
            for listener in self.leadership_listeners:
                listener(removed, False)
        if delete:
            self.log_manager.delete_log(key)
        self.purgatory.notify(key)

    # -- log dir failures --------------------------------------------------------------------------
    def _on_log_dir_failure(self, log_dir: str) -> None:
        """Stop serving every replica in ``log_dir`` at once (Kafka's handleLogDirFailure).

        Runs where the failure was seen, maybe deep inside an append: only what is safe there
        happens now (requests see KAFKA_STORAGE_ERROR from here on, fetchers stop, waiters
        wake); the coordinators' unloading and telling the controller follow on the event loop.
        """
        taken, lost_leaderships = 0, []
        for key, partition in self.partitions.items():
            if key in self.offline or self.log_manager.log_dir_of(key) != log_dir:
                continue
            self.offline.add(key)
            self.fetchers.unfollow(key)
            if partition.is_leader:
                lost_leaderships.append(partition)
            partition.leader_id = -1
            self.purgatory.notify(key)
            taken += 1
        log.warning(
            "broker %d stopped serving %d replicas in %s (%d as leader)",
            self.broker_id,
            taken,
            log_dir,
            len(lost_leaderships),
        )

        def after() -> None:
            for partition in lost_leaderships:
                for listener in self.leadership_listeners:
                    try:
                        listener(partition, False)
                    except Exception:
                        log.exception("unloading %s-%d after its log dir failed", partition.topic, partition.index)
            self._publish_offline_replicas()

        self._schedule(after)

    @staticmethod
    def _schedule(callback) -> None:
        try:
            asyncio.get_running_loop().call_soon(callback)
        except RuntimeError:  # no event loop (tools, tests): now is as good as later
            callback()

    def _offline_error(self, topic: str, index: int) -> KafkaStorageError:
        return KafkaStorageError(f"{topic}-{index} is offline on broker {self.broker_id}: its log dir failed")

    # -- the leader's view of its followers --------------------------------------------------------
    def record_follower_fetch(
        self, partition: Partition, replica_id: int, fetch_offset: int, fetched: object = None
    ) -> None:
        """``fetched``: the partition's entry in the follower's fetch session, if it fetches in one."""
        # replica.lag.time.max.ms is a duration: a step of the wall clock must not shrink the ISR
        now = int(time.monotonic() * 1000)
        if partition.update_follower(replica_id, fetch_offset, now, fetched):
            self._write_isr(
                partition, sorted(set(partition.isr) | {replica_id}, key=partition.replicas.index), "caught up"
            )
        if partition.maybe_increment_high_watermark():
            self.purgatory.notify(partition.key)

    def shrink_isrs(self) -> None:
        """Drop followers that fell behind for replica.lag.time.max.ms (run periodically)."""
        now = int(time.monotonic() * 1000)
        max_lag = self.config.replica_lag_time_max_ms
        for partition in list(self.partitions.values()):
            if not partition.is_leader or partition.pending_isr is not None:
                continue
            caught_up = partition.caught_up_outside_isr(now, max_lag)
            if caught_up:  # idle partitions' expansions are retried here, not on each fetch
                self._write_isr(
                    partition, sorted(set(partition.isr) | set(caught_up), key=partition.replicas.index), "caught up"
                )
            lagging = partition.lagging_followers(now, max_lag)
            if lagging:
                self._write_isr(
                    partition,
                    [b for b in partition.isr if b not in lagging],
                    f"{lagging} fell behind for over {max_lag} ms",
                )
                if partition.maybe_increment_high_watermark():
                    self.purgatory.notify(partition.key)

    def _write_isr(self, partition: Partition, isr: list[int], reason: str) -> None:
        """The leader changes its ISR with a compare-and-set on the state znode (fenced if stale).

        With ZooKeeper the write goes to a thread of its own: a ZooKeeper that stops answering
        holds a write up to the session timeout, and on the event loop it held every produce and
        fetch of the broker with it (issue 14). Until the answer the change is pending, as Kafka's
        AlterPartition in flight: the high watermark counts the old and the new ISR together
        (``Partition.maximal_isr``), and no other change of that partition's ISR is proposed.
        """
        if partition.pending_isr is not None:
            return
        state = PartitionState(partition.leader_id, partition.leader_epoch, isr, self._controller_epoch())
        path = model.partition_state_path(partition.topic, partition.index)
        store = self.store
        loop = handoff_loop(store)
        if loop is None:
            try:
                version = store.set(path, state.to_json(), partition.state_version)
            except StoreError as exc:
                self._isr_write_failed(partition, path, isr, exc)
                return
            self._isr_written(partition, state, version, reason)
            return
        partition.pending_isr = isr
        if self._isr_writer is None:
            self._isr_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strom-isr-writer")
        written = self._isr_writer.submit(store.set, path, state.to_json(), partition.state_version)
        on_loop_when_done(written, loop, self._isr_answered, partition, isr, state, path, reason)

    def _isr_answered(
        self, partition: Partition, isr: list[int], state: PartitionState, path: str, reason: str, done: Future
    ) -> None:
        if partition.pending_isr is not isr or self.partitions.get(partition.key) is not partition:
            return  # the partition changed leader epoch or role meanwhile, or is no longer here
        partition.pending_isr = None
        error = done.exception()
        if error is None:
            self._isr_written(partition, state, done.result(), reason)
        elif isinstance(error, StoreError):
            self._isr_write_failed(partition, path, state.isr, error)
        else:
            log.error("%s-%d: ISR change failed", partition.topic, partition.index, exc_info=error)
            self._request_metadata_reload(path)
        if partition.maybe_increment_high_watermark():  # a shrink written, or an expansion given up
            self.purgatory.notify(partition.key)

    def _isr_write_failed(self, partition: Partition, path: str, isr: list[int], exc: StoreError) -> None:
        log.info(
            "%s-%d: ISR change to %s lost a race (%s); reloading metadata", partition.topic, partition.index, isr, exc
        )
        self._request_metadata_reload(path)

    def _isr_written(self, partition: Partition, state: PartitionState, version: int, reason: str) -> None:
        if version <= partition.state_version:  # a reload has shown a newer state already
            return
        isr = list(state.isr)
        log.info("%s-%d: ISR %s -> %s (%s)", partition.topic, partition.index, partition.isr, isr, reason)
        if len(isr) < len(partition.isr):
            self.stats.isr_shrinks += 1
        else:
            self.stats.isr_expands += 1
        partition.isr = isr
        partition.state_version = version
        self.metadata.set_state(partition.topic, partition.index, state, version)  # Metadata answers show it now

    def close(self) -> None:
        """Stop the ISR writer; a write still waiting for ZooKeeper ends with the store's close."""
        if self._isr_writer is not None:
            self._isr_writer.shutdown(wait=False, cancel_futures=True)

    def get_partition(self, topic: str, index: int) -> Partition:
        if self.offline and (topic, index) in self.offline:
            raise self._offline_error(topic, index)
        partition = self.partitions.get((topic, index))
        if partition is None:
            if topic in self.metadata.topics and index in self.metadata.topics[topic].replicas:
                raise NotLeaderError(f"broker {self.broker_id} has no replica of {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
        return partition

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self.get_partition(topic, index)
        if self.fenced:
            raise NotLeaderError(f"broker {self.broker_id} cannot confirm its ZooKeeper session and leads nothing")
        if not partition.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} is not the leader of {topic}-{index}")
        return partition

    def append_txn_marker(
        self, topic: str, index: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> LogAppendInfo:
        """Write a commit/abort marker on the leader; the caller waits for the HW to pass it."""
        partition = self.leader_partition(topic, index)
        if self.epochs_pending:
            self._check_epoch_durable(topic, index)
        try:
            info = partition.append_marker_as_leader(producer_id, producer_epoch, commit, coordinator_epoch)
        except OSError as exc:
            raise self.log_manager.storage_error(partition.key, exc, "appending a transaction marker to") from exc
        self.purgatory.notify(partition.key)
        return info

    async def wait_committed(self, topic: str, index: int, offset: int, timeout_s: float) -> None:
        """Wait until the high watermark passes ``offset`` (acks=all for the broker's own writes).

        Raises NotLeaderError when leadership is lost meanwhile (the write may be truncated by
        the new leader), KafkaStorageError when the log dir failed, and RequestTimedOutError
        when the followers do not catch up in time. The write reaches the file before this
        returns: the caller answers a request of its own, which the connection cannot revise.
        """
        key = (topic, index)
        deadline = time.monotonic() + timeout_s
        while True:
            held = self.partitions.get(key)
            if held is None or not held.is_leader or self.fenced:
                if key in self.offline:
                    raise self._offline_error(topic, index)
                raise NotLeaderError(f"broker {self.broker_id} lost the leadership of {topic}-{index}")
            if held.log.high_watermark > offset:
                self.log_manager.write_behind.write_all()
                if key in self.offline:
                    raise self._offline_error(topic, index)
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOutError(f"{topic}-{index} did not replicate offset {offset} in {timeout_s:.0f}s")
            await self.purgatory.wait([key], left)

    async def append_committed(self, topic: str, index: int, records, timeout_s: float) -> LogAppendInfo:
        """Append as leader with acks=all semantics (min.insync.replicas checked) and wait for the HW."""
        if self.epochs_pending:
            await self.until_epochs_durable([(topic, index)], timeout_s)
        info = self.append(topic, index, records, -1)
        await self.wait_committed(topic, index, info.last_offset, timeout_s)
        return info

    def append(self, topic: str, index: int, records, required_acks: int) -> LogAppendInfo:
        partition = self.partitions.get((topic, index))
        if partition is None or not partition.is_leader or self.fenced:
            partition = self.leader_partition(topic, index)  # raises the precise error
        if self.epochs_pending:
            self._check_epoch_durable(topic, index)
        stats = self.stats.topic(topic)  # Kafka's BrokerTopicMetrics: plain counters
        stats.produce_requests += 1
        try:
            config = partition.log.config
            decompressed = None
            if config.schema_validation and self._schema_check is not None:
                decompressed = self._schema_check(topic, config, records)
            info = partition.append_as_leader(records, required_acks, decompressed)
        except OSError as exc:  # a roll, an index block, an fsync: the dir goes offline
            stats.failed_produce += 1
            raise self.log_manager.storage_error(partition.key, exc, "appending to") from exc
        except Exception:
            stats.failed_produce += 1
            raise
        if not info.duplicate:
            stats.messages_in += info.records_count
            stats.bytes_in += len(records)
        self.purgatory.notify(partition.key)
        return info


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # tools and tests without a loop: the pass makes its checkpoints durable itself
        return None
