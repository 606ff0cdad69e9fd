"""A transactional copier, the shape of Kafka's transactions system test: read an input topic with
a consumer group (read_committed), write each record to the same partition of an output topic,
and commit the input offsets in the same transaction (send_offsets_to_transaction).

    python -m tests.cluster.txn_copier BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID DEADLINE_S

Runs until every input partition's committed offset reaches its end offset as measured at start
(exit 0) or the deadline passes (exit 3). After an abortable error it aborts and rewinds to the
committed offsets, as a Kafka application must; a fatal one (fenced) exits 2, and a transactional
call that overstays its timeout exits 5 (see ``bounded``). The test kills it with SIGKILL and
starts it again, as a supervisor would after any exit; the new instance fences the old one through
its transactional id.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

BATCH = 200
CALL_TIMEOUT_S = 30.0
# librdkafka (2.10 to at least 2.16) can block send_offsets_to_transaction for good, whatever its
# timeout: a request waiting for a group coordinator that has since left the brokers' Metadata
# (killed, its partitions moved, librdkafka "decommissions" it) is never sent elsewhere
# (confluentinc/librdkafka#5511), and the call's timeout is never checked (#5456). A blocked C call
# cannot be interrupted; the application exits and its supervisor restarts it, whose new instance
# fences this one and aborts its transaction. Kafka's brokers drop a dead broker from Metadata
# in the same update that moves its leaderships, as strom does.
OVERSTAY_S = 5.0
STUCK_EXIT = 5


def end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    """The input's end offsets, retried while a leader is being killed or moved (bounded)."""
    for _ in range(60):
        try:
            metadata = consumer.list_topics(topic, timeout=20)
            return {
                partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)[1]
                for partition in metadata.topics[topic].partitions
            }
        except KafkaException as exc:
            print(f"end offsets not readable yet: {exc}", flush=True)
            time.sleep(0.5)
    raise SystemExit(4)


def committed(consumer: Consumer, topic: str, partitions: list[int]) -> list[TopicPartition]:
    """The group's committed offsets, retried while its coordinator moves (bounded)."""
    for _ in range(30):
        try:
            return consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=20)
        except KafkaException as exc:
            print(f"committed offsets not readable yet: {exc}", flush=True)
            time.sleep(0.5)
    raise SystemExit(4)


def rewind(consumer: Consumer, topic: str, partitions: list[int]) -> None:
    for tp in committed(consumer, topic, partitions):
        consumer.seek(TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def bounded(call, timeout_s: float = CALL_TIMEOUT_S) -> None:
    """``call()``, or exit the process if it has not returned OVERSTAY_S after ``timeout_s``."""

    def stuck() -> None:
        print(
            f"a transactional call did not return {timeout_s + OVERSTAY_S:.0f}s after it began (timeout "
            f"{timeout_s:.0f}s; librdkafka#5511); exiting to be restarted",
            flush=True,
        )
        os._exit(STUCK_EXIT)

    watchdog = threading.Timer(timeout_s + OVERSTAY_S, stuck)
    watchdog.daemon = True
    watchdog.start()
    try:
        call()
    finally:
        watchdog.cancel()


def attempt(call) -> str:
    """Run a transactional call (with CALL_TIMEOUT_S) the way librdkafka asks: retry retriable
    errors, report the rest."""
    for _ in range(20):
        try:
            bounded(call)
            return "ok"
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                print(f"fatal: {error}", flush=True)
                return "fatal"
            if error.txn_requires_abort():
                print(f"aborting after: {error}", flush=True)
                return "abort"
            if not error.retriable():
                print(f"not retriable: {error}", flush=True)
                return "fatal"
            print(f"retrying after: {error}", flush=True)  # for the test's log when it stalls
            time.sleep(0.2)
    return "fatal"


def main(bootstrap: str, source: str, target: str, group: str, transactional_id: str, deadline_s: float) -> int:
    deadline = time.monotonic() + deadline_s
    common = {
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
        "retry.backoff.ms": 50,
    }
    consumer = Consumer(
        {
            **common,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            **common,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 20000,
            "message.timeout.ms": 20000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    ends = end_offsets(consumer, source)
    partitions = sorted(ends)
    consumer.assign([TopicPartition(source, p) for p in partitions])
    rewind(consumer, source, partitions)
    while time.monotonic() < deadline:
        if all(tp.offset >= ends[tp.partition] for tp in committed(consumer, source, partitions)):
            print("copied everything", flush=True)
            return 0
        messages = [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(target, message.value(), message.key(), partition=message.partition())
        positions = {m.partition(): m.offset() + 1 for m in messages}
        offsets = [TopicPartition(source, p, o) for p, o in positions.items()]
        outcome = attempt(
            lambda: producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        )
        if outcome == "ok":
            outcome = attempt(lambda: producer.commit_transaction(CALL_TIMEOUT_S))
        if outcome == "fatal":
            return 2
        if outcome == "abort":
            if attempt(lambda: producer.abort_transaction(CALL_TIMEOUT_S)) != "ok":
                return 2
            rewind(consumer, source, partitions)
    print("deadline passed", flush=True)
    return 3


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6], float(sys.argv[6])))
