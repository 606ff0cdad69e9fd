"""At-most-once consumption: commit a message's offset synchronously, then process it.

    python examples/delivery/at_most_once.py --bootstrap-server 127.0.0.1:9092 --topic orders \\
        --group billing --out processed.txt

"Processing" appends the message value and a newline to --out, flushed and fsynced. A crash after
the commit but before processing means the restarted consumer starts after that message: no
message is processed twice, some may never be processed. A failed commit skips the message.

Options: --idle-exit S stops once it has had partitions for S seconds without a message (default:
run until killed);
--delay-ms N sleeps N ms per message (to watch a crash land mid-stream); -X key=value sets any
consumer property (e.g. -X session.timeout.ms=6000).
"""

from __future__ import annotations

import os
import sys

from confluent_kafka import KafkaException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from at_least_once import Idle, make_consumer, parse_args, process  # noqa: E402  (same options, same "processing")


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
                try:
                    consumer.commit(message=msg, asynchronous=False)  # 1. commit first (msg offset + 1)
                except KafkaException as exc:
                    # not committed: another member may get it; processing it here could make it twice
                    print(f"commit failed, skipping offset {msg.offset()}: {exc}", file=sys.stderr)
                    continue
                process(out, msg.value(), args.delay_ms)  # 2. then process
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
