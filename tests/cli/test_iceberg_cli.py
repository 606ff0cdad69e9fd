"""``strom iceberg list|status`` against real brokers keeping Iceberg tables: each table's location,
snapshot and rows, and each partition's translation lag in records and seconds, as pyiceberg and
the brokers' offsets say."""

from __future__ import annotations

import re
import subprocess
import sys

from confluent_kafka.admin import AdminClient, NewTopic

from strom.iceberg.table import identifier, open_catalog
from tests.broker_process import BrokerProcess
from tests.iceberg.support import create_topic, produce, wait_for_rows
from tests.iceberg.test_translator import ICEBERG, catalog_of


def strom_iceberg(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "iceberg", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def rows_of(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()[1:]]


def test_list_and_status_of_a_table_that_caught_up(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data, ICEBERG) as broker:
        create_topic(broker.bootstrap, "orders", 2)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
        committed = produce(broker.bootstrap, "orders", 120, "a")
        wait_for_rows(catalog_of(data), "orders", len(committed))
        table = open_catalog(catalog_of(data)).load_table(identifier("orders"))

        listed = strom_iceberg(broker, "list")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[0].split() == ["TOPIC", "MODE", "SNAPSHOT", "ROWS", "LOCATION"]
        assert rows_of(listed.stdout) == [
            ["orders", "key_value", str(table.current_snapshot().snapshot_id), "120", table.location()]
        ]  # the plain topic is no Iceberg topic

        status = strom_iceberg(broker, "status", "--topic", "orders")
        assert status.returncode == 0, status.stderr
        ends = {p: 1 + max(o for q, o in committed if q == p) for p in (0, 1)}
        assert rows_of(status.stdout) == [["orders", str(p), str(ends[p]), str(ends[p]), "0", "-"] for p in (0, 1)], (
            status.stdout
        )

        # strom topics --describe adds the lag to an Iceberg topic's partitions, and nothing to others'
        described = subprocess.run(
            [sys.executable, "-m", "strom.cli.main", "topics", "--bootstrap-server", broker.bootstrap, "--describe"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert described.returncode == 0, described.stderr
        partition_lines = [line for line in described.stdout.splitlines() if "\tPartition: " in line]
        assert [line.split("\t")[-1] for line in partition_lines if "Topic: orders" in line] == ["IcebergLag: 0"] * 2
        assert [line.endswith("LastKnownElr: N/A") for line in partition_lines if "Topic: plain" in line] == [True]

        refused = strom_iceberg(broker, "status", "--topic", "plain")
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == "Error: topic plain is not an Iceberg topic (its iceberg.mode is disabled)\n"
        elsewhere = strom_iceberg(broker, "list", "--catalog-uri", f"sqlite:///{tmp_path}/none/catalog.db")
        assert elsewhere.returncode == 1
        assert elsewhere.stderr.startswith(f"Error: no Iceberg catalog at sqlite:///{tmp_path}/none/catalog.db")


def test_status_of_a_table_behind_its_log_counts_records_and_seconds(tmp_path):
    # a target lag of ten minutes: nothing is translated while the test runs
    with BrokerProcess(tmp_path / "data", {**ICEBERG, "iceberg.target.lag.ms": "600000"}) as broker:
        create_topic(broker.bootstrap, "slow", 1)
        produce(broker.bootstrap, "slow", 30, "a")
        # the table of a topic that was never translated: no snapshot yet
        listed = strom_iceberg(broker, "list")
        assert listed.returncode == 0, listed.stderr
        assert rows_of(listed.stdout) == [["slow", "key_value", "-", "0", "-", "(no", "table", "yet)"]]
        status = strom_iceberg(broker, "status")
        assert status.returncode == 0, status.stderr
        [row] = rows_of(status.stdout)
        assert row[:5] == ["slow", "0", "0", "30", "30"], status.stdout
        assert re.fullmatch(r"\d+\.\d", row[5]) and 0 <= float(row[5]) < 120, row
        described = subprocess.run(
            [sys.executable, "-m", "strom.cli.main", "topics", "--bootstrap-server", broker.bootstrap]
            + ["--describe", "--topic", "slow"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert re.search(r"\tPartition: 0\t.*\tIcebergLag: 30 \(\d+\.\d s\)$", described.stdout, re.M), described
