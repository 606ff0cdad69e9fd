"""Orphan files of an Iceberg topic's tables (strom.iceberg.orphan_files), on a real broker: a file
planted in a table's data directory that no metadata references, older than the topic's
``iceberg.orphan.files.older.than.ms`` (its mtime set with os.utime), is deleted by the periodic
maintenance and by ``strom iceberg remove-orphan-files``; a fresh one is not (a writer's file
not committed yet), nor anything a snapshot references: every committed row still reads back.
A deleted topic's table is purged through a REST catalog as through the SQL one
(tests/iceberg/test_translator.py)."""

from __future__ import annotations

import os
import time
from urllib.parse import urlparse

import pytest
from confluent_kafka.admin import AdminClient

from strom.iceberg.table import identifier, open_catalog
from tests.broker_process import BrokerProcess
from tests.cli.test_iceberg_cli import strom_iceberg
from tests.iceberg.support import assert_exactly, create_topic, produce, table_rows, wait_for_rows
from tests.iceberg.test_maintenance import set_topic_config
from tests.iceberg.test_translator import ICEBERG, catalog_of
from tests.metrics.conftest import METRICS_ON, metrics_url, scrape

NOT_COMMITTED = b"not committed"


def files_under(location: str) -> list[str]:
    """The files under a table's location (a file:// URI), relative to it, sorted."""
    root = urlparse(location).path
    found = []
    for directory, _, names in os.walk(root):
        found += [os.path.relpath(os.path.join(directory, name), root) for name in names]
    return sorted(found)


def plant(location: str, relative: str, age_s: float) -> str:
    """A file no metadata references under a table's location, last modified ``age_s`` ago."""
    path = os.path.join(urlparse(location).path, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(NOT_COMMITTED)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


HOUR_S = 3600


def committed_rounds(broker, data, topic: str, rounds: int = 3) -> dict:
    """``rounds`` translation rounds' worth of records, each in the table before the next is sent."""
    committed: dict = {}
    for round_ in range(rounds):
        committed |= produce(broker.bootstrap, topic, 30, f"{topic}{round_}")
        wait_for_rows(catalog_of(data), topic, len(committed))
    return committed


def referenced_files(data, topic: str) -> set[str]:
    """What the table's metadata references (relative to its location), read with pyiceberg."""
    table = open_catalog(catalog_of(data)).load_table(identifier(topic))
    root = urlparse(table.location()).path
    paths = {table.metadata_location, *(m.metadata_file for m in table.metadata.metadata_log)}
    for snapshot in table.metadata.snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            paths.add(manifest.manifest_path)
            paths |= {e.data_file.file_path for e in manifest.fetch_manifest_entry(table.io, discard_deleted=False)}
    return {os.path.relpath(urlparse(p).path, root) for p in paths}


def test_the_maintenance_deletes_orphans_older_than_the_margin_and_nothing_else(iceberg_broker):
    broker, catalog = iceberg_broker({**ICEBERG, **METRICS_ON})
    create_topic(
        broker.bootstrap,
        "littered",
        2,
        **{
            "iceberg.maintenance.interval.ms": str(HOUR_S * 1000),  # none until the files are planted
            "iceberg.compaction.enabled": "false",
            "iceberg.orphan.files.older.than.ms": str(HOUR_S * 1000),
        },
    )
    committed = committed_rounds(broker, broker.data_dir, "littered")
    location = open_catalog(catalog).load_table(identifier("littered")).location()
    old = [
        plant(location, "data/lost-commit.parquet", age_s=2 * HOUR_S),
        plant(location, "data/kafka_hour=2026-01-01-00/dead-worker.parquet", age_s=2 * HOUR_S),
        plant(location, "metadata/99999-lost.metadata.json", age_s=2 * HOUR_S),
    ]
    fresh = plant(location, "data/not-committed-yet.parquet", age_s=60)  # a writer's, before its commit
    live = referenced_files(broker.data_dir, "littered")
    assert live <= set(files_under(location))
    set_topic_config(broker.bootstrap, "littered", "iceberg.maintenance.interval.ms", "500")
    deadline = time.monotonic() + 60
    while any(os.path.exists(path) for path in old):
        assert time.monotonic() < deadline, [p for p in old if os.path.exists(p)]
        time.sleep(0.2)
    assert os.path.exists(fresh), "a file younger than the margin is never an orphan"
    assert live <= set(files_under(location)), "every referenced file is still there"
    time.sleep(1.5)  # more maintenance runs: nothing else goes
    assert set(files_under(location)) == referenced_files(broker.data_dir, "littered") | {
        "data/not-committed-yet.parquet"
    }
    assert_exactly(table_rows(catalog, "littered"), committed, {})
    deadline = time.monotonic() + 30  # counted once the worker's run returned (the files go first)
    while (found := scrape(metrics_url(broker.data_dir))).value(
        "strom_iceberg_files_deleted_total", topic="littered", kind="orphan"
    ) != 3:
        assert time.monotonic() < deadline, found.samples.get("strom_iceberg_files_deleted_total")
        time.sleep(0.2)
    assert found.value("strom_iceberg_deleted_orphan_bytes_total", topic="littered") == 3 * len(NOT_COMMITTED)
    assert "3 orphan files (39 bytes) no metadata referenced deleted" in broker.read_log()


def test_remove_orphan_files_command_with_dry_run(iceberg_broker):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "swept", 1, **{"iceberg.orphan.files.older.than.ms": "-1"})
    committed = committed_rounds(broker, broker.data_dir, "swept", rounds=2)
    table = open_catalog(catalog).load_table(identifier("swept"))
    old = plant(table.location(), "data/lost-commit.parquet", age_s=2 * HOUR_S)
    fresh = plant(table.location(), "data/not-committed-yet.parquet", age_s=60)
    margin = ("--older-than-ms", str(HOUR_S * 1000))

    dry = strom_iceberg(broker, "remove-orphan-files", "--topic", "swept", *margin, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        f"would delete file://{old}",
        f"1 orphan files ({len(NOT_COMMITTED)} bytes) older than 3600000 ms would be deleted (dry run) "
        "from the tables of swept",
    ]
    assert os.path.exists(old) and os.path.exists(fresh)

    done = strom_iceberg(broker, "remove-orphan-files", "--topic", "swept", *margin)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"deleted file://{old}"
    assert not os.path.exists(old) and os.path.exists(fresh)
    # the topic's own margin (-1: its periodic pass is off) leaves the command Iceberg's 3 days
    again = strom_iceberg(broker, "remove-orphan-files", "--topic", "swept")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        f"0 orphan files (0 bytes) older than {3 * 24 * HOUR_S * 1000} ms deleted from the tables of swept"
    ]
    assert_exactly(table_rows(catalog, "swept"), committed, {})

    refused = strom_iceberg(broker, "remove-orphan-files")
    assert refused.returncode == 1 and "remove-orphan-files needs --topic" in refused.stderr
    refused = strom_iceberg(broker, "remove-orphan-files", "--topic", "swept", "--older-than-ms", "-5")
    assert refused.returncode == 1 and "--older-than-ms must be at least 0, not -5" in refused.stderr


