"""The replica fetchers built from their collaborators alone (the replica manager's, from
tests/replication/replicas.py), no broker: a follower finds its leader's inter-broker listener in
the metadata and first asks where its leader epoch ends there (KIP-101), before any Fetch."""

from __future__ import annotations

import asyncio
import struct
import uuid

from strom.cluster import model
from strom.cluster.metadata_cache import TopicInfo
from strom.cluster.model import PartitionState
from strom.protocol.api import ApiKey
from strom.protocol.codec import decode_request
from strom.protocol.frame import parse_request_header
from tests.replication.replicas import make_replicas


def test_a_follower_asks_its_leader_where_its_epoch_ends_first(tmp_path):
    replicas = make_replicas(tmp_path, broker_id=1)
    manager = replicas.manager

    async def scenario() -> bytes:
        first_request: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        async def leader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            frame = await reader.readexactly(size)
            if not first_request.done():
                first_request.set_result(frame)
            await reader.read()  # no answer: the follower waits until the test stops it

        server = await asyncio.start_server(leader, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        # broker 2 leads orders-0 at epoch 3; only its PLAINTEXT listener (the inter-broker one) answers
        replicas.metadata.brokers[2] = model.Broker(
            2, "127.0.0.1", port, endpoints=(("OTHER", "127.0.0.1", 1), ("PLAINTEXT", "127.0.0.1", port))
        )
        info = TopicInfo("orders", uuid.uuid4(), {0: [2, 1]}, states={0: PartitionState(2, 3, [2, 1])})
        replicas.metadata.topics["orders"] = info
        manager.apply_metadata()
        try:
            assert not manager.partitions[("orders", 0)].is_leader
            return await asyncio.wait_for(first_request, 10)
        finally:
            await manager.fetchers.shutdown()
            server.close()
            await server.wait_closed()

    frame = asyncio.run(scenario())
    header, offset = parse_request_header(frame)
    assert (header.api_key, header.client_id) == (ApiKey.OFFSET_FOR_LEADER_EPOCH, "strom-replica-fetcher-1")
    request = decode_request(header.api_key, header.api_version, frame, offset)
    assert request.replica_id == 1
    [topic] = request.topics
    assert topic.topic == "orders"
    assert [(p.partition, p.current_leader_epoch) for p in topic.partitions] == [(0, 3)]
