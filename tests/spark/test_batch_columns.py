"""The vectorized batch decoder agrees with the per-record decoder on every field."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strom.protocol.errors import CorruptRecordError
from strom.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHeader,
    NewRecord,
    build_batch,
    decode_batch_records,
)
from strom.spark.batch_columns import cut, decode_columns, decode_fields

# lengths around the 1-, 2- and 3-byte varint boundaries (63/64 and 8191/8192 after zig-zag)
_sizes = st.sampled_from([0, 1, 5, 63, 64, 100, 127, 128, 8191, 8192, 20000])
_blob = st.one_of(st.none(), _sizes.flatmap(lambda n: st.binary(min_size=n, max_size=n)))
_record = st.builds(
    NewRecord,
    value=_blob,
    key=_blob,
    headers=st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=2),
    timestamp=st.integers(1_600_000_000_000, 1_800_000_000_000),
)


def _compare(batch: bytes, with_headers: bool) -> None:
    header = BatchHeader.parse(batch, 0)
    expected = decode_batch_records(batch, header)
    got = decode_columns(batch, header, with_headers)
    assert list(got.offsets) == [r.offset for r in expected]
    assert list(got.timestamps) == [r.timestamp for r in expected]
    assert got.keys.to_pylist() == [r.key for r in expected]
    assert got.values.to_pylist() == [r.value for r in expected]
    if with_headers:
        assert got.headers == [r.headers for r in expected]
    else:
        assert got.headers is None


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(_record, min_size=1, max_size=40),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
    base_offset=st.integers(0, 2**40),
    with_headers=st.booleans(),
)
def test_matches_the_record_decoder(records, codec, base_offset, with_headers):
    _compare(build_batch(records, base_offset=base_offset, compression=codec), with_headers)


def test_log_append_time_gives_every_record_the_batch_time():
    batch = build_batch([NewRecord(b"a", timestamp=5), NewRecord(b"b", timestamp=9)], timestamp_type=LOG_APPEND_TIME)
    columns = decode_columns(batch, BatchHeader.parse(batch, 0))
    assert list(columns.timestamps) == [9, 9]
    _compare(build_batch([NewRecord(b"x", timestamp=7)], timestamp_type=CREATE_TIME), False)


def test_offset_gaps_from_compaction_are_kept():
    records = [NewRecord(b"a", offset_delta=0), NewRecord(b"c", offset_delta=2), NewRecord(b"f", offset_delta=5)]
    batch = build_batch(records, base_offset=100)
    assert list(decode_columns(batch, BatchHeader.parse(batch, 0)).offsets) == [100, 102, 105]


def test_a_batch_at_a_position_inside_a_larger_buffer():
    first = build_batch([NewRecord(b"one")], base_offset=0)
    second = build_batch([NewRecord(b"two", key=b"k"), NewRecord(None)], base_offset=1)
    buf = first + second
    header = BatchHeader.parse(buf, len(first))
    columns = decode_columns(buf, header)
    assert columns.values.to_pylist() == [b"two", None]
    assert columns.keys.to_pylist() == [b"k", None]


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_a_record_section_cut_short_is_corrupt(cut):
    batch = bytearray(build_batch([NewRecord(b"v" * 50, key=b"k") for _ in range(3)]))
    header = BatchHeader.parse(batch, 0)
    truncated = bytes(batch[: len(batch) - cut])
    header.batch_length -= cut  # a consistent header over records that no longer fit
    with pytest.raises(CorruptRecordError):
        decode_columns(truncated, header)


def test_a_value_length_past_its_record_is_corrupt():
    batch = bytearray(build_batch([NewRecord(b"v" * 10), NewRecord(b"w" * 10)]))
    header = BatchHeader.parse(batch, 0)
    # the first record: length, attributes, ts delta, offset delta, key length (-1), value length
    value_length_at = 61 + 1 + 1 + 1 + 1 + 1
    assert batch[value_length_at] == 20  # zig-zag of 10
    batch[value_length_at] = 100  # 50 bytes: past the record's end
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(batch), header)


def test_control_batches_have_no_data_records():
    batch = build_batch([NewRecord(b"\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")], control=True, transactional=True)
    assert len(decode_columns(batch, BatchHeader.parse(batch, 0)).offsets) == 0


@pytest.mark.parametrize("length_byte", [3, 10, 30])  # -2 (negative), 5 and 15: not where the next record starts
def test_a_record_length_off_the_chain_is_corrupt(length_byte):
    batch = bytearray(build_batch([NewRecord(b"v" * 10), NewRecord(b"w" * 10), NewRecord(b"x" * 10)]))
    header = BatchHeader.parse(batch, 0)
    batch[61] = length_byte  # the first record's length varint
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(batch), header)


@pytest.mark.parametrize(
    "values",
    [
        [b"v" * 100] * 300,  # one size throughout: no record-by-record pass at all
        [b"v" * 100] * 150 + [b"w" * 7] + [b"v" * 100] * 149,  # the run breaks in the middle
        [b"v" * 100] * 299 + [b"w" * 101],  # only the last record differs
        [b"v" * (i % 7) for i in range(300)],  # no run
    ],
)
def test_many_records_of_one_size_and_runs_that_break(values):
    records = [NewRecord(v, key=None if i % 3 else b"k", timestamp=1_700_000_000_000) for i, v in enumerate(values)]
    _compare(build_batch(records, base_offset=7), False)


def test_a_broken_length_inside_a_run_of_one_size_is_corrupt():
    batch = bytearray(build_batch([NewRecord(b"v" * 10) for _ in range(100)]))
    header = BatchHeader.parse(batch, 0)
    step = (len(batch) - 61) // 100
    batch[61 + 50 * step] = 3  # record 50's length: -2
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(batch), header)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.tuples(st.sampled_from([0, 3, 60, 100, 9000]), st.integers(1, 150)), min_size=1, max_size=6))
def test_runs_of_sizes_match_the_record_decoder(sizes):
    values = [b"v" * size for size, run in sizes for _ in range(run)]
    _compare(build_batch([NewRecord(v, timestamp=1_700_000_000_000) for v in values]), False)


# runs of records of one size whose fields still differ: a delta one byte wider where the value
# is one byte shorter, keys of other lengths, keys longer than the compared head (16 bytes)
_run_template = st.tuples(
    st.sampled_from([0, 1, 40, 100]),  # value size, before the compensation below
    st.sampled_from([None, b"", b"k", b"key-of-20-bytes-xxxx"]),
    st.sampled_from([0, 1, 63, 64, 8191, 8192]),  # timestamp delta: 1, 2 and 3 byte varints
)


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.tuples(_run_template, st.integers(1, 120)), min_size=1, max_size=5))
def test_runs_of_one_size_with_other_layouts_match_the_record_decoder(runs):
    records = []
    for (size, key, delta), length in runs:
        for _ in range(length):
            wide = 0 if delta < 64 else 1 if delta < 8192 else 2  # the delta's extra varint bytes
            records.append(NewRecord(b"v" * max(size - wide, 0), key=key, timestamp=1_700_000_000_000 + delta))
    _compare(build_batch(records, base_offset=3), False)


def test_a_run_broken_by_a_value_length_is_corrupt():
    batch = bytearray(build_batch([NewRecord(b"v" * 10) for _ in range(100)]))
    header = BatchHeader.parse(batch, 0)
    step = (len(batch) - 61) // 100
    value_length_at = 61 + 50 * step + 5  # record 50: length, attributes, deltas, key length, value length
    assert batch[value_length_at] == 20
    batch[value_length_at] = 40  # 20 bytes: past the record's end
    with pytest.raises(CorruptRecordError):
        decode_columns(bytes(batch), header)


def test_batches_of_one_buffer_are_cut_together():
    """decode_fields leaves keys and values in the buffer: the batches of one Fetch response are
    cut out with one call, as the source does, and agree with the batches decoded one by one."""
    batches = [
        build_batch([NewRecord(b"a%d" % i, key=b"k%d" % i if i % 2 else None) for i in range(70)], base_offset=0),
        build_batch([NewRecord(b"v" * 30) for _ in range(100)], base_offset=70, compression=1),
        build_batch([NewRecord(b"w" * (i % 9), key=b"x") for i in range(50)], base_offset=170),
    ]
    buffer = b"".join(batches)
    headers = []
    position = 0
    for batch in batches:
        headers.append(BatchHeader.parse(buffer, position))
        position += len(batch)
    fields = [decode_fields(buffer, h) for h in headers]
    expected = [decode_columns(buffer, h) for h in headers]
    for kind in ("key", "value"):
        got = []
        for f in fields:
            starts, lengths = getattr(f, f"{kind}_start"), getattr(f, f"{kind}_length")
            got += cut(f.source, starts, lengths).to_pylist()
        assert got == [v for e in expected for v in getattr(e, f"{kind}s").to_pylist()]
    uncompressed = [f for f in fields if f.source is buffer]
    assert len(uncompressed) == 2  # the gzip batch's values are in its decompressed records
    together = cut(
        buffer,
        np.concatenate([f.value_start for f in uncompressed]),
        np.concatenate([f.value_length for f in uncompressed]),
    )
    assert together.to_pylist() == expected[0].values.to_pylist() + expected[2].values.to_pylist()
