"""The Iceberg chaos run's producers, what they were told, and the check of the tables against it.

Two confluent-kafka producers write to one Iceberg topic at the same time: an idempotent acks=all
one (keys ``i<n>``) and a transactional one (keys ``t<txn>-<i>``, ten records a transaction,
every fourth transaction aborted on purpose). Every key is unique, so a row of the table names
the record it came from even where no delivery report gave its offset. The ``Ledger`` keeps what
each producer was told: the (partition, offset) of every acknowledged record with the bytes it
sent, the records of committed and aborted transactions, and the ones whose fate is unknown (a
delivery that failed, a commit whose answer never came).

In ``value_schema_id_prefix`` mode the values are Avro in Confluent's wire format, written with
two compatible versions of one schema (``VALUE_V2`` adds an optional column and widens ``n`` to
long), and one record in ten is bad in one of four ways (no prefix, a null value, an unknown
schema id, bytes that do not decode): each must land in ``<topic>~dlq`` with its reason.

``check`` reads both tables with pyiceberg's own scan and says what a user would notice: rows
twice, acknowledged or committed records missing or holding other bytes, aborted records, rows
nobody produced (a control record, say), a transaction of unknown outcome only partly present.
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from strom.chaos.txn import COMMIT_DEADLINE_S, REPLACE, abandon, end_transaction, initialised
from strom.chaos.workload import client_logging

TXN_SIZE = 10
TRANSACTIONAL_ID = "iceberg-chaos-txn"
ABORT_EVERY = 4
BAD_EVERY = 10  # schema mode: one record in ten cannot be translated
UNKNOWN_ID = 987654
INTERVAL_S = 1.0 / 150  # the idempotent producer's pace

VALUE_V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "chaos",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "n", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
# compatible (BACKWARD): a new optional column, int widened to long
VALUE_V2 = {
    **VALUE_V1,
    "fields": [
        VALUE_V1["fields"][0],
        {"name": "n", "type": "long"},
        VALUE_V1["fields"][2],
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}
COLUMNS = ("id", "n", "note", "coupon")
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

Coordinate = tuple[int, int]


@dataclass
class Sent:
    """One record as produced and what its row must hold: ``content`` is the value's bytes
    (key_value), the decoded columns (a good Avro record) or (raw value, reason) for the DLQ."""

    key: bytes
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    content: Any
    dead: bool = False  # goes to <topic>~dlq
    timestamp: int = -1  # the record's CreateTime, from its delivery report


class Values:
    """Makes the records of one mode: every one's bytes, and what its row must hold."""

    def __init__(self, mode: str, schema_ids: tuple[int, int] | None = None):
        self.mode = mode
        self.schema_ids = schema_ids
        if mode == "value_schema_id_prefix":
            from fastavro import parse_schema

            assert schema_ids is not None, "the schema mode needs both versions' ids"
            self._parsed = {1: parse_schema(VALUE_V1), 2: parse_schema(VALUE_V2)}

    def make(self, key: str, n: int) -> Sent:
        headers: list[tuple[str, bytes | None]] = [("n", str(n).encode()), ("empty", None)] if n % 5 == 0 else []
        if self.mode == "key_value":
            value = f"{key}:value".encode()
            return Sent(key.encode(), value, headers, value)
        if n % BAD_EVERY == BAD_EVERY - 1:
            bad, reason = self._bad(key, n // BAD_EVERY)
            return Sent(key.encode(), bad, headers, (bad, reason), dead=True)
        from fastavro import schemaless_writer

        assert self.schema_ids is not None
        version = 1 + (n // 3) % 2
        record = {"id": key, "n": n if version == 1 else 2**40 + n, "note": None if n % 4 else f"note {n}"}
        if version == 2:
            record["coupon"] = f"c{n}"
        out = io.BytesIO()
        out.write(struct.pack(">bI", 0, self.schema_ids[version - 1]))
        schemaless_writer(out, self._parsed[version], record)
        return Sent(key.encode(), out.getvalue(), headers, {c: record.get(c) for c in COLUMNS})

    def _bad(self, key: str, which: int) -> tuple[bytes | None, str]:
        assert self.schema_ids is not None
        v1 = self.schema_ids[0]
        cases: list[tuple[bytes | None, str]] = [
            (f"plain text {key}".encode(), "no schema id prefix"),
            (None, "null value: no schema id prefix"),
            (b"\x00" + struct.pack(">I", UNKNOWN_ID) + key.encode(), f"unknown schema id {UNKNOWN_ID}"),
            # a string of length 4 with 2 bytes left: v1's first field cannot be read
            (b"\x00" + struct.pack(">I", v1) + b"\x08ab", f"bytes do not decode with schema id {v1}"),
        ]
        return cases[which % len(cases)]


@dataclass
class Ledger:
    """What the producers were told; filled from their threads, read once they have stopped."""

    acked: dict[Coordinate, Sent] = field(default_factory=dict)  # idempotent, acknowledged
    failed: dict[bytes, Sent] = field(default_factory=dict)  # idempotent, delivery failed: may have landed
    committed: dict[Coordinate, Sent] = field(default_factory=dict)  # records of committed transactions
    aborted: dict[bytes, Coordinate | None] = field(default_factory=dict)  # key -> where it was written, if known
    unknown: dict[str, dict[bytes, Coordinate | None]] = field(default_factory=dict)  # txn -> its records
    transactions: dict[str, int] = field(default_factory=lambda: {"committed": 0, "aborted": 0, "unknown": 0})
    fatal: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def expected(self) -> dict[Coordinate, Sent]:
        """Every record the tables must hold: acknowledged, or in a committed transaction."""
        return {**self.acked, **self.committed}


def _producer(config: dict, client: dict, logger, fatal: list | None = None):
    from confluent_kafka import Producer

    extra = {} if fatal is None else {"error_cb": lambda e: fatal.append(e) if e.fatal() else None}
    return Producer(
        {
            **config,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "request.timeout.ms": 10000,
            "retry.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
            **client_logging(logger),
            **extra,
            **client,
        }
    )


class Writers:
    """Both producers on threads of their own, writing until ``stop()``."""

    def __init__(self, bootstrap: str, topic: str, values: Values, client: dict | None = None, loggers=(None, None)):
        self.bootstrap, self.topic, self.values = bootstrap, topic, values
        self.client = dict(client or {})
        self.ledger = Ledger()
        self.loggers = loggers
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._idempotent, name="iceberg-chaos-idempotent", daemon=True),
            threading.Thread(target=self._transactional, name="iceberg-chaos-txn", daemon=True),
        ]
        self.errors: list[BaseException] = []

    def start(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, drain_s: float = 90.0) -> Ledger:
        self._stop.set()
        for thread in self._threads:
            thread.join(drain_s + 10)
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive or self.errors:
            raise RuntimeError(f"producers did not finish: still running {alive}, errors {self.errors[:2]}")
        return self.ledger

    def _guarded(self, body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as exc:  # reported by stop(): a run whose writer died cannot be checked
            self.errors.append(exc)

    # -- the idempotent producer -------------------------------------------------------------------
    def _idempotent(self) -> None:
        self._guarded(self._run_idempotent)

    def _run_idempotent(self) -> None:
        from confluent_kafka import KafkaException

        ledger = self.ledger
        fatal: list[Any] = []
        config = {"bootstrap.servers": self.bootstrap, "enable.idempotence": True}
        producer = _producer(config, self.client, self.loggers[0], fatal)
        retired = []

        def report(sent: Sent):
            def done(err, msg) -> None:
                sent.timestamp = msg.timestamp()[1]
                with ledger.lock:
                    if err is None:
                        ledger.acked[(msg.partition(), msg.offset())] = sent
                    else:
                        ledger.failed[sent.key] = sent

            return done

        n = 0
        while not self._stop.is_set():
            sent = self.values.make(f"i{n}", n)
            try:
                producer.produce(self.topic, sent.value, key=sent.key, headers=sent.headers, on_delivery=report(sent))
                n += 1
            except BufferError:
                pass
            except KafkaException as exc:
                fatal.append(exc.args[0])
            producer.poll(INTERVAL_S)
            if fatal:  # a new producer id goes on; the old one's last reports are still taken
                with ledger.lock:
                    ledger.fatal.append(f"idempotent producer at i{n}: {fatal[0]}")
                fatal.clear()
                retired.append(producer)
                producer.flush(10)
                producer = _producer(config, self.client, self.loggers[0], fatal)
                n += 1
        producer.flush(60)
        for old in retired:
            old.flush(0)

    # -- the transactional producer ----------------------------------------------------------------
    def _transactional(self) -> None:
        self._guarded(self._run_transactional)

    def _new_transactional(self):
        config = {"bootstrap.servers": self.bootstrap, "transactional.id": TRANSACTIONAL_ID}
        return initialised(lambda: _producer({**config, "transaction.timeout.ms": 60000}, self.client, self.loggers[1]))

    def _run_transactional(self) -> None:
        producer = self._new_transactional()
        txn = 0
        while not self._stop.is_set():
            written: dict[bytes, tuple[Sent, Coordinate | None]] = {}
            outcome = self._one(producer, txn, written)
            if outcome.endswith(REPLACE):  # the producer cannot go on: InitProducerId of a new one fences it
                outcome = outcome.removesuffix(REPLACE)
                producer = self._new_transactional()
            self._settle(f"t{txn}", outcome, written)
            txn += 1
        producer.flush(30)

    def _settle(self, txn: str, outcome: str, written: dict[bytes, tuple[Sent, Coordinate | None]]) -> None:
        ledger = self.ledger
        with ledger.lock:
            ledger.transactions[outcome] += 1
            if outcome == "committed":
                for key, (sent, at) in written.items():
                    if at is None:  # a commit that succeeded had every record acknowledged
                        ledger.fatal.append(f"{txn} committed without a delivery report of {key!r}")
                        ledger.unknown.setdefault(txn, {})[key] = None
                    else:
                        ledger.committed[at] = sent
            elif outcome == "aborted":
                ledger.aborted.update({key: at for key, (_, at) in written.items()})
            else:
                ledger.unknown[txn] = {key: at for key, (_, at) in written.items()}

    def _one(self, producer, txn: int, written: dict[bytes, tuple[Sent, Coordinate | None]]) -> str:
        """One transaction; its outcome, ending in REPLACE when the producer must be replaced."""
        from confluent_kafka import KafkaException

        def report(sent: Sent):
            def done(err, msg) -> None:
                sent.timestamp = msg.timestamp()[1]
                if err is None:
                    written[sent.key] = (sent, (msg.partition(), msg.offset()))

            return done

        try:
            producer.begin_transaction()
            for i in range(TXN_SIZE):
                sent = self.values.make(f"t{txn}-{i}", txn * TXN_SIZE + i)
                written[sent.key] = (sent, None)
                while True:
                    try:
                        producer.produce(
                            self.topic, sent.value, key=sent.key, headers=sent.headers, on_delivery=report(sent)
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
            producer.flush(COMMIT_DEADLINE_S)  # every delivery report served before the outcome is settled
        except KafkaException as exc:
            return abandon(producer, exc, commit_sent=False)
        return end_transaction(producer, commit=txn % ABORT_EVERY != ABORT_EVERY - 1)


@dataclass
class Row:
    partition: int
    offset: int
    key: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]]
    content: Any
    dead: bool


