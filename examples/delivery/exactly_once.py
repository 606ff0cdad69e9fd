"""Exactly-once consume-transform-produce: the output and the consumed offsets commit in one transaction.

    python examples/delivery/exactly_once.py --bootstrap-server 127.0.0.1:9092 --topic orders \\
        --group billing --output-topic orders-upper

Each batch of input records is "processed" (the value upper-cased) into --output-topic, to the same
partition number (so order per partition is kept: the output topic needs at least as many
partitions), and the input offsets are committed for --group by the same transaction
(send_offsets_to_transaction). A crash at any point either loses the whole transaction — its
output is aborted and its input is read again from the last committed offsets — or keeps all of
it: a read_committed consumer of the output sees each input record exactly once. The restarted
process uses the same transactional.id (default: the group's name plus "-eos"), which fences its
predecessor and aborts the transaction it left open.

Options: --batch N records per transaction (default 100); --idle-exit S stops once it has had
partitions for S seconds without a message (default: run until killed); --delay-ms N sleeps N ms
per record (to watch a crash land mid-transaction); -X key=value sets any consumer property and
-P key=value any producer property.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

TIMEOUT_S = 30
COMMIT_ATTEMPTS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True, help="input topic")
    parser.add_argument("--group", required=True, help="consumer group whose offsets the transactions commit")
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--transactional-id", help="default: <group>-eos")
    parser.add_argument("--batch", type=int, default=100, help="records per transaction at most")
    parser.add_argument("--idle-exit", type=float, default=None, metavar="S", help="exit after S idle seconds")
    parser.add_argument("--delay-ms", type=float, default=0, help="pretend each record takes this long")
    parser.add_argument("-X", dest="config", action="append", default=[], metavar="KEY=VALUE",
                        help="a consumer property (repeatable)")
    parser.add_argument("-P", dest="producer_config", action="append", default=[], metavar="KEY=VALUE",
                        help="a producer property (repeatable)")
    return parser.parse_args(argv)


class Idle:
    """Seconds since the last message, counted only while partitions are assigned."""

    def __init__(self):
        self.since: float | None = None

    def on_assign(self, _consumer, _partitions) -> None:
        self.since = time.monotonic()

    def message(self) -> None:
        self.since = time.monotonic()

    def over(self, limit: float | None) -> bool:
        return limit is not None and self.since is not None and time.monotonic() - self.since >= limit


def make_consumer(args: argparse.Namespace, idle: Idle) -> Consumer:
    config = {
        "bootstrap.servers": args.bootstrap_server,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,  # offsets are committed by the transaction, never on their own
        "isolation.level": "read_committed",  # upstream transactions too: never read aborted input
    }
    config.update(item.split("=", 1) for item in args.config)
    consumer = Consumer(config)
    consumer.subscribe([args.topic], on_assign=idle.on_assign)
    return consumer


def make_producer(args: argparse.Namespace) -> Producer:
    config = {
        "bootstrap.servers": args.bootstrap_server,
        "transactional.id": args.transactional_id or f"{args.group}-eos",
        "linger.ms": 5,
    }
    config.update(item.split("=", 1) for item in args.producer_config)
    producer = Producer(config)
    producer.init_transactions(TIMEOUT_S)  # fences an older instance and aborts what it left open
    return producer


def transform(value: bytes | None) -> bytes | None:
    return None if value is None else value.upper()


def rewind(consumer: Consumer) -> None:
    """After an aborted transaction: read again from the offsets the last committed one stored."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=TIMEOUT_S):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def run_transaction(consumer: Consumer, producer: Producer, args: argparse.Namespace, messages: list) -> None:
    producer.begin_transaction()
    for msg in messages:
        if args.delay_ms:
            time.sleep(args.delay_ms / 1000)
        producer.produce(args.output_topic, transform(msg.value()), key=msg.key(), partition=msg.partition(),
                         headers=msg.headers())
        producer.poll(0)
    # the next offset of every partition consumed from, committed for the group by this transaction
    offsets = {(m.topic(), m.partition()): m.offset() + 1 for m in messages}
    producer.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                         consumer.consumer_group_metadata(), TIMEOUT_S)
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            producer.commit_transaction(TIMEOUT_S)
            return
        except KafkaException as exc:
            # retriable (e.g. timed out): the outcome is unknown until a retried commit settles it
            if not exc.args[0].retriable() or attempt == COMMIT_ATTEMPTS - 1:
                raise


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    idle = Idle()
    consumer = make_consumer(args, idle)
    producer = make_producer(args)
    try:
        while not idle.over(args.idle_exit):
            messages = []
            for msg in consumer.consume(args.batch, 0.2):
                if msg.error():
                    print(f"consumer error: {msg.error()}", file=sys.stderr)
                else:
                    messages.append(msg)
            if not messages:
                continue
            idle.message()
            try:
                run_transaction(consumer, producer, args, messages)
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal():  # e.g. fenced: another instance with our transactional.id took over
                    print(f"fatal: {error}", file=sys.stderr)
                    return 1
                if not error.txn_requires_abort():
                    raise  # still unsettled after retries: a restart's init_transactions settles it
                print(f"transaction aborted: {error}", file=sys.stderr)
                producer.abort_transaction(TIMEOUT_S)
                rewind(consumer)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
