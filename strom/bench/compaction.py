"""Compaction benchmark: produce and fetch latency while the cleaner compacts a large log.

    python -m strom.bench.compaction [--size-mb 1024] [--keys 10000] [--value-size 1000]
                                     [--segment-mb 64] [--rate 2000] [--baseline-s 20]
                                     [--threads 1] [--io-max-bytes-per-second B] [--record]

One broker (a child process, strom.testing.Broker). A one-partition topic is filled to
``--size-mb`` with records whose keys repeat (``--keys`` distinct keys, so nearly all of it is
duplicates) while its cleanup.policy is still ``delete``, so nothing compacts it. Then a steady
workload runs throughout (confluent-kafka, ``--rate`` msg/s, acks=1, linger.ms=0, into the same
partition, with a consumer assigned to its end):

- produce latency: produce() to the delivery report;
- fetch latency: produce() to the consumer's receipt (end to end, the same clock).

First ``--baseline-s`` seconds with no compaction, then the topic is switched to
``cleanup.policy=compact`` and the workload's figures are taken from the broker's "cleaning ...
in a cleaner process" line to its "cleaned ..." line, then (policy ``delete`` again)
``--baseline-s`` seconds more without compaction: two windows without, so that the machine's
own noise shows. Prints p50/p99/max of
each window and the p99 ratios, compaction against both windows without (the issue's goal: at
most 1.5). Asserts nothing: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import statistics
import struct
import threading
import time
from array import array
from dataclasses import dataclass, field

from strom.bench.results import add_record_argument, record_if_asked

TOPIC = "bench-compacted"
STAMP = struct.Struct(">d")


@dataclass
class Samples:
    """Times sent and latencies (seconds) of one kind, appended from the workload's threads.

    Arrays of doubles, not lists of tuples: a growing heap of tracked objects would make this
    process's garbage collections, which the latencies include, longer in each later window.
    """

    sent: array = field(default_factory=lambda: array("d"))
    latency: array = field(default_factory=lambda: array("d"))

    def add(self, sent: float, latency: float) -> None:
        self.sent.append(sent)
        self.latency.append(latency)

    def window(self, start: float, end: float) -> list[float]:
        return [latency for sent, latency in zip(self.sent, self.latency) if start <= sent <= end]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def fill(bootstrap: str, size_mb: int, keys: int, value_size: int) -> tuple[int, float]:
    """Produce ``size_mb`` of keyed records as fast as the producer goes; returns (records, seconds)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 262144,
            "enable.idempotence": False,
        }
    )
    payload = os.urandom(value_size)
    records = size_mb * 1024 * 1024 // (value_size + 40)
    rng = random.Random(7)
    began = time.perf_counter()
    failures: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failures.append(str(err))

    for n in range(records):
        key = b"key-%d" % rng.randrange(keys)
        while True:
            try:
                producer.produce(TOPIC, payload, key, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 1000 == 0:
            producer.poll(0)
    if producer.flush(300) or failures:
        raise SystemExit(f"filling failed: {failures[:3]}")
    return records, time.perf_counter() - began


class Workload:
    """A paced acks=1 producer and a consumer at the partition's end, both recording latencies."""

    def __init__(self, bootstrap: str, rate: int):
        self.bootstrap = bootstrap
        self.rate = rate
        self.produce = Samples()
        self.fetch = Samples()
        self.stop = threading.Event()
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        self._consumer_ready = threading.Event()

    def start(self) -> None:
        self._threads[1].start()
        self._consumer_ready.wait(30)
        self._threads[0].start()

    def close(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(30)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "1", "linger.ms": 0, "enable.idempotence": False}
        )
        interval = 1.0 / self.rate
        next_send = time.perf_counter()
        n = 0
        while not self.stop.is_set():
            sent = time.perf_counter()

            def on_delivery(err, _msg, sent=sent) -> None:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    self.produce.add(sent, time.perf_counter() - sent)

            producer.produce(TOPIC, STAMP.pack(sent) + b"w" * 92, b"lat-%d" % n, partition=0, on_delivery=on_delivery)
            n += 1
            next_send += interval
            wait = next_send - time.perf_counter()
            if wait < -1.0:  # fell far behind (a stall): do not burst to catch up
                next_send = time.perf_counter()
            producer.poll(0)
            while wait > 0:  # poll returns after each delivery report; send only when the pace says so
                # librdkafka's timeout is whole milliseconds: poll(0.0005) does not block, and at
                # 2,000 msg/s this loop spun a whole core, which the broker and the cleaner then
                # competed with. A send up to 1 ms late is caught up by next_send.
                producer.poll(max(wait, 0.001))
                wait = next_send - time.perf_counter()
        producer.flush(10)

    def _consume(self) -> None:
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "bench-compaction",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
            }
        )
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
        consumer.poll(1.0)
        self._consumer_ready.set()
        while not self.stop.is_set():
            # what is there now, else wait for one: a batch timeout would add its wait to the latency
            messages = consumer.consume(500, 0)
            if not messages:
                one = consumer.poll(0.05)
                messages = [one] if one is not None else []
            for msg in messages:
                key, value = msg.key(), msg.value()
                if msg.error() or key is None or value is None or not key.startswith(b"lat-"):
                    continue
                sent = STAMP.unpack_from(value)[0]
                self.fetch.add(sent, time.perf_counter() - sent)
        consumer.close()


