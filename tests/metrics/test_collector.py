"""BrokerCollector built from its sources alone (no broker): a scrape reads them on the event loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from strom.cluster.metadata_cache import MetadataCache
from strom.metrics.collector import BrokerCollector, Sources
from strom.metrics.server import LoopLag
from strom.metrics.stats import BrokerStats


@dataclass(eq=False)  # hashable by identity, as connections are
class FakeConnection:
    listener: str


def samples(families) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_a_scrape_reads_the_counters_connections_and_loop_lag_it_was_given():
    stats = BrokerStats()
    stats.topic("orders").messages_in = 5
    stats.topic("clicks").messages_in = 2
    stats.isr_shrinks = 3
    stats.connections_created["PLAINTEXT"] = 4
    connections = {FakeConnection("PLAINTEXT"), FakeConnection("PLAINTEXT"), FakeConnection("INTERNAL")}
    lag = LoopLag()
    lag.last_s = 0.125

    async def scrape() -> list:
        collector = BrokerCollector(
            Sources(stats=stats, metadata=MetadataCache(), connections=connections, loop_lag=lag),
            asyncio.get_running_loop(),
        )
        # prometheus_client scrapes on its HTTP thread, and the snapshot runs on this loop
        return await asyncio.get_running_loop().run_in_executor(None, lambda: list(collector.collect()))

    got = samples(asyncio.run(scrape()))
    total = "kafka_server_brokertopicmetrics_messagesin_total"
    assert got[(total, (("topic", "orders"),))] == 5
    assert got[(total, (("topic", "clicks"),))] == 2
    assert got[(total, ())] == 7
    assert got[("kafka_server_replicamanager_isrshrinks_total", ())] == 3
    assert got[("kafka_server_replicamanager_partitioncount", ())] == 0  # no replica manager given
    assert got[("kafka_server_socket_server_metrics_connection_count", (("listener", "PLAINTEXT"),))] == 2
    assert got[("kafka_server_socket_server_metrics_connection_count", (("listener", "INTERNAL"),))] == 1
    assert got[("kafka_server_socket_server_metrics_connection_creation_total", (("listener", "PLAINTEXT"),))] == 4
    assert got[("strom_eventloop_lag_seconds", ())] == 0.125


def test_a_closed_loop_yields_no_broker_families():
    loop = asyncio.new_event_loop()
    loop.close()
    collector = BrokerCollector(Sources(stats=BrokerStats(), metadata=MetadataCache()), loop)
    assert list(collector.collect()) == []
