"""Consumer-group benchmark: rebalance latency and synchronous commit throughput.

    python -m strom.bench.groups [--bootstrap-server H:P] [--runs 7] [--commit-seconds 3]

Without --bootstrap-server it starts a throwaway broker on 127.0.0.1 (port 0, temp data dir,
group.initial.rebalance.delay.ms=0). With confluent-kafka consumers:

* join: a 3-member group on a 6-partition topic is stable; a 4th consumer subscribes; measured
  until it has its assignment, and until all four hold their new assignments. Eager (range) and
  incremental (cooperative-sticky); members heartbeat every 500 ms, which bounds how soon the
  existing members hear of the rebalance.
* commit: one group member commits synchronously, one offset per commit, in a loop.

Prints medians and spreads; asserts nothing about time (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HEARTBEAT_MS = 500
SESSION_MS = 6000
PARTITIONS = 6


class Broker:
    """A throwaway strom broker process (the benchmark's own; stopped with SIGTERM, then SIGKILL)."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="strom-bench-groups-")
        data = os.path.join(self.directory, "data")
        overrides = {
            "broker.id": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": data,
            "group.initial.rebalance.delay.ms": "0",
        }
        command = [sys.executable, "-m", "strom.cli.main", "server-start"]
        for key, value in overrides.items():
            command += ["--override", f"{key}={value}"]
        self.log = open(os.path.join(self.directory, "broker.log"), "ab")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        port_file = os.path.join(data, "strom.port")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the broker exited with {self.process.returncode}; see {self.directory}")
            if os.path.exists(port_file) and open(port_file).read().strip():
                self.bootstrap = f"127.0.0.1:{int(open(port_file).read())}"
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("the broker did not start within 20 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def create_topic(bootstrap: str, partitions: int, prefix: str = "bench-groups") -> str:
    """A fresh topic with a random name, so runs against a long-lived broker never meet."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(15)
    return name


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str):
        from confluent_kafka import Consumer

        self.cooperative = strategy == "cooperative-sticky"
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "partition.assignment.strategy": strategy,
                "log_level": 3,
            }
        )
        self.owned: set[int] = set()
        self.assigned_at: float | None = None
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    def _assign(self, _consumer, partitions) -> None:
        got = {p.partition for p in partitions}
        self.owned = self.owned | got if self.cooperative else got
        if got:
            self.assigned_at = time.perf_counter()

    def _revoke(self, _consumer, partitions) -> None:
        self.owned -= {p.partition for p in partitions}

    def poll(self) -> None:
        self.consumer.poll(0.002)


def poll_until(members: list[Member], predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the group did not settle")
        for member in members:
            member.poll()


def split_evenly(members: list[Member]) -> bool:
    owned = [m.owned for m in members]
    sizes = sorted(len(o) for o in owned)
    return sum(sizes) == PARTITIONS and len(set().union(*owned)) == PARTITIONS and sizes[-1] - sizes[0] <= 1


def bench_join(bootstrap: str, topic: str, strategy: str, runs: int) -> tuple[list[float], list[float]]:
    """Seconds from subscribe() to the new member's assignment, and to the whole group's."""
    own, whole = [], []
    for _ in range(runs):
        group = f"bench-{uuid.uuid4().hex[:8]}"
        members = [Member(bootstrap, group, topic, strategy) for _ in range(3)]
        try:
            poll_until(members, lambda: split_evenly(members))
            started = time.perf_counter()
            newcomer = Member(bootstrap, group, topic, strategy)
            members.append(newcomer)
            poll_until(members, lambda: newcomer.assigned_at is not None)
            assigned_at = newcomer.assigned_at
            assert assigned_at is not None  # poll_until waited for it
            own.append(assigned_at - started)
            poll_until(members, lambda: split_evenly(members))
            whole.append(time.perf_counter() - started)
        finally:
            for member in members:
                member.consumer.close()
    return own, whole


def bench_commits(bootstrap: str, topic: str, seconds: float) -> list[float]:
    """Latencies (s) of synchronous commits by one group member, for ``seconds``."""
    from confluent_kafka import TopicPartition

    member = Member(bootstrap, f"bench-{uuid.uuid4().hex[:8]}", topic, "range")
    try:
        poll_until([member], lambda: len(member.owned) == PARTITIONS)
        latencies = []
        offset = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            offset += 1
            started = time.perf_counter()
            member.consumer.commit(offsets=[TopicPartition(topic, offset % PARTITIONS, offset)], asynchronous=False)
            latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        member.consumer.close()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", help="an existing broker (default: start a throwaway one)")
    parser.add_argument("--runs", type=int, default=7, help="join measurements per assignment strategy")
    parser.add_argument("--commit-seconds", type=float, default=3.0, help="how long to commit for")
    args = parser.parse_args(argv)
    broker = None if args.bootstrap_server else Broker()
    bootstrap = args.bootstrap_server if broker is None else broker.bootstrap
    try:
        topic = create_topic(bootstrap, PARTITIONS)
        print(
            f"broker {bootstrap}; topic {topic} with {PARTITIONS} partitions; "
            f"heartbeat.interval.ms={HEARTBEAT_MS}, session.timeout.ms={SESSION_MS}"
        )
        for strategy in ("range", "cooperative-sticky"):
            own, whole = bench_join(bootstrap, topic, strategy, args.runs)
            print(
                f"join a 3-member group ({strategy}, {args.runs} runs): new member assigned after "
                f"median {ms(statistics.median(own))} (min {ms(min(own))}, max {ms(max(own))}); "
                f"all 4 settled after median {ms(statistics.median(whole))} (max {ms(max(whole))})"
            )
        latencies = bench_commits(bootstrap, topic, args.commit_seconds)
        rate = len(latencies) / sum(latencies)
        print(
            f"synchronous commits, one consumer: {len(latencies)} in {sum(latencies):.1f} s = {rate:.0f} commits/s "
            f"(latency p50 {percentile(latencies, 0.5) * 1000:.2f} ms, p99 {percentile(latencies, 0.99) * 1000:.2f} ms)"
        )
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
