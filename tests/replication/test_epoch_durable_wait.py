"""A new leader's appends wait until its leader-epoch checkpoint is on disk, instead of being refused.

A metadata pass that makes 32 or more leaders (a failover at thousands of partitions, or the
creation of a large topic such as __consumer_offsets) has their checkpoints written on a thread.
A first version refused appends meanwhile with NOT_LEADER_OR_FOLLOWER: the group coordinator then
answered NOT_COORDINATOR to the first commits after __consumer_offsets was made. Kafka's makeLeader
makes them wait, and so does strom. The broker runs in process here so that the test can hold the
checkpoint thread and see a produce wait for it.
"""

from __future__ import annotations

import asyncio
import struct
import threading

from strom.fuzz.harness import InProcessBroker
from strom.protocol import api
from strom.protocol.api import ApiKey
from strom.protocol.codec import decode_response, encode_request, skip_tagged_fields
from strom.protocol.entities import build
from strom.protocol.errors import ErrorCode
from strom.protocol.records import NewRecord, build_batch
from strom.storage import checkpoint

PARTITIONS = 40  # over the 32 checkpoints from which a pass writes them on the checkpoint thread
TOPIC = "epochs"


def _frame(api_key: int, version: int, body: dict) -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, 4) + b"test"
    if api.request_header_version(api_key, version) >= 2:
        header += b"\x00"
    return header + encode_request(build(api.request_class(api_key, version), body))


def test_a_produce_to_a_new_leader_waits_for_its_epoch_checkpoint_and_then_succeeds(tmp_path):
    harness = InProcessBroker(root=str(tmp_path)).start()
    gate = threading.Event()
    try:
        loop, broker = harness.loop, harness.broker
        assert loop is not None and broker is not None
        replicas = broker.replica_manager
        checkpoint._writer.submit(gate.wait, 30)  # holds the checkpoint thread: the new epochs stay pending
        create = {"topics": [{"name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1}], "timeout": 10_000}
        loop.run_until_complete(_call(broker, _frame(ApiKey.CREATE_TOPICS, 5, create)))  # on the loop, as served
        harness.settle(0.2)
        assert replicas.partitions[(TOPIC, 0)].is_leader
        assert (TOPIC, 0) in replicas.epochs_pending

        batch = build_batch([NewRecord(b"first", key=b"k")])
        body = {
            "acks": -1,
            "timeout": 20_000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        }
        task = loop.create_task(_call(broker, _frame(ApiKey.PRODUCE, 9, body)))
        loop.run_until_complete(asyncio.wait([task], timeout=0.5))
        assert not task.done(), "the produce was answered while its leader epoch was not yet on disk"
        assert replicas.partitions[(TOPIC, 0)].log.log_end_offset == 0  # nothing appended while waiting

        gate.set()
        loop.run_until_complete(asyncio.wait([task], timeout=20))
        assert task.done()
        header, result = task.result()
        out = b"".join(bytes(chunk) for chunk in broker.dispatcher.encode(header, result))
        response = decode_response(ApiKey.PRODUCE, 9, out, skip_tagged_fields(out, 8))  # size, correlation id
        answer = response.responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
        assert not replicas.epochs_pending
        lines = (tmp_path.glob(f"**/{TOPIC}-0/leader-epoch-checkpoint")).__next__().read_text().splitlines()
        assert lines[-1] == "0 0"  # the epoch's start, on disk before the record
    finally:
        gate.set()
        harness.close()


async def _call(broker, frame: bytes):
    """One request through the dispatcher on the running loop, as a connection serves it."""
    header, result = broker.dispatcher.handle_frame(memoryview(frame), "127.0.0.1:1")
    if result is not None and hasattr(result, "__await__"):
        result = await result
    return header, result
