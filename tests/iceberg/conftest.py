"""The Iceberg topic tests' broker: ``iceberg_broker`` starts one translating its Iceberg topics into
the SQL catalog in its log dir, as most of these tests (and the Spark tests of read_topic) use it."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from strom.iceberg.table import CatalogSettings
from tests.broker_process import BrokerProcess
from tests.iceberg.test_translator import catalog_of


class IcebergBroker(NamedTuple):
    broker: BrokerProcess
    catalog: CatalogSettings  # the catalog the broker translates into (``catalog_of`` its log dir)


@pytest.fixture
def iceberg_broker(tmp_path):
    """Call with a broker config (Iceberg on): a broker started on tmp_path/data and the catalog
    beside it; unpacks as (broker, catalog). A test may stop and start the broker again (its data
    dir is ``broker.data_dir``); it is stopped after the test."""
    started: list[BrokerProcess] = []

    def start(config: dict[str, str]) -> IcebergBroker:
        assert not started, "one iceberg_broker a test: tmp_path/data is its log dir"
        data = tmp_path / "data"
        started.append(BrokerProcess(data, config).start())
        return IcebergBroker(started[-1], catalog_of(data))

    yield start
    for broker in started:
        broker.stop()
