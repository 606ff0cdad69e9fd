"""An Iceberg topic's page in the console, in a real browser: the table and each partition's
translation lag, as the brokers' catalog and offsets say (``strom iceberg status``'s view)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.broker_process import BrokerProcess
from tests.iceberg.support import create_topic, produce
from tests.iceberg.test_translator import ICEBERG


@pytest.fixture(scope="module")
def cluster_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # a target lag of ten minutes: nothing is translated while the test runs, so the lag is known
    overrides = {**ICEBERG, "iceberg.target.lag.ms": "600000"}
    with BrokerProcess(tmp_path_factory.mktemp("console-iceberg") / "data", overrides) as process:
        yield process


def test_an_iceberg_topic_shows_its_table_and_lag(page: Page, cluster_broker: BrokerProcess) -> None:
    create_topic(cluster_broker.bootstrap, "clicks", 2)
    acked = produce(cluster_broker.bootstrap, "clicks", 40, "a")
    per_partition = {p: sum(1 for q, _ in acked if q == p) for p in (0, 1)}

    page.goto("/topics/clicks")
    expect(page.locator("#iceberg-table")).to_have_text("key_value · no table yet")
    for partition, count in per_partition.items():
        row = page.locator(f"#iceberg-lag tr[data-partition='{partition}']")
        expect(row.locator(".lag-records")).to_have_text(str(count))
        expect(row.locator(".lag-seconds")).to_have_text(re.compile(r"^\d+\.\d$" if count else r"^-$"))