def wait_for_line(log_path, pattern: str, after: int, timeout: float) -> tuple[float, int, str]:
    """(when it was seen, where the search may go on, the line) for the first match past ``after``."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path, "rb") as handle:
            handle.seek(after)
            text = handle.read().decode(errors="replace")
        found = regex.search(text)
        if found:
            end_of_line = text.find("\n", found.start())
            line_end = len(text) if end_of_line < 0 else end_of_line
            return (
                time.perf_counter(),
                after + len(text[:line_end].encode()),
                text[text.rfind("\n", 0, found.start()) + 1 : line_end],
            )
        time.sleep(0.05)
    raise SystemExit(f"no {pattern!r} in the broker log within {timeout:.0f} s")


def set_policy(admin, policy: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        TOPIC,
        incremental_configs=[ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def report(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:8s} no samples"
    return (
        f"{name:8s} p50 {statistics.median(values) * 1000:7.2f} ms  p99 {percentile(values, 0.99) * 1000:7.2f} ms"
        f"  max {max(values) * 1000:7.1f} ms  ({len(values)} samples)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--value-size", type=int, default=1000)
    parser.add_argument("--segment-mb", type=int, default=64)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--baseline-s", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=1, help="log.cleaner.threads")
    parser.add_argument(
        "--io-max-bytes-per-second",
        type=float,
        default=None,
        help="log.cleaner.io.max.bytes.per.second (default: Kafka's, unlimited)",
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="longest the compaction may take")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    from strom.testing import Broker

    overrides = {"log.cleaner.backoff.ms": "500", "log.cleaner.threads": str(args.threads)}
    if args.io_max_bytes_per_second is not None:
        overrides["log.cleaner.io.max.bytes.per.second"] = repr(args.io_max_bytes_per_second)
    with Broker(overrides=overrides) as broker:
        broker.create_topic(
            TOPIC,
            1,
            config={
                "cleanup.policy": "delete",
                "retention.ms": "-1",
                "retention.bytes": "-1",
                "segment.bytes": str(args.segment_mb * 1024 * 1024),
            },
        )
        records, seconds = fill(broker.bootstrap_servers, args.size_mb, args.keys, args.value_size)
        print(
            f"filled {TOPIC}: {records} records of {args.value_size} B over {args.keys} keys "
            f"(~{args.size_mb} MB) in {seconds:.1f} s"
        )
        os.sync()  # the fill's dirty pages reach the disk now, not during the baseline
        gc.collect()
        gc.freeze()  # what exists now is never scanned again by this process's collections
        log_path = broker.log_path
        assert log_path is not None
        workload = Workload(broker.bootstrap_servers, args.rate)
        workload.start()
        try:
            time.sleep(2.0)  # connections made, caches warm
            base_start = time.perf_counter()
            time.sleep(args.baseline_s)
            base_end = time.perf_counter()
            mark = os.path.getsize(log_path)
            set_policy(broker.admin, "compact")
            clean_start, mark, started_line = wait_for_line(log_path, rf"cleaning \S*{TOPIC}-0 from offset", mark, 60)
            clean_end, mark, done_line = wait_for_line(log_path, rf"cleaned \S*{TOPIC}-0: ", mark, args.timeout_s)
            # back to delete: the segments the workload fills meanwhile would start another round
            set_policy(broker.admin, "delete")
            time.sleep(1.0)
            after_start = time.perf_counter()
            time.sleep(args.baseline_s)
            after_end = time.perf_counter()
            with open(log_path, "rb") as handle:
                handle.seek(mark)
                again = b"cleaning " in handle.read()
        finally:
            workload.close()
    print(f"broker: {started_line.strip()}")
    print(f"broker: {done_line.strip()}")
    print(
        f"compaction took {clean_end - clean_start:.1f} s in {args.threads} cleaner process(es); "
        f"workload {args.rate} msg/s, acks=1; produce errors: {len(workload.errors)}"
    )
    if again:
        print("note: another cleaning round started during the window after compaction")
    windows = (
        ("no compaction, before", base_start, base_end),
        ("compacting", clean_start, clean_end),
        ("no compaction, after", after_start, after_end),
    )
    for label, start, end in windows:
        print(f"-- {label} ({end - start:.1f} s)")
        for name, samples in (("produce", workload.produce), ("fetch", workload.fetch)):
            print("  " + report(name, samples.window(start, end)))
    figures: dict[str, tuple[float, str]] = {"compaction": (clean_end - clean_start, "s")}
    for name, samples in (("produce", workload.produce), ("fetch", workload.fetch)):
        before = samples.window(base_start, base_end)
        without = before + samples.window(after_start, after_end)
        during = percentile(samples.window(clean_start, clean_end), 0.99)
        figures[f"{name} p99 during compaction / without"] = (during / percentile(without, 0.99), "ratio")
        print(
            f"{name} p99 during compaction / without: {during / percentile(without, 0.99):.2f} against both "
            f"windows without, {during / percentile(before, 0.99):.2f} against the one before (goal <= 1.5)"
        )
    print("(one shared, noisy machine: figures vary from run to run)")
    record_if_asked(args, "compaction", figures, argv)


if __name__ == "__main__":
    main()
