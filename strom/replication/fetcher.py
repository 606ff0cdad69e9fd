"""Followers pull from leaders with Fetch requests, as Kafka's replica fetcher threads do.

One fetcher task per (leader, fetcher index) with ``num.replica.fetchers`` per leader, each on
its own connection. A partition that becomes a follower first truncates its log using the
leader's OffsetForLeaderEpoch answer (KIP-101/279), never its high watermark alone, then fetches
from its log end. The leader learns each follower's log end from the fetch offset, and the
follower learns the high watermark from the response.

Each fetcher keeps an incremental fetch session (KIP-227) with its leader, so a long-poll names
only the partitions whose fetch position moved and the leader answers only what changed; a
session error or a lost connection falls back to one full fetch. The fetcher's own work per fetch
follows the same rule: it keeps each partition's request entry and rebuilds only those of the
partitions that a response, a truncation or a role change touched. A full pass over every entry
runs every ENTRY_REFRESH_S (it catches what moved without this fetcher, such as a log start
advanced by retention) and on every fetch while a replication throttle may hold some back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from strom.protocol.records import complete_batches_end
from strom.replication import fetch_wire
from strom.replication.client import BrokerClient, BrokerConnectionError
from strom.replication.fetch_session import FetchSessionHandler
from strom.replication.fetch_wire import decode_fetch_response, encode_fetch
from strom.storage.leader_epoch import UNDEFINED_EPOCH

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.partition import Partition
    from strom.replication.purgatory import Purgatory
    from strom.replication.throttle import ReplicationQuotas
    from strom.security.client import ClientSecurity
    from strom.storage.log_manager import LogManager

log = logging.getLogger("strom.replication")

FETCH_VERSION = fetch_wire.VERSION  # encoded and decoded by hand (strom.replication.fetch_wire)
EPOCH_VERSION = 4
LIST_OFFSETS_VERSION = 7
RETRY_BACKOFF_S = 0.2
ENTRY_REFRESH_S = 5.0


class FetcherConfig(Protocol):
    """The broker configs that a follower's fetches follow (``BrokerConfig`` has them all)."""

    @property
    def inter_broker_listener_name(self) -> str: ...
    @property
    def num_replica_fetchers(self) -> int: ...
    @property
    def replica_fetch_max_bytes(self) -> int: ...
    @property
    def replica_fetch_min_bytes(self) -> int: ...
    @property
    def replica_fetch_response_max_bytes(self) -> int: ...
    @property
    def replica_fetch_wait_max_ms(self) -> int: ...
    @property
    def replica_socket_timeout_ms(self) -> int: ...


class ReplicationBytesIn(Protocol):
    """The counter that fetched bytes are added to (``strom.metrics.stats.BrokerStats``)."""

    replication_bytes_in: int


@dataclass(frozen=True)
class FetcherContext:
    """What this broker's fetchers use: its id and configs, where the leaders listen (``metadata``),
    the logs whose failures they report, the replica manager's throttles and purgatory, and the
    inter-broker listener's TLS and SASL settings."""

    broker_id: int
    config: FetcherConfig
    metadata: MetadataCache
    log_manager: LogManager
    quotas: ReplicationQuotas
    purgatory: Purgatory
    stats: ReplicationBytesIn
    security: ClientSecurity | None = None


