"""Reassignment benchmark: grow a 3-broker cluster to 4 and move a quarter of the partitions onto it, throttled.

    python -m strom.bench.reassign [--partitions 8] [--mb-per-partition 8] [--throttle 1000000] [--rate 500]
        [--record]

The user's path, command by command: ``strom cluster start --brokers 3``, a topic with replication
factor 3 filled with --mb-per-partition of data per partition, ``strom cluster add-broker``, then
``strom reassign-partitions --execute --throttle B`` with a plan that replaces one replica of every
fourth partition by the new broker, while an idempotent acks=all producer writes --rate msg/s.
While the move runs, the bytes in the new broker's replicas are sampled every 0.5 s; the
replication rate is the bytes copied from the first sample with data to the first sample at 98 % of
the final size, divided by the time between them, printed against the throttle (the overall figure,
--execute to completion, includes starting the fetchers, the ISR join and the controller's
completion). Afterwards ``--verify`` (which clears the throttles),
every acknowledged message is read back at its offset, and each moved partition's replicas are
compared batch by batch (base offset, last offset, CRC).

Prints figures and asserts nothing (the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from strom.bench.results import add_record_argument, record_if_asked


def strom(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def found(pattern: str, text: str) -> str:
    match = re.search(pattern, text, re.MULTILINE)
    if match is None:
        raise SystemExit(f"{pattern!r} not in:\n{text}")
    return match[1]


def must(result: subprocess.CompletedProcess, what: str) -> str:
    if result.returncode != 0:
        raise SystemExit(f"{what} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def log_bytes(directory: str) -> int:
    try:
        return sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".log"))
    except FileNotFoundError:
        return 0


def batches(directory: str) -> list[tuple[int, int, int]]:
    from strom.cli.dump_log import scan_log

    found = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".log"):
            for header, _ in scan_log(os.path.join(directory, name))[0]:
                found.append((header.base_offset, header.last_offset, header.crc))
    return found


class PacedProducer:
    """An idempotent acks=all producer at a fixed rate, recording what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int):
        from confluent_kafka import Producer

        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5, "log_level": 3}
        )
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.acked: list[tuple[int, int, bytes]] = []
        self.latencies: list[float] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sent = 0
        start = time.monotonic()
        while not self._stop.is_set():
            due = start + sent / self.rate
            now = time.monotonic()
            if due > now:
                time.sleep(min(due - now, 0.01))
                self.producer.poll(0)
                continue
            value = f"{sent:012d}".encode() + b"x" * 88
            stamp = time.monotonic()

            def done(err, msg, stamp=stamp):
                if err is None:
                    self.acked.append((msg.partition(), msg.offset(), msg.value()))
                    self.latencies.append(time.monotonic() - stamp)
                else:
                    self.failed += 1

            try:
                self.producer.produce(self.topic, value, partition=sent % self.partitions, on_delivery=done)
                sent += 1
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0)

    def start(self) -> PacedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(60)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--mb-per-partition", type=float, default=8.0)
    parser.add_argument("--throttle", type=int, default=1_000_000, help="bytes/s")
    parser.add_argument("--rate", type=int, default=500, help="producer msg/s during the move")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from strom.cli.reassign_partitions import ReassignTool

    directory = tempfile.mkdtemp(prefix="strom-bench-reassign-")
    topic = "bench-reassign"
    try:
        out = must(
            strom(
                "cluster", "start", "--brokers", "3", "--dir", directory, "--override", "replica.lag.time.max.ms=10000"
            ),
            "strom cluster start",
        )
        bootstrap = found(r"^Bootstrap servers: (\S+)$", out)
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
        admin.create_topics([NewTopic(topic, args.partitions, 3)])[topic].result(30)

        fill = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "batch.size": 1_000_000, "log_level": 3}
        )
        chunk = os.urandom(1000)
        per_partition = int(args.mb_per_partition * 1_000_000 / 1000)
        started = time.monotonic()
        for i in range(per_partition * args.partitions):
            while True:
                try:
                    fill.produce(topic, chunk, partition=i % args.partitions)
                    break
                except BufferError:
                    fill.poll(0.05)
            fill.poll(0)
        fill.flush(120)
        print(
            f"filled {args.partitions} partitions with {args.mb_per_partition:g} MB each "
            f"in {time.monotonic() - started:.1f} s"
        )

        out = must(strom("cluster", "add-broker", "--dir", directory), "strom cluster add-broker")
        new_id = int(found(r"started broker (\d+)", out))
        bootstrap = found(r"^Bootstrap servers: (\S+)$", out)
        current = {
            p: list(m.replicas) for p, m in admin.list_topics(topic, timeout=10).topics[topic].partitions.items()
        }
        moving = sorted(current)[::4]
        plan = {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": current[p][:-1] + [new_id], "log_dirs": ["any"] * 3}
                for p in moving
            ],
        }
        plan_file = os.path.join(directory, "plan.json")
        with open(plan_file, "w") as handle:
            json.dump(plan, handle)

        producer = PacedProducer(bootstrap, topic, args.partitions, args.rate).start()
        time.sleep(2)
        before = len(producer.latencies)
        p99_before = percentile(producer.latencies[-before:], 0.99)
        dirs = [os.path.join(directory, "data", f"kafka-logs-{new_id}", f"{topic}-{p}") for p in moving]
        execute_at = time.monotonic()
        must(
            strom(
                "reassign-partitions",
                "--bootstrap-server",
                bootstrap,
                "--reassignment-json-file",
                plan_file,
                "--execute",
                "--throttle",
                str(args.throttle),
            ),
            "reassign-partitions --execute",
        )
        samples: list[tuple[float, int]] = []
        during_from = len(producer.latencies)
        tool = ReassignTool(bootstrap, 1800)  # ListPartitionReassignments until nothing moves
        try:
            while True:
                samples.append((time.monotonic(), sum(log_bytes(d) for d in dirs)))
                if not tool.ongoing():
                    break
                if time.monotonic() - execute_at > 1800:
                    raise SystemExit("the move did not finish within 30 minutes")
                time.sleep(0.5)
        finally:
            tool.close()
        finished_at = time.monotonic()
        during = producer.latencies[during_from:]
        producer.stop()
        must(
            strom(
                "reassign-partitions",
                "--bootstrap-server",
                bootstrap,
                "--reassignment-json-file",
                plan_file,
                "--verify",
            ),
            "reassign-partitions --verify",
        )

        # the copy: from the first bytes on the new broker until 98 % of the final size (the tail after
        # that is the ISR join and the controller's completion, not replication)
        total = samples[-1][1]
        copying = [(t, b) for t, b in samples if 0 < b]
        first = copying[0] if copying else samples[0]
        last = next((s for s in copying if s[1] >= 0.98 * total), samples[-1])
        rate = (last[1] - first[1]) / (last[0] - first[0]) if last[0] > first[0] else float("nan")
        print(
            f"moved {len(moving)} of {args.partitions} partitions ({total / 1e6:.1f} MB) onto broker {new_id} "
            f"in {finished_at - execute_at:.1f} s from --execute to completion "
            f"({total / (finished_at - execute_at) / 1e6:.3f} MB/s overall)"
        )
        print(
            f"replication rate {rate / 1e6:.3f} MB/s against a throttle of {args.throttle / 1e6:.3f} MB/s: "
            f"ratio {rate / args.throttle:.3f}"
        )
        print(
            f"producer during the move: {len(during)} acks=all writes at {args.rate} msg/s, "
            f"p50 {percentile(during, 0.5) * 1000:.1f} ms, p99 {percentile(during, 0.99) * 1000:.1f} ms "
            f"(p99 before the move {p99_before * 1000:.1f} ms), {producer.failed} failed"
        )

        lost = check_acked(bootstrap, topic, producer.acked)
        print(f"acknowledged messages: {len(producer.acked)}, lost or misplaced: {lost}")
        data = os.path.join(directory, "data")
        final = {p: list(m.replicas) for p, m in admin.list_topics(topic, timeout=10).topics[topic].partitions.items()}
        identical = 0
        for p in moving:
            deadline = time.monotonic() + 30
            while True:
                logs = [batches(os.path.join(data, f"kafka-logs-{b}", f"{topic}-{p}")) for b in final[p]]
                if all(log == logs[0] for log in logs) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            identical += all(log == logs[0] for log in logs)
        print(f"moved partitions with identical replica logs: {identical} of {len(moving)}")
        figures = {
            "replication rate": (rate / 1e6, "MB/s"),
            "replication rate / throttle": (rate / args.throttle, "ratio"),
            "producer p99 during the move": (percentile(during, 0.99) * 1000, "ms"),
            "producer p99 before the move": (p99_before * 1000, "ms"),
            "acknowledged messages lost": (lost, "messages"),
        }
        record_if_asked(args, "reassign", figures, argv)
        del admin, fill, producer  # closed before the brokers stop: no reconnect noise
    finally:
        strom("cluster", "stop", "--dir", directory)
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


def check_acked(bootstrap: str, topic: str, acked: list[tuple[int, int, bytes]]) -> int:
    """Acknowledged messages not found at their offset."""
    from confluent_kafka import Consumer, TopicPartition

    wanted: dict[int, dict[int, bytes]] = {}
    for partition, offset, value in acked:
        wanted.setdefault(partition, {})[offset] = value
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-reassign-check",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    missing = 0
    try:
        for partition, offsets in wanted.items():
            consumer.assign([TopicPartition(topic, partition, min(offsets))])
            seen: dict[int, bytes] = {}
            deadline = time.monotonic() + 60
            top = max(offsets)
            while time.monotonic() < deadline and (not seen or max(seen) < top):
                for msg in consumer.consume(1000, 1.0):
                    at, data = msg.offset(), msg.value()
                    if not msg.error() and at is not None and data is not None:
                        seen[at] = data
            missing += sum(1 for o, v in offsets.items() if seen.get(o) != v)
    finally:
        consumer.close()
    return missing


if __name__ == "__main__":
    sys.exit(main())
