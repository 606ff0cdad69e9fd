"""strom_iceberg_translation_lag_seconds on a real broker's /metrics: 0 while the table holds every
committed record; between two rounds, the wait of the oldest record not in the table yet grows with
the clock; after the round that translates it, 0 again."""

from __future__ import annotations

import time

from tests.iceberg.support import create_topic, produce, wait_for_rows
from tests.iceberg.test_translator import ICEBERG
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

RECORDS = "strom_iceberg_translation_lag_records"
SECONDS = "strom_iceberg_translation_lag_seconds"


def lag(url: str) -> tuple[float, float]:
    found = scrape(url)
    return found.value(RECORDS, topic="aging", partition="0"), found.value(SECONDS, topic="aging", partition="0")


def wait_for_no_lag(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while (found := lag(url)) != (0, 0):
        assert time.monotonic() < deadline, f"lag (records, seconds) still {found} after {timeout_s}s"
        time.sleep(0.3)


def test_the_lag_in_seconds_grows_between_rounds_and_is_0_after_one(iceberg_broker):
    broker, catalog = iceberg_broker({**ICEBERG, "iceberg.target.lag.ms": "8000", **METRICS_ON})
    create_topic(broker.bootstrap, "aging", 1)
    committed = produce(broker.bootstrap, "aging", 30, "a")
    wait_for_rows(catalog, "aging", len(committed))
    url = metrics_url(broker.data_dir)
    wait_for_no_lag(url)
    for attempt in range(4):  # a round may fall between the two scrapes: then produce again
        committed |= produce(broker.bootstrap, "aging", 30, f"b{attempt}")
        records_1, seconds_1 = lag(url)
        time.sleep(2.0)
        records_2, seconds_2 = lag(url)
        if records_1 == records_2 > 0:
            assert seconds_2 >= seconds_1 + 1.9, (seconds_1, seconds_2)
            break
        wait_for_no_lag(url)
    else:
        raise AssertionError("every attempt had a translation round between its two scrapes")
    wait_for_rows(catalog, "aging", len(committed))
    wait_for_no_lag(url)