class ReplicaFetcher:
    def __init__(self, context: FetcherContext, leader_id: int, index: int):
        self.context = context
        self.leader_id = leader_id
        self.index = index
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.needs_truncation: set[tuple[str, int]] = set()
        # the next request's entry per fetched partition (left out: truncating or held back), and
        # the partitions whose entry may be stale since it was last built
        self._entries: dict[tuple[str, int], dict] = {}
        self._touched: set[tuple[str, int]] = set()
        self._refreshed = 0.0
        self._wakeup = asyncio.Event()
        self._client: BrokerClient | None = None
        self._session = FetchSessionHandler()
        self._task = asyncio.ensure_future(self._run())

    def add(self, partition: Partition) -> None:
        self.partitions[partition.key] = partition
        self.needs_truncation.add(partition.key)
        self._touched.add(partition.key)
        self._wakeup.set()

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)
        self.needs_truncation.discard(key)
        self._touched.add(key)

    async def stop(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass
        if self._client is not None:
            self._client.close()

    # -- the loop ----------------------------------------------------------------------------------
    def _connect_client(self) -> BrokerClient | None:
        node = self.context.metadata.brokers.get(self.leader_id)
        # the leader's inter-broker listener, with that listener's TLS and SASL settings
        address = node.endpoint(self.context.config.inter_broker_listener_name) if node is not None else None
        if address is None:
            return None
        if self._client is None or (self._client.host, self._client.port) != address:
            if self._client is not None:
                self._client.close()
            self._client = BrokerClient(
                address[0],
                address[1],
                f"strom-replica-fetcher-{self.context.broker_id}",
                timeout_s=self.context.config.replica_socket_timeout_ms / 1000,
                security=self.context.security,
            )
        return self._client

    async def _run(self) -> None:
        while True:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            client = self._connect_client()
            if client is None:
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            try:
                if self.needs_truncation:
                    await self._truncate(client)
                await self._fetch_once(client)
            except BrokerConnectionError as exc:
                log.info("fetcher %d->%d: %s", self.context.broker_id, self.leader_id, exc)
                self._session.reset()
                await asyncio.sleep(RETRY_BACKOFF_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher %d->%d failed; retrying", self.context.broker_id, self.leader_id)
                self._session.reset()
                await asyncio.sleep(RETRY_BACKOFF_S)

    # -- truncation --------------------------------------------------------------------------------
    async def _truncate(self, client: BrokerClient) -> None:
        """KIP-101/279: truncate to where our latest epoch ends on the leader, not to our HW."""
        keys = [k for k in self.needs_truncation if k in self.partitions]
        by_topic: dict[str, list[dict]] = {}
        partition: Partition | None  # a replica may be gone when the answer comes
        for topic, index in keys:
            partition = self.partitions[(topic, index)]
            by_topic.setdefault(topic, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": partition.leader_epoch,
                    "leader_epoch": partition.log.leader_epoch_cache.latest_epoch,
                }
            )
        response = await client.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            EPOCH_VERSION,
            {
                "replica_id": self.context.broker_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        for topic in response.topics:
            for result in topic.partitions:
                key = (topic.topic, result.partition)
                partition = self.partitions.get(key)
                if partition is None:
                    continue
                if result.error_code != ErrorCode.NONE:
                    log.info("%s-%d: OffsetForLeaderEpoch error %s; retrying", *key, result.error_code)
                    continue
                try:
                    self._apply_truncation(partition, result.leader_epoch, result.end_offset)
                except OSError as exc:  # the replica goes offline with its log dir
                    self.context.log_manager.storage_error(key, exc, "truncating")
                    continue
                self.needs_truncation.discard(key)
                self._touched.add(key)

    @staticmethod
    def _apply_truncation(partition: Partition, leader_epoch: int, end_offset: int) -> None:
        log_ = partition.log
        cache = log_.leader_epoch_cache
        if leader_epoch == UNDEFINED_EPOCH or end_offset < 0:
            target = log_.high_watermark  # no epoch information: the pre-KIP-101 fallback
        elif leader_epoch == cache.latest_epoch:
            target = min(end_offset, log_.log_end_offset)
        else:
            # the leader's epoch is older than ours: our log diverged after it ended on the leader
            our_end = cache.end_offset_for(leader_epoch, log_.log_end_offset)[1]
            target = min(end_offset, our_end if our_end >= 0 else log_.log_end_offset)
        if target < log_.log_end_offset:
            log.info(
                "%s-%d: truncating from %d to %d (leader epoch %d ends at %d)",
                partition.topic,
                partition.index,
                log_.log_end_offset,
                target,
                leader_epoch,
                end_offset,
            )
            log_.truncate_to(target)

    # -- fetching ----------------------------------------------------------------------------------
    def _refresh_entries(self) -> list[tuple[str, int]]:
        """Rebuild the entries of touched partitions; returns the keys to compare with the session."""
        quotas = self.context.quotas  # a move's throttled replicas wait while it is spent
        throttling = quotas.follower_throttling
        now = time.monotonic()
        touched: Iterable[tuple[str, int]]
        if throttling or now - self._refreshed >= ENTRY_REFRESH_S:
            self._refreshed = now
            touched = self.partitions.keys() | self._entries.keys()
        else:
            touched = self._touched
        self._touched = set()
        entries = self._entries
        max_bytes = self.context.config.replica_fetch_max_bytes
        keys = []
        for key in touched:
            partition = self.partitions.get(key)
            if (
                partition is None
                or key in self.needs_truncation
                or (throttling and quotas.follower_held_back(partition))
            ):
                if entries.pop(key, None) is not None:
                    keys.append(key)
                continue
            log_ = partition.log
            entry = entries.get(key)
            if (
                entry is None
                or entry["fetch_offset"] != log_.log_end_offset
                or entry["log_start_offset"] != log_.log_start_offset
                or entry["current_leader_epoch"] != partition.leader_epoch
            ):
                entries[key] = {
                    "partition": partition.index,
                    "current_leader_epoch": partition.leader_epoch,
                    "fetch_offset": log_.log_end_offset,
                    "log_start_offset": log_.log_start_offset,
                    "partition_max_bytes": max_bytes,
                }
                keys.append(key)
        return keys

    async def _fetch_once(self, client: BrokerClient) -> None:
        config = self.context.config
        changed = self._refresh_entries()
        wanted = self._entries
        if not wanted:
            self._touched.update(changed)  # the next request forgets them
            await asyncio.sleep(RETRY_BACKOFF_S)
            return
        request = self._session.build(wanted, changed)
        body = encode_fetch(
            self.context.broker_id,
            config.replica_fetch_wait_max_ms,
            config.replica_fetch_min_bytes,
            config.replica_fetch_response_max_bytes,
            request["session_id"],
            request["session_epoch"],
            request["topics"],
            request["forgotten_topics_data"],
        )
        response = await client.request_encoded(
            ApiKey.FETCH,
            FETCH_VERSION,
            body,
            decode_fetch_response,
            timeout_s=config.replica_fetch_wait_max_ms / 1000 + config.replica_socket_timeout_ms / 1000,
        )
        opened = self._session.session_id
        if not self._session.handle_response(response.error_code, response.session_id):
            log.info(
                "fetcher %d->%d: fetch session error %s; fetching in full",
                self.context.broker_id,
                self.leader_id,
                response.error_code,
            )
            return
        if self._session.session_id not in (0, opened):
            log.info(
                "fetcher %d->%d: incremental fetch session %d for %d partitions",
                self.context.broker_id,
                self.leader_id,
                self._session.session_id,
                len(wanted),
            )
        moved = False
        for topic in response.responses:
            for data in topic.partitions:
                key = (topic.topic, data.partition_index)
                partition = self.partitions.get(key)
                if partition is None or key in self.needs_truncation:
                    continue
                self._touched.add(key)
                try:
                    moved |= await self._handle_partition(client, partition, data)
                except OSError as exc:  # a roll or an index block on a full disk: offline with its dir
                    self.context.log_manager.storage_error(key, exc, "appending fetched data to")
        if not moved:
            await asyncio.sleep(0)

    async def _handle_partition(self, client: BrokerClient, partition: Partition, data) -> bool:
        code = data.error_code
        log_ = partition.log
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._reset_out_of_range(client, partition)
            return True
        if code in (
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            ErrorCode.KAFKA_STORAGE_ERROR,
        ):  # the leader's log dir failed: a new one comes
            await asyncio.sleep(RETRY_BACKOFF_S)  # metadata is about to change; wait for it
            return False
        if code != ErrorCode.NONE:
            log.warning("%s-%d: fetch error %s", partition.topic, partition.index, code)
            return False
        records = data.records
        appended = False
        if records is not None and len(records):
            whole, _ = complete_batches_end(records)
            if whole:
                try:
                    log_.append_as_follower(records[:whole])
                    quota = self.context.quotas.follower_quota(partition)
                    if quota is not None:
                        quota.record(whole)
                    self.context.stats.replication_bytes_in += whole
                    appended = True
                except KafkaStorageError:
                    return False  # reported by the segment: this replica is offline now
                except KafkaError as exc:
                    log.warning(
                        "%s-%d: cannot append fetched data: %s; re-truncating", partition.topic, partition.index, exc
                    )
                    self.needs_truncation.add(partition.key)
                    return False
        if data.log_start_offset > log_.log_start_offset:
            log_.advance_log_start_offset(data.log_start_offset)
        log_.update_high_watermark(min(data.high_watermark, log_.log_end_offset))
        if appended:
            self.context.purgatory.notify(partition.key)
        return appended

    async def _reset_out_of_range(self, client: BrokerClient, partition: Partition) -> None:
        """Our log end is outside the leader's log: align with its start or end."""
        response = await client.request(
            ApiKey.LIST_OFFSETS,
            LIST_OFFSETS_VERSION,
            {
                "replica_id": self.context.broker_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": partition.topic,
                        "partitions": [
                            {
                                "partition_index": partition.index,
                                "current_leader_epoch": partition.leader_epoch,
                                "timestamp": t,
                            }
                            for t in (-2, -1)
                        ],
                    }
                ],
            },
        )
        results = response.topics[0].partitions if response.topics else []
        if len(results) < 2 or any(r.error_code for r in results):
            return
        earliest, latest = results[0].offset, results[1].offset
        log_ = partition.log
        if log_.log_end_offset > latest:
            log_.truncate_to(latest)
        elif log_.log_end_offset < earliest:
            log.info(
                "%s-%d: log end %d is below the leader's log start %d: starting over there",
                partition.topic,
                partition.index,
                log_.log_end_offset,
                earliest,
            )
            log_.truncate_fully_and_start_at(earliest)


class ReplicaFetcherManager:
    def __init__(self, context: FetcherContext):
        self.context = context
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._assigned: dict[tuple[str, int], tuple[int, int]] = {}

    def follow(self, partition: Partition) -> None:
        """Start (or restart, after a leader change) fetching ``partition`` from its leader."""
        self.unfollow(partition.key)
        if partition.leader_id < 0:
            return
        count = max(1, self.context.config.num_replica_fetchers)
        fetcher_key = (partition.leader_id, hash(partition.key) % count)
        fetcher = self.fetchers.get(fetcher_key)
        if fetcher is None:
            fetcher = self.fetchers[fetcher_key] = ReplicaFetcher(self.context, *fetcher_key)
        fetcher.add(partition)
        self._assigned[partition.key] = fetcher_key

    def unfollow(self, key: tuple[str, int]) -> None:
        fetcher_key = self._assigned.pop(key, None)
        if fetcher_key is not None and fetcher_key in self.fetchers:
            self.fetchers[fetcher_key].remove(key)

    async def shutdown(self) -> None:
        await asyncio.gather(*(f.stop() for f in self.fetchers.values()), return_exceptions=True)
        self.fetchers.clear()
        self._assigned.clear()
