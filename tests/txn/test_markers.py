"""The marker writer's peer connections built from their collaborators alone (a metadata cache,
the inter-broker listener's name), no broker."""

from __future__ import annotations

import asyncio

import pytest

from strom.cluster import model
from strom.cluster.metadata_cache import MetadataCache
from strom.protocol.api import ApiKey
from strom.replication.client import BrokerConnectionError
from strom.txn.markers import PeerClients


def test_peers_are_reached_on_the_inter_broker_listener_only():
    metadata = MetadataCache()
    metadata.brokers[2] = model.Broker(2, "127.0.0.1", 1, endpoints=(("CLIENTS", "127.0.0.1", 1),))
    peers = PeerClients(metadata, "INTERNAL", "strom-txn-markers-1")

    def request(broker_id: int) -> None:
        asyncio.run(peers.request(broker_id, ApiKey.WRITE_TXN_MARKERS, 1, {"markers": []}, 1.0))

    with pytest.raises(BrokerConnectionError, match="broker 3 is not alive"):
        request(3)
    with pytest.raises(BrokerConnectionError, match="broker 2 has no listener INTERNAL"):
        request(2)
