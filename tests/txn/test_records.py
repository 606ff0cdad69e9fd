"""__transaction_state records in Kafka's TransactionLogKey/TransactionLogValue layouts."""

import struct

import pytest

from strom.group.records import RecordFormatError
from strom.txn import records
from strom.txn.records import TxnLogValue, TxnState


def test_value_round_trips_in_kafkas_v0_layout():
    value = TxnLogValue(4001, 7, 60000, TxnState.ONGOING, {"out": [2, 0], "__consumer_offsets": [13]}, 1700, 1600)
    data = records.encode_value(value)
    # version, producer id, epoch, timeout, status, then the partitions array
    assert struct.unpack_from(">hqhib", data) == (0, 4001, 7, 60000, 1)
    decoded = records.decode_value(data)
    assert decoded.partitions == {"out": [0, 2], "__consumer_offsets": [13]}
    assert (decoded.producer_id, decoded.producer_epoch, decoded.timeout_ms, decoded.state) == (
        4001,
        7,
        60000,
        TxnState.ONGOING,
    )
    assert (decoded.last_update_ms, decoded.start_ms) == (1700, 1600)


def test_key_is_version_zero_and_the_transactional_id():
    assert records.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert records.decode_key(records.encode_key("tx")) == "tx"


def test_flexible_v1_value_written_by_kafka_4_is_read():
    # v1: compact arrays and strings, tagged fields after each struct and at the end
    data = (
        struct.pack(">hqhib", 1, 9, 3, 1000, 4)
        + bytes([2])
        + bytes([2])
        + b"t"
        + bytes([2])
        + struct.pack(">i", 5)
        + bytes([0])
        + struct.pack(">qq", 11, 10)
        + bytes([0])
    )
    decoded = records.decode_value(data)
    assert decoded.state == TxnState.COMPLETE_COMMIT
    assert decoded.partitions == {"t": [5]}
    assert (decoded.last_update_ms, decoded.start_ms) == (11, 10)


def test_a_transactions_v2_value_is_written_as_v1_with_its_tagged_fields():
    value = TxnLogValue(
        9, 4, 1000, TxnState.PREPARE_COMMIT, {"t": [5]}, 11, 10, next_producer_id=12, client_transaction_version=2
    )
    data = records.encode_value(value)
    # Kafka's layout: tags in order, only the ones that differ from their default (-1, -1, 0)
    assert data == (
        struct.pack(">hqhib", 1, 9, 4, 1000, 2)
        + bytes([2, 2])
        + b"t"
        + bytes([2])
        + struct.pack(">i", 5)
        + bytes([0])
        + struct.pack(">qq", 11, 10)
        + bytes([2, 1, 8])
        + struct.pack(">q", 12)
        + bytes([2, 2])
        + struct.pack(">h", 2)
    )
    decoded = records.decode_value(data)
    assert decoded == value
    assert records.encode_value(TxnLogValue(9, 4, 1000, TxnState.EMPTY))[:2] == b"\x00\x00"  # v0 without v2


@pytest.mark.parametrize(
    "data", [b"", b"\x00\x07", struct.pack(">hqhib", 0, 1, 1, 1, 42) + struct.pack(">iqq", -1, 0, 0)]
)
def test_unreadable_values_raise_a_format_error(data):
    with pytest.raises(RecordFormatError):
        records.decode_value(data)


def test_display_names_are_kafkas():
    assert [s.display_name for s in TxnState] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
