"""At-least-once consumption: process a message, then commit its offset synchronously.

    python examples/delivery/at_least_once.py --bootstrap-server 127.0.0.1:9092 --topic orders \\
        --group billing --out processed.txt

"Processing" appends the message value and a newline to --out, flushed and fsynced, so what is in
the file has really happened. A crash after processing but before the commit means the restarted
consumer processes that message again: nothing is lost, some messages may be processed twice.

Options: --idle-exit S stops once it has had partitions for S seconds without a message (default:
run until killed);
--delay-ms N sleeps N ms per message (to watch a crash land mid-stream); -X key=value sets any
consumer property (e.g. -X session.timeout.ms=6000).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--out", required=True, help="file each processed value is appended to")
    parser.add_argument("--idle-exit", type=float, default=None, metavar="S", help="exit after S idle seconds")
    parser.add_argument("--delay-ms", type=float, default=0, help="pretend each message takes this long")
    parser.add_argument("-X", dest="config", action="append", default=[], metavar="KEY=VALUE",
                        help="a consumer property (repeatable)")
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
        "enable.auto.commit": False,  # we commit, and only when we choose to
        "enable.auto.offset.store": False,
    }
    config.update(item.split("=", 1) for item in args.config)
    consumer = Consumer(config)
    consumer.subscribe([args.topic], on_assign=idle.on_assign)
    return consumer


def process(out, value: bytes, delay_ms: float) -> None:
    if delay_ms:
        time.sleep(delay_ms / 1000)
    out.write(value + b"\n")
    out.flush()
    os.fsync(out.fileno())  # processed means durable


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    idle = Idle()
    consumer = make_consumer(args, idle)
    try:
        with open(args.out, "ab") as out:
            while not idle.over(args.idle_exit):
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    print(f"consumer error: {msg.error()}", file=sys.stderr)
                    continue
                idle.message()
                process(out, msg.value(), args.delay_ms)  # 1. process
                try:
                    consumer.commit(message=msg, asynchronous=False)  # 2. then commit (msg offset + 1)
                except KafkaException as exc:
                    # e.g. our partitions moved to another member: it will process this one again
                    print(f"commit failed: {exc}", file=sys.stderr)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
