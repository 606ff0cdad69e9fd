"""Record walking for the broker's checks: scan_records and first_offset_gap against built batches."""

import pytest

from strom.protocol.errors import InvalidRecordError
from strom.protocol.records import (
    BATCH_HEADER_SIZE,
    NewRecord,
    RecordSummary,
    build_batch,
    decode_batch_records,
    encode_varint,
    first_offset_gap,
    scan_records,
)


def section(records: list[NewRecord], **kwargs) -> bytes:
    return build_batch(records, **kwargs)[BATCH_HEADER_SIZE:]


def test_scan_reads_deltas_and_key_lengths_of_every_record():
    records = [
        NewRecord(
            b"v" * n,
            key=None if n % 3 == 0 else b"k" * n,
            timestamp=1000 + 7 * n,
            headers=[("h", b"x" * n), ("empty", None)] if n % 2 else (),
        )
        for n in range(200)
    ]  # lengths and deltas past one varint byte
    payload = section(records)
    found = scan_records(payload, 0, len(payload), len(records))
    assert found == [RecordSummary(7 * n, n, -1 if n % 3 == 0 else n) for n in range(200)]
    prefixed = b"junk" + payload + b"tail"
    assert scan_records(prefixed, 4, 4 + len(payload), len(records)) == found


def test_scan_refuses_a_count_the_bytes_do_not_hold():
    payload = section([NewRecord(b"a"), NewRecord(b"b")])
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        scan_records(payload, 0, len(payload), 3)
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        scan_records(payload, 0, len(payload), 1)
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        scan_records(payload, 0, len(payload) - 1, 2)


def test_scan_refuses_fields_that_disagree_with_the_record_length():
    one = bytearray(section([NewRecord(b"value", key=b"key")]))
    one[0] += 2  # record length says one byte more (zig-zag: +2 is +1)
    with pytest.raises(InvalidRecordError):
        scan_records(bytes(one) + b"\x00", 0, len(one) + 1, 1)
    body = bytearray()
    body.append(0)
    for value in (0, 0, -1, -1, -3):  # timestamp, offset, null key, null value, -3 headers
        encode_varint(value, body)
    framed = bytearray()
    encode_varint(len(body), framed)
    with pytest.raises(InvalidRecordError, match="invalid number of record headers"):
        scan_records(bytes(framed + body), 0, len(framed + body), 1)


def test_first_offset_gap():
    consecutive = section([NewRecord(b"x" * 70, timestamp=10**12 + i) for i in range(150)])
    assert first_offset_gap(consecutive, 0, len(consecutive), 150) == -1
    gapped = section([NewRecord(b"x", offset_delta=d) for d in (0, 1, 3, 4)])
    assert first_offset_gap(gapped, 0, len(gapped), 4) == 2
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        first_offset_gap(gapped, 0, len(gapped), 5)
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        first_offset_gap(gapped, 0, len(gapped), 3)


def test_scanned_batches_still_decode():
    batch = build_batch([NewRecord(b"v", key=b"k", headers=[("a", b"b")])], compression=4)
    assert [(r.key, r.value, r.headers) for r in decode_batch_records(batch)] == [(b"k", b"v", [("a", b"b")])]
