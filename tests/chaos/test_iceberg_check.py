"""The Iceberg chaos run's checker over synthetic ledgers and rows: each kind of anomaly it must
report (a chaos run that passes says only as much as its checker can catch), and what it allows."""

from strom.chaos.iceberg_workload import Ledger, Row, Sent, Values, check


def sent(key: str, dead: bool = False, content=None) -> Sent:
    value = f"{key}:value".encode()
    return Sent(key.encode(), value, [], value if content is None else content, dead, timestamp=1000)


def row(at: tuple[int, int], record: Sent, **changes) -> Row:
    fields = {
        "partition": at[0],
        "offset": at[1],
        "key": record.key,
        "timestamp": record.timestamp,
        "headers": record.headers,
        "content": record.content,
        "dead": record.dead,
    }
    return Row(**{**fields, **changes})


def ledger() -> Ledger:
    book = Ledger()
    book.acked = {(0, 0): sent("i0"), (0, 1): sent("i1")}
    book.committed = {(1, 0): sent("t0-0"), (1, 1): sent("t0-1")}
    book.aborted = {b"t1-0": (1, 2), b"t1-1": None}  # the second never had its delivery report
    book.transactions = {"committed": 1, "aborted": 1, "unknown": 0}
    return book


def exact(book: Ledger) -> list[Row]:
    return [row(at, record) for at, record in book.expected().items()]


def test_the_committed_records_once_each_is_ok():
    book = ledger()
    verdict = check(book, exact(book))
    assert verdict.ok, verdict.details()
    assert (verdict.acknowledged, verdict.txn_committed, verdict.txn_aborted, verdict.rows) == (2, 2, 2, 4)


def test_a_row_twice_a_missing_record_and_other_bytes_are_reported():
    book = ledger()
    rows = exact(book)
    rows.append(rows[0])  # a second copy of (0, 0)
    rows = [r for r in rows if (r.partition, r.offset) != (1, 1)]  # (1, 1) missing
    rows[1] = row((0, 1), book.acked[(0, 1)], content=b"other")
    verdict = check(book, rows)
    assert verdict.duplicates == [(0, 0)] and verdict.missing == [(1, 1)] and len(verdict.wrong) == 1
    assert not verdict.ok


def test_aborted_records_and_rows_nobody_produced_are_reported():
    book = ledger()
    rows = exact(book)
    rows.append(row((1, 2), sent("t1-0")))  # at its reported offset
    rows.append(row((2, 7), sent("t1-1")))  # known by its key only
    rows.append(Row(1, 3, None, 1000, [], b"\x00\x00\x00\x00\x00\x00", False))  # a control record, say
    verdict = check(book, rows)
    assert verdict.aborted_in_table == [(1, 2), (2, 7)] and verdict.strangers == [(1, 3)]
    assert not verdict.ok


def test_failed_deliveries_may_land_and_unknown_transactions_land_whole_or_not_at_all():
    book = ledger()
    book.failed = {b"i2": sent("i2")}
    book.unknown = {"t2": {b"t2-0": (2, 0), b"t2-1": None}, "t3": {b"t3-0": (2, 5), b"t3-1": (2, 6)}}
    rows = exact(book) + [row((0, 2), sent("i2")), row((2, 0), sent("t2-0")), row((2, 1), sent("t2-1"))]
    verdict = check(book, rows)
    assert verdict.ok, verdict.details()
    assert (verdict.failed_landed, verdict.unknown_landed) == (1, 1)
    rows.append(row((2, 5), sent("t3-0")))  # t3 only half there
    verdict = check(book, rows)
    assert verdict.partial_unknown == ["t3: 1 of 2 records"] and not verdict.ok


def test_a_dead_letter_holds_its_raw_value_and_a_reason_that_starts_with_the_expected_one():
    values = Values("value_schema_id_prefix", (1, 2))
    bad = values.make("i9", 9)  # one record in ten is bad: the first kind has no prefix
    assert bad.dead and bad.content == (b"plain text i9", "no schema id prefix")
    book = Ledger(acked={(0, 0): bad})
    detailed = (bad.value, "no schema id prefix (magic byte 0 and a 4-byte schema id)")
    assert check(book, [row((0, 0), bad, content=detailed)]).ok
    assert not check(book, [row((0, 0), bad, content=(bad.value, "unknown schema id 1"))]).ok
    assert not check(book, [row((0, 0), bad, dead=False)]).ok  # in the table, not the dead-letter table
