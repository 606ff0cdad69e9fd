"""Helpers of the Iceberg topic tests: producing records whose fate the test knows, and reading
the table back with pyiceberg's own scan."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from strom.iceberg.table import CatalogSettings, identifier, open_catalog

WAIT_S = 60


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"iceberg.mode": "key_value", **configs}
    futures = admin.create_topics([NewTopic(topic, partitions, replication, config=config)], request_timeout=30)
    futures[topic].result(timeout=30)


def produce(bootstrap: str, topic: str, count: int, prefix: str, **extra) -> dict[tuple[int, int], dict]:
    """``count`` idempotent records with keys and headers, spread over the partitions; returns each
    acknowledged record by (partition, offset)."""
    acked: dict[tuple[int, int], dict] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **extra})

    def done(headers):
        def report(err, msg):
            if err is None:
                acked[(msg.partition(), msg.offset())] = _expected(msg, headers)

        return report

    for i in range(count):
        key = f"{prefix}-k{i % 7}".encode()
        headers = [("i", str(i).encode()), ("h", None)] if i % 3 == 0 else []
        producer.produce(topic, value=f"{prefix}-v{i}".encode(), key=key, headers=headers, on_delivery=done(headers))
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def _expected(msg, headers) -> dict:
    """What the table must hold for a record (a delivery report does not carry the headers)."""
    return {"key": msg.key(), "value": msg.value(), "timestamp": msg.timestamp()[1], "headers": list(headers)}


def transaction(bootstrap: str, topic: str, count: int, prefix: str, commit: bool) -> dict[tuple[int, int], dict]:
    """One transaction of ``count`` records, committed or aborted; returns the records it wrote."""
    written: dict[tuple[int, int], dict] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"ice-{uuid.uuid4()}"})
    producer.init_transactions(30)
    producer.begin_transaction()

    def done(err, msg):
        if err is None:
            written[(msg.partition(), msg.offset())] = _expected(msg, [])

    for i in range(count):
        producer.produce(topic, value=f"{prefix}-v{i}".encode(), key=f"{prefix}-k{i}".encode(), on_delivery=done)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return written


def table_rows(catalog: CatalogSettings, topic: str) -> list[dict]:
    """Every row of the topic's table, through pyiceberg's scan (no table yet: none)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = open_catalog(catalog).load_table(identifier(topic))
    except NoSuchTableError:
        return []
    rows = []
    for row in table.scan().to_arrow().to_pylist():
        kafka = row["kafka"]
        rows.append(
            {
                "partition": kafka["partition"],
                "offset": kafka["offset"],
                "timestamp": int(kafka["timestamp"].timestamp() * 1000),
                "timestamp_type": kafka["timestamp_type"],
                "headers": [(h["key"], h["value"]) for h in kafka["headers"] or []],
                "key": row["key"],
                "value": row["value"],
            }
        )
    return rows


def wait_for_rows(catalog: CatalogSettings, topic: str, expected: int, timeout_s: float = WAIT_S) -> list[dict]:
    """The table's rows once it holds at least ``expected`` of them (bounded)."""
    deadline = time.monotonic() + timeout_s
    rows: list[dict] = []
    while time.monotonic() < deadline:
        try:
            rows = table_rows(catalog, topic)
        except Exception:  # the catalog file may be mid-creation by the broker
            rows = []
        if len(rows) >= expected:
            return rows
        time.sleep(0.2)
    raise AssertionError(f"the table holds {len(rows)} rows after {timeout_s}s, expected {expected}")


def assert_exactly(rows: list[dict], committed: dict[tuple[int, int], dict], aborted: dict[tuple[int, int], dict]):
    """Each committed record in the table once, with its key, value, timestamp and headers; no aborted one."""
    coordinates = [(r["partition"], r["offset"]) for r in rows]
    duplicates = {c for c in coordinates if coordinates.count(c) > 1} if len(set(coordinates)) != len(rows) else set()
    assert not duplicates, f"rows twice in the table: {sorted(duplicates)[:10]}"
    assert not set(coordinates) & set(aborted), "an aborted record is in the table"
    missing = set(committed) - set(coordinates)
    assert not missing, f"{len(missing)} committed records missing, e.g. {sorted(missing)[:10]}"
    extra = set(coordinates) - set(committed)
    assert not extra, f"rows nobody produced: {sorted(extra)[:10]}"
    for row in rows:
        want = committed[(row["partition"], row["offset"])]
        got = {k: row[k] for k in ("key", "value", "timestamp", "headers")}
        assert got == want, (row["partition"], row["offset"], got, want)