def read_tables(catalog, topic: str, mode: str) -> list[Row]:
    """Every row of the topic's table and of its dead-letter table, through pyiceberg's scan."""
    from pyiceberg.exceptions import NoSuchTableError

    from strom.iceberg.table import dlq_identifier, identifier, open_catalog

    opened = open_catalog(catalog)
    rows = []
    for name, dead in ((identifier(topic), False), (dlq_identifier(topic), True)):
        try:
            table = opened.load_table(name)
        except NoSuchTableError:
            continue
        for row in table.scan().to_arrow().to_pylist():
            kafka = row["kafka"]
            if dead:
                content: Any = (row["value"], row["reason"])
            elif mode == "key_value":
                content = row["value"]
            else:
                content = {c: row.get(c) for c in COLUMNS}
            stamp = kafka["timestamp"]
            stamp = stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=datetime.UTC)
            rows.append(
                Row(
                    kafka["partition"],
                    kafka["offset"],
                    row["key"],
                    (stamp - EPOCH) // datetime.timedelta(milliseconds=1),
                    [(h["key"], h["value"]) for h in kafka["headers"] or []],
                    content,
                    dead,
                )
            )
    return rows


@dataclass
class Verdict:
    acknowledged: int
    failed: int  # idempotent deliveries that failed (their records may or may not be in the table)
    txn_committed: int  # records of committed transactions
    txn_aborted: int  # records of aborted transactions
    transactions: dict[str, int]
    rows: int
    dlq_rows: int
    duplicates: list[Coordinate] = field(default_factory=list)
    missing: list[Coordinate] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # a row whose bytes, table or reason differ from what was sent
    aborted_in_table: list[Coordinate] = field(default_factory=list)
    strangers: list[Coordinate] = field(default_factory=list)  # rows nobody produced: a control record, say
    partial_unknown: list[str] = field(default_factory=list)  # a transaction of unknown outcome partly present
    failed_landed: int = 0  # failed deliveries whose records are in the table: allowed
    unknown_landed: int = 0  # transactions of unknown outcome present whole: allowed
    fatal: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.duplicates
            or self.missing
            or self.wrong
            or self.aborted_in_table
            or self.strangers
            or self.partial_unknown
        )

    def summary(self) -> str:
        t = self.transactions
        return (
            f"acknowledged {self.acknowledged} (failed {self.failed}, {self.failed_landed} of them landed), "
            f"transactions committed {t['committed']} ({self.txn_committed} records) aborted {t['aborted']} "
            f"({self.txn_aborted} records) unknown {t['unknown']} ({self.unknown_landed} landed whole); "
            f"rows in table {self.rows}, dlq rows {self.dlq_rows}; duplicates {len(self.duplicates)}, "
            f"missing {len(self.missing)}, wrong {len(self.wrong)}, aborted in table {len(self.aborted_in_table)}, "
            f"strangers {len(self.strangers)}, unknown transactions partly present {len(self.partial_unknown)}"
        )

    def details(self) -> list[str]:
        lines = []
        for name in ("duplicates", "missing", "wrong", "aborted_in_table", "strangers", "partial_unknown", "fatal"):
            items = getattr(self, name)
            if items:
                lines.append(f"{name}: {sorted(items)[:10]}{' ...' if len(items) > 10 else ''}")
        return lines


