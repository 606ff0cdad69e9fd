"""Transaction markers: written on each partition's leader, by a local call or WriteTxnMarkers.

The coordinator hands over (producer, epoch, commit/abort, partitions) once PrepareCommit or
PrepareAbort is committed; the channel groups the partitions by leader, writes the markers
there (one WriteTxnMarkers request per broker, or directly when this broker leads) and retries
what failed until every partition has its marker, the partition's topic is gone, or this
broker stops coordinating the transaction. A leader acknowledges a marker only once it is
committed (acks=all), so a marker acknowledged here survives the loss of that leader.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from strom.group.offset_store import OFFSETS_TOPIC
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode, KafkaError
from strom.replication.client import BrokerClient, BrokerConnectionError

if TYPE_CHECKING:
    from strom.cluster.metadata_cache import MetadataCache
    from strom.replication.replica_manager import ReplicaManager
    from strom.security.client import ClientSecurity

# the group coordinator's complete_txn(offsets partition, producer id, commit): a marker in
# __consumer_offsets settles the transactional offsets it covers
CompleteOffsetsTxn = Callable[[int, int, bool], None]

log = logging.getLogger("strom.txn")

MARKER_REQUEST_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = (0.02, 1.0)
WRITE_TXN_MARKERS_VERSION = 1

# Errors after which retrying cannot help: a newer epoch or coordinator already wrote there.
_FINAL = {ErrorCode.NONE, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}


async def write_marker(
    replicas: ReplicaManager,
    complete_offsets_txn: CompleteOffsetsTxn,
    topic: str,
    index: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
) -> int:
    """Write one marker as this partition's leader and wait until it is committed; an error code.

    A marker in __consumer_offsets also settles the transactional offsets it covers.
    """
    try:
        if replicas.epochs_pending:
            await replicas.until_epochs_durable([(topic, index)], MARKER_REQUEST_TIMEOUT_S)
        info = replicas.append_txn_marker(topic, index, producer_id, producer_epoch, commit, coordinator_epoch)
        await replicas.wait_committed(topic, index, info.last_offset, MARKER_REQUEST_TIMEOUT_S)
    except KafkaError as exc:
        if exc.error_code not in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT):
            log.info("marker for producer %d on %s-%d: %s", producer_id, topic, index, exc)
        return int(exc.error_code)
    if topic == OFFSETS_TOPIC:
        complete_offsets_txn(index, producer_id, commit)
    return ErrorCode.NONE


class PeerClients:
    """One inter-broker connection per peer, one request at a time on each."""

    def __init__(self, metadata: MetadataCache, listener: str, client_id: str, security: ClientSecurity | None = None):
        """``listener``: the inter-broker listener's name, ``security`` its TLS and SASL settings."""
        self.metadata = metadata
        self.listener = listener
        self.security = security
        self.client_id = client_id
        self._clients: dict[int, tuple[BrokerClient, asyncio.Lock]] = {}

    async def request(self, broker_id: int, api_key: int, version: int, values: dict, timeout_s: float):
        node = self.metadata.brokers.get(broker_id)
        if node is None:
            raise BrokerConnectionError(f"broker {broker_id} is not alive")
        address = node.endpoint(self.listener)
        if address is None:
            raise BrokerConnectionError(f"broker {broker_id} has no listener {self.listener}")
        held = self._clients.get(broker_id)
        if held is None or (held[0].host, held[0].port) != address:
            if held is not None:
                held[0].close()
            held = self._clients[broker_id] = (
                BrokerClient(address[0], address[1], self.client_id, timeout_s, security=self.security),
                asyncio.Lock(),
            )
        client, lock = held
        async with lock:
            return await client.request(api_key, version, values, timeout_s)

    def close(self) -> None:
        for client, _ in self._clients.values():
            client.close()
        self._clients.clear()


class MarkerChannel:
    """Writes markers through ``replicas`` where this broker leads, and with WriteTxnMarkers to the
    other leaders (found in ``metadata``) on the inter-broker ``listener``; gives up once
    ``stopping()`` says the broker is shutting down."""

    def __init__(
        self,
        broker_id: int,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        complete_offsets_txn: CompleteOffsetsTxn,
        *,
        listener: str,
        stopping: Callable[[], bool],
        security: ClientSecurity | None = None,
    ):
        self.broker_id = broker_id
        self.metadata = metadata
        self.replicas = replicas
        self.complete_offsets_txn = complete_offsets_txn
        self.stopping = stopping
        self.peers = PeerClients(metadata, listener, f"strom-txn-markers-{broker_id}", security)

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Iterable[tuple[str, int]],
        still_coordinator: Callable[[], bool],
    ) -> bool:
        """Write the markers everywhere; False if this broker stopped coordinating first."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S[0]
        while remaining:
            if not still_coordinator() or self.stopping():
                return False
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in list(remaining):
                info = self.metadata.topics.get(tp[0])
                if info is None or tp[1] not in info.replicas:
                    remaining.discard(tp)  # the topic was deleted: nothing left to mark (as Kafka)
                    continue
                leader = self.metadata.leader_of(*tp)
                if leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            results = await asyncio.gather(
                *(
                    self._send(leader, producer_id, producer_epoch, commit, coordinator_epoch, tps)
                    for leader, tps in by_leader.items()
                )
            )
            for codes in results:
                for tp, code in codes.items():
                    if code in _FINAL:
                        remaining.discard(tp)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RETRY_BACKOFF_S[1])
        return True

    async def _send(
        self,
        leader: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], int]:
        if leader == self.broker_id:
            codes = await asyncio.gather(
                *(
                    write_marker(
                        self.replicas,
                        self.complete_offsets_txn,
                        t,
                        p,
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                    )
                    for t, p in partitions
                )
            )
            return dict(zip(partitions, codes))
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        marker = {
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
        }
        try:
            response = await self.peers.request(
                leader,
                ApiKey.WRITE_TXN_MARKERS,
                WRITE_TXN_MARKERS_VERSION,
                {"markers": [marker]},
                MARKER_REQUEST_TIMEOUT_S + 5,
            )
        except BrokerConnectionError as exc:
            log.info("markers for producer %d to broker %d: %s; retrying", producer_id, leader, exc)
            return {}
        results: dict[tuple[str, int], int] = {}
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    results[(topic.name, p.partition_index)] = int(p.error_code)
        return results
