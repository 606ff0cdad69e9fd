"""What the Iceberg benchmarks share: a broker process with translation on, its tables and its lag.

``strom.bench.iceberg_latency``, ``iceberg_lag`` and ``iceberg_read`` each start one broker as a
real process (``strom.bench.requests.start_broker``) with its data, its Iceberg catalog and its
warehouse all under one scratch directory: the broker's default warehouse is *beside* its log
dir, which under a shared ``/tmp`` would be every run's. The benchmarks read the table the way
a user's tools do (pyiceberg on the broker's SQLite catalog) and the lag the way Prometheus does
(the broker's ``/metrics``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable

from strom.bench.requests import start_broker
from strom.iceberg.table import CatalogSettings, committed_offsets, identifier, open_catalog
from strom.metrics.server import METRICS_URL_FILE

LAG_METRIC = "strom_iceberg_translation_lag_records"


class IcebergBroker:
    """One broker process with ``iceberg.enabled`` (or not), metrics served, under ``root``."""

    def __init__(self, prefix: str, target_lag_ms: int, directory: str | None = None):
        self.root = tempfile.mkdtemp(prefix=prefix, dir=directory)
        self.data_dir = os.path.join(self.root, "data")
        os.makedirs(self.data_dir)
        self.warehouse = "file://" + os.path.join(self.root, "warehouse")
        self.target_lag_ms = target_lag_ms
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def catalog(self) -> CatalogSettings:
        return CatalogSettings.for_broker((self.data_dir,), None, self.warehouse, 1)

    @property
    def pid(self) -> int:
        assert self.process is not None, "broker not started"
        return self.process.pid

    def start(self, iceberg: bool = True) -> IcebergBroker:
        for stale in ("strom.port", METRICS_URL_FILE):  # a restart must wait for the new ones
            path = os.path.join(self.data_dir, stale)
            if os.path.exists(path):
                os.unlink(path)
        self.process, self.port = start_broker(
            self.data_dir,
            {
                "iceberg.enabled": "true" if iceberg else "false",
                "iceberg.target.lag.ms": str(self.target_lag_ms),
                "iceberg.warehouse": self.warehouse,
                "metrics.listener": "http://127.0.0.1:0",
            },
        )
        return self

    def stop(self) -> None:
        """Stop the broker (its last translation round runs as it shuts down); the data stays."""
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def create_topic(self, name: str, partitions: int, **configs: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        [future] = admin.create_topics([NewTopic(name, partitions, 1, config=configs)], request_timeout=30).values()
        future.result(30)

    def table_offsets(self, topic: str) -> dict[int, int]:
        """Partition -> the next offset the table lacks, from its current snapshot (empty before the
        first commit), as a user's pyiceberg reads it from the broker's catalog."""
        from pyiceberg.exceptions import NoSuchTableError

        catalog_file = self.catalog.uri.removeprefix("sqlite:///")
        if not os.path.exists("/" + catalog_file.lstrip("/")):
            return {}
        try:
            return committed_offsets(open_catalog(self.catalog).load_table(identifier(topic)))
        except NoSuchTableError:
            return {}

    def wait_translated(self, topic: str, ends: dict[int, int], timeout_s: float) -> float:
        """Seconds until the table holds every partition up to ``ends`` (raises after ``timeout_s``)."""
        began = time.monotonic()
        while True:
            held = self.table_offsets(topic)
            if all(held.get(p, 0) >= end for p, end in ends.items()):
                return time.monotonic() - began
            if time.monotonic() - began > timeout_s:
                raise TimeoutError(f"the table of {topic} holds {held}, not {ends}, after {timeout_s:.0f} s")
            time.sleep(0.2)

    def metrics_url(self) -> str:
        path = os.path.join(self.data_dir, METRICS_URL_FILE)
        deadline = time.monotonic() + 30
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the broker wrote no {path} within 30 s")
            time.sleep(0.1)
        with open(path) as handle:
            return handle.read().strip()

    def metric(self, name: str, *labels: str) -> list[float]:
        """The values of the broker's Prometheus metric ``name`` whose labels hold each of ``labels``
        (``'topic="t"'``), as a scrape of its ``/metrics`` reads them."""
        with urllib.request.urlopen(self.metrics_url(), timeout=10) as page:
            text = page.read().decode()
        return [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.split("{", 1)[0].split(" ", 1)[0] == name and all(label in line for label in labels)
        ]

    def lag_records(self, topic: str) -> int | None:
        """The broker's own ``strom_iceberg_translation_lag_records`` summed over ``topic``'s
        partitions; None before its first translation round reported any."""
        values = self.metric(LAG_METRIC, f'topic="{topic}"')
        return int(sum(values)) if values else None


def paced_produce(
    producer,
    topic: str,
    count: int,
    rate: float | None,
    value: Callable[[int], bytes],
    partitions: int,
    on_delivery: Callable | None = None,
    tick_s: float = 0.005,
) -> float:
    """Produce ``count`` messages round robin over ``partitions``, at ``rate`` messages/s in a burst
    every ``tick_s`` (a Python loop cannot pace 20,000 single messages a second one by one), or as
    fast as the producer takes them with ``rate`` None; returns the seconds taken, delivery included."""
    began = time.perf_counter()
    sent = 0
    while sent < count:
        due = count if rate is None else min(count, int((time.perf_counter() - began) * rate) + 1)
        while sent < due:
            try:
                producer.produce(topic, value(sent), partition=sent % partitions, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(tick_s if rate is not None else 0)
    if producer.flush(300) != 0:
        raise TimeoutError(f"{len(producer)} messages not delivered within 300 s")
    return time.perf_counter() - began


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def distinct_value(size: int, seed: int = 31) -> Callable[[int], bytes]:
    """Values of ``size`` bytes that differ record by record: a 12-digit counter, then random bytes.
    Parquet can neither keep them as a few dictionary entries nor compress them away, as it would
    ``b"v" * size``: the table's files are about as large as the values."""
    import random

    randbytes = random.Random(seed).randbytes

    def value(i: int) -> bytes:
        head = b"%012d" % i
        return head + randbytes(size - len(head)) if size > len(head) else head[:size]

    return value