def check(ledger: Ledger, rows: list[Row]) -> Verdict:
    """The tables against what the producers were told (see the module's docstring)."""
    expected = ledger.expected()
    aborted_at = {at for at in ledger.aborted.values() if at is not None}
    unknown_keys = {key: txn for txn, records in ledger.unknown.items() for key in records}
    verdict = Verdict(
        len(ledger.acked),
        len(ledger.failed),
        len(ledger.committed),
        len(ledger.aborted),
        dict(ledger.transactions),
        sum(not r.dead for r in rows),
        sum(r.dead for r in rows),
        fatal=list(ledger.fatal),
    )
    seen: set[Coordinate] = set()
    unknown_present: dict[str, int] = {}
    for row in rows:
        at = (row.partition, row.offset)
        if at in seen:
            verdict.duplicates.append(at)
            continue
        seen.add(at)
        sent = expected.get(at)
        if sent is not None:
            if not _holds(row, sent):
                got = (row.key, row.dead, row.content, row.timestamp, row.headers)
                want = (sent.key, sent.dead, sent.content, sent.timestamp, sent.headers)
                verdict.wrong.append(f"{at}: {got!r} != {want!r}")
        elif at in aborted_at or row.key in ledger.aborted:
            verdict.aborted_in_table.append(at)
        elif row.key in unknown_keys:
            unknown_present[unknown_keys[row.key]] = unknown_present.get(unknown_keys[row.key], 0) + 1
        elif row.key in ledger.failed:
            verdict.failed_landed += 1
        else:
            verdict.strangers.append(at)
    verdict.missing = sorted(set(expected) - seen)
    for txn, count in unknown_present.items():
        if count == len(ledger.unknown[txn]):
            verdict.unknown_landed += 1
        else:
            verdict.partial_unknown.append(f"{txn}: {count} of {len(ledger.unknown[txn])} records")
    return verdict


def _holds(row: Row, sent: Sent) -> bool:
    """The row holds the record as sent: a dead letter's reason starts with the expected one
    (the broker adds the detail: which bytes were missing, say)."""
    same = (row.key, row.dead, row.timestamp, row.headers) == (sent.key, sent.dead, sent.timestamp, sent.headers)
    if not same or not sent.dead:
        return same and row.content == sent.content
    (value, reason), (want_value, want_reason) = row.content, sent.content
    return value == want_value and isinstance(reason, str) and reason.startswith(want_reason)


def register_versions(url: str, topic: str, auth: dict | None = None) -> tuple[int, int]:
    """Both value schema versions registered under ``<topic>-value``: their ids."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": url, **(auth or {})})
    subject = f"{topic}-value"
    return (
        client.register_schema(subject, Schema(json.dumps(VALUE_V1), "AVRO")),
        client.register_schema(subject, Schema(json.dumps(VALUE_V2), "AVRO")),
    )
