"""Fetch responses are encoded by hand; check them, aborted transactions included, against kio."""

import pytest

from strom.protocol.codec import decode_response
from strom.server.handlers.fetch import PartitionData, encode_response
from strom.storage.txn_index import AbortedTxn


@pytest.mark.parametrize("version", range(4, 13))
def test_aborted_transactions_are_what_kio_reads(version):
    with_aborts = PartitionData(2)
    with_aborts.high_watermark, with_aborts.last_stable_offset, with_aborts.log_start_offset = 90, 40, 0
    with_aborts.aborted = [AbortedTxn(7, 10, 20, 21), AbortedTxn(9, 30, 35, 40)]
    plain = PartitionData(3)
    plain.high_watermark = plain.last_stable_offset = 5
    response = encode_response([("pay", [with_aborts, plain])], version)
    body = b"".join(response.chunks)
    decoded = decode_response(1, version, body)
    first, second = decoded.responses[0].partitions
    assert (first.partition_index, first.high_watermark, first.last_stable_offset) == (2, 90, 40)
    assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(7, 10), (9, 30)]
    assert second.partition_index == 3 and len(second.aborted_transactions or ()) == 0