def test_a_deleted_topics_table_is_purged_through_a_rest_catalog_too(tmp_path):
    """iceberg.catalog.type=rest (the broker's own REST catalog): the drop goes through the catalog
    and the purge through the table's file IO, so no file of the table is left either."""
    from pyiceberg.exceptions import NoSuchTableError

    from strom.cluster.zookeeper_server import free_port
    from strom.iceberg.table import CatalogSettings

    url = f"http://127.0.0.1:{free_port()}"
    config = {**ICEBERG, "iceberg.rest.catalog.listeners": url, "iceberg.catalog.type": "rest"}
    with BrokerProcess(tmp_path / "data", {**config, "iceberg.rest.catalog.uri": url}) as broker:
        create_topic(broker.bootstrap, "restful", 2)
        catalog = CatalogSettings.for_rest(url)
        committed = committed_rounds(broker, tmp_path / "data", "restful", rounds=2)
        wait_for_rows(catalog, "restful", len(committed))
        location = open_catalog(catalog).load_table(identifier("restful")).location()
        assert len(files_under(location)) >= 6
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.delete_topics(["restful"], operation_timeout=30).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while files_under(location) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert files_under(location) == []
        with pytest.raises(NoSuchTableError):
            open_catalog(catalog).load_table(identifier("restful"))
        # logged once the worker's purge returned (the files go first)
        while "topic restful was deleted, and its table with it" not in broker.read_log():
            assert time.monotonic() < deadline + 30, "the purge logged"
            time.sleep(0.2)
    assert "topic restful was deleted, and its table with it (iceberg.delete=true): " in broker.read_log()
