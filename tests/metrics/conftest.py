"""Scraping a broker's /metrics as Prometheus would, and the cluster fixtures (real ZooKeeper) reused."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.conftest import cluster_factory, zookeeper  # noqa: F401  (fixtures)

METRICS_ON = {"metrics.listener": "http://127.0.0.1:0"}


def metrics_url(data_dir: Path) -> str:
    """The URL the broker published in its data dir (it binds port 0)."""
    return (Path(data_dir) / "strom.metrics").read_text().strip()


class Scrape:
    """One scrape: samples by name, each a list of (labels, value)."""

    def __init__(self, text: str):
        self.text = text
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for sample in family.samples:
                self.samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))

    def value(self, name: str, **labels: str) -> float:
        """The one sample with exactly these labels (0 when absent, as for a counter never bumped)."""
        for sample_labels, value in self.samples.get(name, []):
            if sample_labels == labels:
                return value
        return 0.0

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples whose labels include these."""
        return sum(v for found, v in self.samples.get(name, []) if all(found.get(k) == x for k, x in labels.items()))


def scrape(url: str, timeout_s: float = 10) -> Scrape:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return Scrape(response.read().decode())
