"""A group member in its own process, for tests that kill it without a LeaveGroup.

    python -m tests.group.member_process BOOTSTRAP GROUP TOPIC [key=value ...]

Prints ``assigned 0,1`` (the whole current assignment) each time it changes, flushed, and polls
until it is killed; it never leaves the group on its own.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer

from tests.group.support import FAST_GROUP


def main(argv: list[str]) -> None:
    bootstrap, group, topic, *extra = argv
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **FAST_GROUP,
    }
    conf.update(item.split("=", 1) for item in extra)
    consumer = Consumer(conf)

    def on_assign(_consumer, partitions):
        print(
            "assigned " + ",".join(str(p.partition) for p in sorted(partitions, key=lambda p: p.partition)), flush=True
        )

    consumer.subscribe([topic], on_assign=on_assign)
    while True:
        consumer.poll(0.1)


if __name__ == "__main__":
    main(sys.argv[1:])
