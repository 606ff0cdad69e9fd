"""Offsets sampled over time: messages in and consumed per second, and each group's lag history.

The protocol has no rates, but log end offsets are counters: sampled every few seconds, their
differences are messages in per second per topic, and the differences of the groups' committed
offsets are messages consumed per second. So the charts work against any Kafka cluster, with no
metrics endpoint. With ``--metrics`` URLs the Prometheus endpoints are scraped on the same tick, for
bytes in and out and the brokers' own gauges.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field

from strom.console.cluster import Cluster

HISTORY = 150
MAX_GROUPS = 50  # groups sampled per tick: a bound on the console's load on a large cluster
METRIC_RATES = {  # Prometheus counter (summed over a broker's unlabelled samples) -> chart series
    "kafka_server_brokertopicmetrics_bytesin_total": "bytes in",
    "kafka_server_brokertopicmetrics_bytesout_total": "bytes out",
}
METRIC_GAUGES = (
    "underreplicatedpartitions",
    "offlinepartitionscount",
    "activecontrollercount",
    "leadercount",
    "partitioncount",
    "underminisrpartitioncount",
)


@dataclass
class MetricsScrape:
    url: str
    error: str | None = None
    gauges: dict[str, float] = field(default_factory=dict)


class Sampler:
    def __init__(self, cluster: Cluster, interval_s: float, metrics_urls: list[str] | None = None):
        self.cluster = cluster
        self.interval_s = interval_s
        self.metrics_urls = list(metrics_urls or [])
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="strom-console-sampler", daemon=True)
        self._ends: dict[tuple[str, int], int] = {}
        self._committed: dict[tuple[str, tuple[str, int]], int] = {}
        self._metric_totals: dict[str, float] = {}
        self._topics: set[str] = set()
        self._last: float | None = None
        self.topic_rates: dict[str, float] = {}
        self.series: dict[str, deque[tuple[float, float]]] = {}
        self.group_lag: dict[str, deque[tuple[float, float]]] = {}
        self.scrapes: list[MetricsScrape] = []
        self.error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval_s + self.cluster.timeout_s * 3)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.sample()
                self.error = None
            except Exception as exc:  # the cluster away for a while: the pages say so, sampling goes on
                from strom.cli.client_props import error_text

                self.error = error_text(exc)
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def sample(self) -> None:
        now = time.time()
        topics = [t for t in self.cluster.topics() if t.error is None]
        ends = self.cluster.offsets({(t.name, p.id): "latest" for t in topics for p in t.partitions})
        internal = {t.name for t in topics if t.internal}
        groups = [g for g, _, _ in self.cluster.groups()][:MAX_GROUPS]
        committed: dict[tuple[str, tuple[str, int]], int] = {}
        for group_id in groups:
            try:
                for tp, offset in self.cluster.committed(group_id).items():
                    committed[(group_id, tp)] = offset
            except Exception:
                continue  # a group deleted between the list and the fetch
        scrapes, totals = self._scrape()
        with self._lock:
            dt = now - self._last if self._last is not None else None
            if dt:
                per_topic: dict[str, float] = {}
                for tp, end in ends.items():
                    if tp[0] in internal:
                        continue
                    if tp in self._ends:
                        per_topic[tp[0]] = per_topic.get(tp[0], 0) + max(end - self._ends[tp], 0) / dt
                    elif tp[0] not in self._topics:  # a topic new since the last sample: all of it came in since
                        per_topic[tp[0]] = per_topic.get(tp[0], 0) + end / dt
                self.topic_rates = per_topic
                self._add("messages in", now, sum(per_topic.values()))
                consumed = sum(max(o - self._committed[k], 0) for k, o in committed.items() if k in self._committed)
                self._add("messages consumed", now, consumed / dt)
                for name, total in totals.items():
                    if name in self._metric_totals:
                        self._add(name, now, max(total - self._metric_totals[name], 0) / dt)
            lag: dict[str, float] = {}
            for (group_id, tp), offset in committed.items():
                if tp in ends:
                    lag[group_id] = lag.get(group_id, 0) + max(ends[tp] - offset, 0)
            for group_id in groups:
                self.group_lag.setdefault(group_id, deque(maxlen=HISTORY)).append((now, lag.get(group_id, 0)))
            for gone in set(self.group_lag) - set(groups):
                del self.group_lag[gone]
            self._ends, self._committed, self._metric_totals, self._last = ends, committed, totals, now
            self._topics = {t.name for t in topics}
            self.scrapes = scrapes

    def _add(self, name: str, when: float, value: float) -> None:
        self.series.setdefault(name, deque(maxlen=HISTORY)).append((when, value))

    def _scrape(self) -> tuple[list[MetricsScrape], dict[str, float]]:
        """Each --metrics endpoint's gauges, and the rate counters summed over all endpoints."""
        if not self.metrics_urls:
            return [], {}
        from prometheus_client.parser import text_string_to_metric_families

        scrapes: list[MetricsScrape] = []
        totals: dict[str, float] = {}
        for url in self.metrics_urls:
            scrape = MetricsScrape(url)
            try:
                with urllib.request.urlopen(url, timeout=min(self.cluster.timeout_s, 3.0)) as response:
                    text = response.read(16 * 1024 * 1024).decode("utf-8", "replace")
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        name = sample.name.lower()
                        if name in METRIC_RATES and "topic" not in sample.labels:
                            totals[METRIC_RATES[name]] = totals.get(METRIC_RATES[name], 0.0) + sample.value
                        elif any(
                            name.endswith((g, g + "_value")) for g in METRIC_GAUGES
                        ) and not sample.labels.keys() - {"broker", "broker_id", "instance"}:
                            scrape.gauges[sample.name] = sample.value
            except Exception as exc:
                scrape.error = f"cannot scrape {url}: {exc}"
            scrapes.append(scrape)
        return scrapes, totals

    # -- what the pages read -------------------------------------------------------------------------

    def snapshot(self, *names: str) -> dict[str, list[tuple[float, float]]]:
        with self._lock:
            return {
                name: list(self.series.get(name, ()))
                for name in names
                if name in self.series or name in ("messages in", "messages consumed")
            }

    def lag_history(self, group_id: str) -> list[tuple[float, float]]:
        with self._lock:
            return list(self.group_lag.get(group_id, ()))

    def rate(self, topic: str) -> float | None:
        with self._lock:
            return self.topic_rates.get(topic) if self._last is not None else None
