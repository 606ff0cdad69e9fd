"""A log dir that fills up or fails its writes, on a real small filesystem, with a real client.

Kafka's rule (LogDirFailureChannel): the append fails with KAFKA_STORAGE_ERROR, the whole log
dir goes offline (its partitions answer KAFKA_STORAGE_ERROR to produce and fetch), nothing
acknowledged before is damaged, and a restart after the disk is fixed recovers the dir.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import BrokerProcess
from tests.integration.clients import (
    EARLIEST,
    LATEST,
    WAIT_S,
    RawClient,
    confluent_consume,
    raw_list_offsets,
    unique_topic,
)
from tests.small_disk import ThinDisk, free_bytes, resize_tmpfs, tmpfs

STORAGE_ERROR = KafkaError.KAFKA_STORAGE_ERROR  # 56
VALUE_BYTES = 1000
PRODUCE_LIMIT_S = 60


def value_of(i: int) -> bytes:
    return f"{i:08d}".encode().ljust(VALUE_BYTES, b".")


def number_of(value: bytes) -> int:
    return int(value[:8])


def produce_until_full(bootstrap: str, topic: str, budget: int, after_error: int = 30, start: int = 0, **config):
    """acks=all, no retries, so each failure reaches the application with the broker's own error.

    Returns ({number: offset} acknowledged, [(number, error)] failed, numbers sent).
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 5,
            "message.timeout.ms": 30_000,
            **config,
        }
    )
    acked: dict[int, int] = {}
    failed: list[tuple[int, KafkaError]] = []

    def on_delivery(err, msg):
        if err is None:
            acked[number_of(msg.value())] = msg.offset()
        else:
            failed.append((number_of(msg.value()), err))

    sent = 0
    first_error_at = None
    deadline = time.monotonic() + PRODUCE_LIMIT_S
    while sent < budget and time.monotonic() < deadline:
        if failed and first_error_at is None:
            first_error_at = sent
        if first_error_at is not None and sent >= first_error_at + after_error:
            break
        producer.produce(topic, value=value_of(start + sent), partition=0, on_delivery=on_delivery)
        sent += 1
        producer.poll(0.001 if first_error_at is None else 0.02)
    assert producer.flush(WAIT_S) == 0, "deliveries still pending"
    return acked, failed, sent


def test_a_full_disk_fails_produce_with_storage_error_and_loses_nothing_acknowledged(tmp_path: Path):
    data = tmp_path / "data"
    with tmpfs(data, "3m"):
        broker = BrokerProcess(data)
        try:
            broker.start()
            topic = unique_topic("full")
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)

            # 3 MiB hold about 3000 values of 1 KB: 20000 are sure to fill it
            acked, failed, sent = produce_until_full(broker.bootstrap, topic, budget=20_000)
            assert acked and failed, f"{len(acked)} acknowledged, {len(failed)} failed of {sent}"
            codes = {err.code() for _, err in failed}
            assert codes == {STORAGE_ERROR}, [str(err) for _, err in failed[:5]]
            assert free_bytes(data) < 64 * 1024
            assert broker.process.poll() is None, "the broker exited on a full disk"

            # the dir is offline: reads and the log end answer KAFKA_STORAGE_ERROR, as in Kafka
            with RawClient(broker.bootstrap) as client:
                assert raw_list_offsets(client, topic, LATEST)[0] == STORAGE_ERROR
                [entry] = client.request(
                    3,
                    9,
                    {
                        "topics": [{"name": topic}],
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                ).topics
                assert list(entry.partitions[0].offline_replicas) == [0]
                [described] = client.request(35, 1, {"topics": None}).results
                assert (described.log_dir, int(described.error_code)) == (str(data), STORAGE_ERROR)

            # the single node's metadata store is in that dir too: a new topic is refused, not half-made
            refused = unique_topic("refused")
            with pytest.raises(KafkaException) as raised:
                admin.create_topics([NewTopic(refused, 1, 1)])[refused].result(WAIT_S)
            assert raised.value.args[0].code() == STORAGE_ERROR, raised.value

            log = broker.read_log()
            named = [line for line in log.splitlines() if str(data) in line and "No space left on device" in line]
            assert len(named) == 1, log
            assert "offline" in named[0]
            assert "Traceback" not in log, log

            resize_tmpfs(data, "64m")
            assert broker.stop() == 0, broker.read_log()
            broker.start()
            with RawClient(broker.bootstrap) as client:
                error, end, _ = raw_list_offsets(client, topic, LATEST)
                assert error == 0 and raw_list_offsets(client, topic, EARLIEST)[1] == 0
            consumed = confluent_consume(broker.bootstrap, topic, end, timeout=WAIT_S)
            assert len(consumed) == end
            numbers = [number_of(m.value) for m in consumed]
            assert numbers == sorted(set(numbers)), "a value twice or out of order"
            assert all(m.value == value_of(number_of(m.value)) for m in consumed), "a damaged value"
            by_number = {number_of(m.value): m.offset for m in consumed}
            assert {n: by_number.get(n) for n in acked} == acked, "an acknowledged value is missing or moved"
            # an error does not promise the write is absent: only failed values may appear besides
            assert set(by_number) - set(acked) <= {n for n, _ in failed}

            # and the recovered dir takes writes again
            late, late_failed, _ = produce_until_full(broker.bootstrap, topic, budget=10, start=100_000)
            assert not late_failed and sorted(late.values()) == list(range(end, end + 10))
        finally:
            broker.stop()


def test_an_fsync_that_fails_with_eio_takes_the_dir_offline_and_a_repaired_disk_recovers(tmp_path: Path):
    """A real I/O error: ext4 on a thin loop device whose backing ran out (see tests.small_disk).

    With log.flush.interval.messages=1 every acknowledged append was fsynced first, so all of
    them survive the failure, the fsck and the restart.
    """
    with ThinDisk(tmp_path / "data") as disk:
        broker = BrokerProcess(disk.path, {"log.flush.interval.messages": "1"})
        try:
            broker.start()
            topic = unique_topic("eio")
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
            acked, failed, _ = produce_until_full(broker.bootstrap, topic, budget=200)
            assert len(acked) == 200 and not failed

            assert disk.exhaust() in ("ENOSPC", "EIO")  # the device reports its full backing (ENOSPC here)
            after, failed, _ = produce_until_full(broker.bootstrap, topic, budget=20, start=200)
            assert not after and len(failed) == 20
            assert {err.code() for _, err in failed} == {STORAGE_ERROR}, [str(err) for _, err in failed[:5]]
            assert broker.process.poll() is None, "the broker exited on an I/O error"
            log = broker.read_log()
            named = [
                line
                for line in log.splitlines()
                if str(disk.path) in line and "offline" in line and "Input/output error" in line
            ]
            assert len(named) == 1 and "fsync" in named[0], log
            assert "Traceback" not in log, log

            assert broker.stop() == 0, broker.read_log()
            assert disk.repair() in (0, 1, 2)
            broker.start()
            consumed = confluent_consume(broker.bootstrap, topic, 200, timeout=WAIT_S)
            assert [(number_of(m.value), m.offset) for m in consumed] == sorted(acked.items())
            assert all(m.value == value_of(number_of(m.value)) for m in consumed)
            late, late_failed, _ = produce_until_full(broker.bootstrap, topic, budget=5, start=1000)
            assert not late_failed and len(late) == 5
        finally:
            broker.stop()
