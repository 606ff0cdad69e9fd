"""MetricsEndpoint built from its sources alone (no broker): it serves them over HTTP and publishes its URL."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

from strom.cluster.metadata_cache import MetadataCache
from strom.metrics.collector import Sources
from strom.metrics.server import METRICS_URL_FILE, MetricsEndpoint
from strom.metrics.stats import BrokerStats
from tests.metrics.conftest import Scrape


def test_the_endpoint_serves_its_sources_and_writes_its_url_into_the_dir(tmp_path: Path):
    stats = BrokerStats()
    stats.topic("orders").bytes_in = 1234
    endpoint = MetricsEndpoint(
        Sources(stats=stats, metadata=MetadataCache()), "127.0.0.1", 0, broker_id=7, url_dir=str(tmp_path)
    )

    async def serve_and_scrape() -> tuple[str, str]:
        url = endpoint.start(asyncio.get_running_loop())
        try:
            fetch = lambda: urllib.request.urlopen(url, timeout=10).read().decode()  # noqa: E731
            return url, await asyncio.get_running_loop().run_in_executor(None, fetch)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, endpoint.stop)

    url, text = asyncio.run(serve_and_scrape())
    assert url.startswith("http://127.0.0.1:") and not url.startswith("http://127.0.0.1:0/")
    assert (tmp_path / METRICS_URL_FILE).read_text() == url + "\n"
    scrape = Scrape(text)
    assert scrape.value("kafka_server_brokertopicmetrics_bytesin_total", topic="orders") == 1234
    assert scrape.value("process_cpu_seconds_total") > 0  # the process collectors are registered too
