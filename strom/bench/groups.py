"""Consumer-group benchmark: how long a group takes to settle after a member joins, under the
three rebalance protocols, and synchronous commit throughput.

    python -m strom.bench.groups [--bootstrap-server H:P] [--runs 5] [--members 10]
        [--partitions 22] [--protocols eager,cooperative,consumer] [--broker-config KEY=VALUE ...]
        [--client-config KEY=VALUE ...] [--commit-seconds 3] [--verbose] [--record]

Without --bootstrap-server it starts a throwaway broker on 127.0.0.1 (port 0, temp data dir) with
Kafka's defaults for everything group related, unless --broker-config says otherwise:
group.initial.rebalance.delay.ms=3000 (it delays only the first rebalance of an empty group, so
it lengthens forming the group, not the join measured here), group.consumer.heartbeat.interval.ms
=5000, group.consumer.session.timeout.ms=45000. The values the broker reports (DescribeConfigs)
are printed.

join: a group of --members confluent-kafka consumers on a topic of --partitions partitions is
stable; one more consumer subscribes. Measured from its subscribe() until it has partitions of its
own ("new member assigned"), and until every member holds its new share, each partition owned by
exactly one member ("settled"). Protocols, at librdkafka's default settings (heartbeat.interval.ms
=3000, session.timeout.ms=45000 for the classic ones; the KIP-848 heartbeat interval is the
broker's):

* eager: classic protocol, partition.assignment.strategy=range (everyone gives up everything);
* cooperative: classic protocol, cooperative-sticky (two rebalances, only moved partitions stop);
* consumer: KIP-848, group.protocol=consumer, the broker's default assignor (uniform).

commit: one group member commits synchronously, one offset per commit, in a loop.

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
from collections.abc import Callable
from typing import Any

from strom.bench.results import add_record_argument, record_if_asked

PROTOCOLS = {
    "eager": {"partition.assignment.strategy": "range"},
    "cooperative": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}
LABELS = {
    "eager": "classic eager (range)",
    "cooperative": "classic cooperative (cooperative-sticky)",
    "consumer": "KIP-848 (group.protocol=consumer)",
}
BROKER_KEYS = (
    "group.initial.rebalance.delay.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.session.timeout.ms",
    "group.consumer.assignors",
)
SETTLE_S = 120  # a bound, not an expectation: a run that takes longer is reported as failed


class Broker:
    """A throwaway strom broker process (the benchmark's own; stopped with SIGTERM, then SIGKILL)."""

    def __init__(self, config: dict[str, str] | None = None) -> None:
        self.directory = tempfile.mkdtemp(prefix="strom-bench-groups-")
        data = os.path.join(self.directory, "data")
        overrides = {
            "broker.id": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": data,
            "offsets.topic.replication.factor": "1",
            **(config or {}),
        }
        command = [sys.executable, "-m", "strom.cli.main", "server-start", "--parent-pid", str(os.getpid())]
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
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(15)
    return name


def broker_settings(bootstrap: str) -> dict[str, str]:
    """The group settings the broker reports, so the figures say what they were measured with."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    broker_id = next(iter(admin.list_topics(timeout=15).brokers))
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(15)
    return {key: entries[key].value if key in entries else "(not reported)" for key in BROKER_KEYS}


class Member:
    """A confluent-kafka consumer that tracks what it owns through the rebalance callbacks (whole
    assignments under the eager protocol, increments under the other two)."""

    def __init__(self, bootstrap: str, group: str, topic: str, config: dict[str, Any]):
        from confluent_kafka import Consumer

        self.incremental = config.get("partition.assignment.strategy") != "range"
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 3, **config}
        )
        self.owned: set[int] = set()
        self.assigned_at: float | None = None
        self.closed = False
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    def _assign(self, _consumer, partitions) -> None:
        got = {p.partition for p in partitions}
        self.owned = self.owned | got if self.incremental else got
        if got and self.assigned_at is None:
            self.assigned_at = time.perf_counter()

    def _revoke(self, _consumer, partitions) -> None:
        self.owned -= {p.partition for p in partitions}

    def poll(self) -> None:
        self.consumer.poll(0.002)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_until(members: list[Member], predicate: Callable[[], bool], timeout: float = SETTLE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the group did not settle within {timeout} s")
        for member in members:
            member.poll()


def settled(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one member, every member with its even share."""
    owned = [m.owned for m in members]
    sizes = sorted(len(o) for o in owned)
    return (
        sum(sizes) == partitions
        and len(set().union(*owned)) == partitions
        and sizes[-1] - sizes[0] <= 1
        and (sizes[0] > 0 or partitions < len(members))
    )


def bench_join(
    bootstrap: str, topic: str, partitions: int, size: int, config: dict[str, Any], runs: int, verbose: bool = False
) -> tuple[list[float], list[float]]:
    """Seconds from the newcomer's subscribe() to its first partitions, and to the whole group's."""
    own, whole = [], []
    for run in range(runs):
        group = f"bench-{uuid.uuid4().hex[:8]}"
        members = [Member(bootstrap, group, topic, config) for _ in range(size)]
        try:
            formed = time.perf_counter()
            poll_until(members, lambda: settled(members, partitions))
            formed = time.perf_counter() - formed
            started = time.perf_counter()
            newcomer = Member(bootstrap, group, topic, config)
            members.append(newcomer)
            poll_until(members, lambda: newcomer.assigned_at is not None)
            assigned_at = newcomer.assigned_at
            assert assigned_at is not None  # poll_until waited for it
            own.append(assigned_at - started)
            poll_until(members, lambda: settled(members, partitions))
            whole.append(time.perf_counter() - started)
            if verbose:
                print(
                    f"  run {run + 1}: group of {size} formed in {ms(formed)}; newcomer assigned "
                    f"{ms(own[-1])}, settled {ms(whole[-1])}",
                    flush=True,
                )
        finally:
            for member in members:
                member.close()
    return own, whole


def bench_commits(bootstrap: str, topic: str, partitions: int, seconds: float) -> list[float]:
    """Latencies (s) of synchronous commits by one group member, for ``seconds``."""
    from confluent_kafka import TopicPartition

    member = Member(bootstrap, f"bench-{uuid.uuid4().hex[:8]}", topic, dict(PROTOCOLS["eager"]))
    try:
        poll_until([member], lambda: len(member.owned) == partitions)
        latencies = []
        offset = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            offset += 1
            started = time.perf_counter()
            member.consumer.commit(offsets=[TopicPartition(topic, offset % partitions, offset)], asynchronous=False)
            latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        member.close()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def key_values(pairs: list[str], option: str) -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{option} takes KEY=VALUE, not {pair!r}")
        result[key] = value
    return result


def table(rows: list[tuple[str, list[float], list[float]]], size: int, runs: int) -> str:
    header = ("protocol", "new member assigned", f"all {size + 1} settled", "settled min..max")
    lines = [header]
    for label, own, whole in rows:
        lines.append(
            (
                label,
                f"median {ms(statistics.median(own))}",
                f"median {ms(statistics.median(whole))}",
                f"{ms(min(whole))}..{ms(max(whole))}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return f"join of member {size + 1} to a group of {size} ({runs} runs each):\n" + "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", help="an existing broker (default: start a throwaway one)")
    parser.add_argument("--runs", type=int, default=5, help="join measurements per protocol")
    parser.add_argument("--members", type=int, default=10, help="members before the join")
    parser.add_argument("--partitions", type=int, default=22, help="partitions of the topic")
    parser.add_argument(
        "--protocols", default=",".join(PROTOCOLS), help=f"which of {', '.join(PROTOCOLS)} (comma-separated)"
    )
    parser.add_argument(
        "--broker-config", action="append", default=[], metavar="KEY=VALUE", help="for the throwaway broker"
    )
    parser.add_argument("--client-config", action="append", default=[], metavar="KEY=VALUE", help="for every consumer")
    parser.add_argument("--commit-seconds", type=float, default=3.0, help="how long to commit for (0: skip)")
    parser.add_argument("--verbose", action="store_true", help="print every run")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol {unknown[0]}; choose from {', '.join(PROTOCOLS)}")
    client = key_values(args.client_config, "--client-config")
    broker = None if args.bootstrap_server else Broker(key_values(args.broker_config, "--broker-config"))
    bootstrap = args.bootstrap_server if broker is None else broker.bootstrap
    try:
        topic = create_topic(bootstrap, args.partitions)
        settings = ", ".join(f"{k}={v}" for k, v in broker_settings(bootstrap).items())
        print(f"broker {bootstrap}; topic {topic} with {args.partitions} partitions", flush=True)
        print(f"broker: {settings}", flush=True)
        import confluent_kafka

        print(
            f"clients: librdkafka {confluent_kafka.libversion()[0]}, its defaults (classic: heartbeat.interval.ms"
            "=3000, session.timeout.ms=45000; KIP-848: the heartbeat interval the broker gives)"
            + (f"; set: {', '.join(f'{k}={v}' for k, v in client.items())}" if client else ""),
            flush=True,
        )
        rows = []
        figures: dict[str, tuple[float, str]] = {}
        for protocol in protocols:
            config = {**PROTOCOLS[protocol], **client}
            if protocol == "consumer":  # librdkafka refuses the classic-only settings here
                config = {k: v for k, v in config.items() if k not in ("session.timeout.ms", "heartbeat.interval.ms")}
            if args.verbose:
                print(f"{LABELS[protocol]}:", flush=True)
            own, whole = bench_join(bootstrap, topic, args.partitions, args.members, config, args.runs, args.verbose)
            rows.append((LABELS[protocol], own, whole))
            figures[f"{LABELS[protocol]}: new member assigned"] = (statistics.median(own) * 1000, "ms")
            figures[f"{LABELS[protocol]}: all settled"] = (statistics.median(whole) * 1000, "ms")
        print(table(rows, args.members, args.runs), flush=True)
        if args.commit_seconds > 0:
            latencies = bench_commits(bootstrap, topic, args.partitions, args.commit_seconds)
            rate = len(latencies) / sum(latencies)
            print(
                f"synchronous commits, one consumer: {len(latencies)} in {sum(latencies):.1f} s = {rate:.0f} "
                f"commits/s (latency p50 {percentile(latencies, 0.5) * 1000:.2f} ms, "
                f"p99 {percentile(latencies, 0.99) * 1000:.2f} ms)"
            )
            figures["synchronous commits"] = (rate, "commits/s")
    finally:
        if broker is not None:
            broker.stop()
    record_if_asked(args, "groups", figures, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
