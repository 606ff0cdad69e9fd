"""Helpers of the Iceberg schema-mode tests: Avro records produced with confluent-kafka's
AvroSerializer (two versions of one schema), records that cannot be translated, and both tables
read back with pyiceberg's scan."""

from __future__ import annotations

import datetime
import decimal
import json
import struct
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from strom.iceberg.table import CatalogSettings, dlq_identifier, identifier, open_catalog

WAIT_S = 60
UNKNOWN_ID = 987654

# ten fields: every kind the mapping knows (record, array, map, enum, optional, logical types)
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "price", "type": "float"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attributes", "type": {"type": "map", "values": "long"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [{"name": "name", "type": "string"}, {"name": "vip", "type": "boolean"}],
            },
        },
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}
# a compatible version: a new optional field, int widened to long and float to double
ORDER_V2 = {
    **ORDER_V1,
    "fields": [
        {**f, "type": {"int": "long", "float": "double"}.get(f["type"], f["type"])} if isinstance(f["type"], str) else f
        for f in ORDER_V1["fields"]
    ]
    + [{"name": "coupon", "type": ["null", "string"], "default": None}],
}


def order(i: int, version: int) -> dict:
    value = {
        "id": f"o-{version}-{i}",
        "quantity": i if version == 1 else 2**40 + i,
        "price": 0.5 * i,
        "tags": [f"t{i % 3}", "x"],
        "attributes": {"w": i},
        "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "customer": {"name": f"c{i % 5}", "vip": i % 2 == 0},
        "note": None if i % 4 else f"note {i}",
        "day": datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 30),
        "placed": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=i),
        "amount": decimal.Decimal(i) / 100,
        "ref": uuid.UUID(int=i + 1),
    }
    if version == 2:
        value["coupon"] = f"c-{i}"
    return value


def registry_url(data_dir) -> str:
    return (data_dir / "strom.schema-registry").read_text().strip()


class AvroProducer:
    """An idempotent producer of Avro values through confluent-kafka's AvroSerializer, remembering
    what each acknowledged (partition, offset) holds: a decoded dict, or the reason it is bad."""

    def __init__(self, bootstrap: str, url: str, topic: str, registry: dict | None = None, **extra):
        self.topic, self.bootstrap, self.extra = topic, bootstrap, extra
        self.client = SchemaRegistryClient({"url": url, **(registry or {})})
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **extra})
        self.good: dict[tuple[int, int], dict] = {}
        self.bad: dict[tuple[int, int], tuple[bytes | None, str]] = {}
        self.aborted: set[tuple[int, int]] = set()  # written in aborted transactions: in neither table
        self.serializers = {v: AvroSerializer(self.client, json.dumps(s)) for v, s in ((1, ORDER_V1), (2, ORDER_V2))}

    def _send(self, value: bytes | None, key: bytes, on_ack) -> None:
        def report(err, msg):
            if err is None:
                on_ack((msg.partition(), msg.offset()))

        self.producer.produce(self.topic, value=value, key=key, on_delivery=report)
        self.producer.poll(0)

    def orders(self, count: int, version: int, start: int = 0) -> None:
        context = SerializationContext(self.topic, MessageField.VALUE)
        for i in range(start, start + count):
            value = order(i, version)
            encoded = self.serializers[version](value, context)
            self._send(encoded, f"k{i}".encode(), lambda at, v=value, ver=version: self.good.__setitem__(at, (v, ver)))

    def bad_records(self, schema_id: int) -> None:
        """One record of each kind that cannot be translated."""
        cases = [
            (b"plain text, no prefix", "no schema id prefix"),
            (None, "null value: no schema id prefix"),
            (b"\x00" + struct.pack(">I", UNKNOWN_ID) + b"\x02a", f"unknown schema id {UNKNOWN_ID}"),
            (b"\x00" + struct.pack(">I", schema_id) + b"\x08ab", f"bytes do not decode with schema id {schema_id}"),
        ]
        for i, (value, reason) in enumerate(cases):
            self._send(value, f"bad{i}".encode(), lambda at, v=value, r=reason: self.bad.__setitem__(at, (v, r)))

    def flush(self) -> None:
        assert self.producer.flush(30) == 0

    def transaction(self, commit: bool, count: int, version: int, start: int, schema_id: int) -> None:
        """``count`` orders and the bad records in one transaction, committed or aborted."""
        plain, good, bad = self.producer, self.good, self.bad
        self.producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": f"avro-{uuid.uuid4()}", **self.extra}
        )
        self.good, self.bad = {}, {}
        try:
            self.producer.init_transactions(30)
            self.producer.begin_transaction()
            self.orders(count, version, start)
            self.bad_records(schema_id)
            self.flush()
            if commit:
                self.producer.commit_transaction(30)
                good |= self.good
                bad |= self.bad
            else:
                self.producer.abort_transaction(30)
                self.aborted |= set(self.good) | set(self.bad)
        finally:
            self.producer, self.good, self.bad = plain, good, bad


def scan(catalog: CatalogSettings, name: tuple[str, str]) -> list[dict]:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = open_catalog(catalog).load_table(name)
    except NoSuchTableError:
        return []
    return table.scan().to_arrow().to_pylist()


def wait_for_tables(catalog: CatalogSettings, topic: str, rows: int, dead: int, timeout_s: float = WAIT_S):
    """(table rows, dead-letter rows) once they hold at least that many (bounded)."""
    deadline = time.monotonic() + timeout_s
    found: tuple[list, list] = ([], [])
    while time.monotonic() < deadline:
        try:
            found = (scan(catalog, identifier(topic)), scan(catalog, dlq_identifier(topic)))
        except Exception:  # the catalog may be mid-creation by a broker
            found = ([], [])
        if len(found[0]) >= rows and len(found[1]) >= dead:
            return found
        time.sleep(0.3)
    raise AssertionError(f"{len(found[0])} rows and {len(found[1])} dead letters after {timeout_s}s: {rows}, {dead}")


def coordinates(rows: list[dict]) -> list[tuple[int, int]]:
    return [(r["kafka"]["partition"], r["kafka"]["offset"]) for r in rows]


def assert_exactly_once(rows: list[dict], dead: list[dict], producer: AvroProducer, latest: bool = False) -> None:
    """Each good record in the table once with its values (nulls where its version lacks a
    column), each bad one in the dead-letter table once with its raw value and reason."""
    at = coordinates(rows)
    assert len(set(at)) == len(at), "a record twice in the table"
    assert set(at) == set(producer.good), (set(producer.good) - set(at), set(at) - set(producer.good))
    assert not (set(at) | set(coordinates(dead))) & producer.aborted, "an aborted record in a table"
    dead_at = coordinates(dead)
    assert len(set(dead_at)) == len(dead_at), "a record twice in the dead-letter table"
    assert set(dead_at) == set(producer.bad), (set(producer.bad) - set(dead_at), set(dead_at) - set(producer.bad))
    for row in rows:
        want, version = producer.good[(row["kafka"]["partition"], row["kafka"]["offset"])]
        got = {k: row[k] for k in want}
        assert got["id"] == want["id"] and got["quantity"] == want["quantity"], (got, want)
        assert got["price"] == want["price"] and got["tags"] == want["tags"]
        assert dict(got["attributes"]) == want["attributes"] and got["status"] == want["status"]
        assert got["customer"] == want["customer"] and got["note"] == want["note"]
        assert got["day"] == want["day"] and got["placed"] == want["placed"] and got["amount"] == want["amount"]
        assert got["ref"] == str(want["ref"])
        assert row["coupon"] == want.get("coupon"), row
        assert row["key"] == f"k{want['id'].rsplit('-', 1)[1]}".encode()
    for row in dead:
        value, reason = producer.bad[(row["kafka"]["partition"], row["kafka"]["offset"])]
        assert row["value"] == value and row["reason"].startswith(reason), (row["reason"], reason)
