"""Cluster benchmark: what replication costs and how long a failover takes, on a local 3-broker cluster.

    python -m strom.bench.cluster [--messages 1000000] [--rounds 3] [--size 200] [--failovers 3]
                                  [--latency-s 10] [--rates 1000 10000] [--linger-ms 0 1]
                                  [--load kcat|python]

Starts ZooKeeper and three brokers with ``strom cluster start`` in a temporary directory
(zookeeper.session.timeout.ms=6000, replica.lag.time.max.ms=3000), then measures with
confluent-kafka:

- produce throughput at replication factor 3 with acks=all against replication factor 1 in the
  same run (3 partitions each, linger.ms=5 and the client's default batch.size) and their ratio,
  alternating for ``--rounds`` rounds (one 200,000-message round took 0.2-0.3 s and its ratio
  ranged from 0.56 to 0.85 in two runs a few minutes apart), with kcat as the load by default so
  that the client is not what limits it. By default each round does this twice, with an
  idempotent producer and with a plain one (``--idempotence``): an idempotent librdkafka keeps
  at most five requests in flight and wakes its broker thread for every message queued while
  they await acknowledgement, so at RF=3, whose acknowledgements take longer, kcat spends about
  twice the CPU per message that it does at RF=1, on the same two cores as the brokers. The
  plain producer shows what the cluster does when the client is not the limit;
- failover: kill -9 the leader of a partition while an acks=all producer writes to every
  partition that broker leads; the time from the kill to the first acknowledged write on those
  partitions. Detection takes the ZooKeeper session timeout, which dominates; the killed broker
  is restarted and the ISR refilled before the next round;
- end-to-end latency at replication factor 3, acks=all, at each rate and each linger.ms: a paced
  producer writes its send time into each message and an assigned consumer in another process
  subtracts it on arrival (wall clock); p50/p99/max per rate, and the CPU each process used. The
  consumer's group.id brings __consumer_offsets (50 partitions, RF 3) into being, as in
  any real cluster; how many partitions each broker follows is printed (followers fetch through
  KIP-227 sessions, so a full request listing all of them is rare).

Prints figures and asserts nothing (these machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from strom.bench.requests import cpu_seconds, kcat_produce
from strom.bench.results import add_record_argument, record

SESSION_TIMEOUT_MS = 6000
LAG_TIME_MAX_MS = 3000
# The paced producer sleeps at least this long whenever it is ahead, then sends what fell due
# meanwhile, each message stamped as it is produced. Waiting out each 0.1 ms gap at 10,000 msg/s
# kept this process on a whole core (top: 93-96%), the brokers had the other one, and the
# latency measured was the machine's queue (p99 60 ms).
PACING_TICK_S = 0.001


def strom(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=timeout
    )


class LocalCluster:
    def __init__(self, directory: str, lag_time_max_ms: int = LAG_TIME_MAX_MS, removed_with: str | None = None):
        self.dir = directory
        self._removed_with = removed_with  # a temporary directory of the cluster's, removed by stop()
        started = strom(
            "cluster",
            "start",
            "--brokers",
            "3",
            "--dir",
            directory,
            "--override",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "--override",
            f"replica.lag.time.max.ms={lag_time_max_ms}",
        )
        if started.returncode != 0:
            raise SystemExit(f"strom cluster start failed:\n{started.stdout}{started.stderr}")
        found = re.search(r"^Bootstrap servers: (\S+)$", started.stdout, re.M)
        if found is None:
            raise SystemExit(f"strom cluster start printed no bootstrap servers:\n{started.stdout}")
        self.bootstrap = found[1]
        from confluent_kafka.admin import AdminClient

        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def pid(self, broker_id: int) -> int:
        with open(os.path.join(self.dir, "pids", f"server-{broker_id}.pid")) as handle:
            return int(handle.read())

    def kill(self, broker_id: int) -> None:
        os.kill(self.pid(broker_id), signal.SIGKILL)

    def restart(self, broker_id: int) -> None:
        from strom.cli.cluster import Layout, _spawn

        layout = Layout(self.dir)
        _spawn(
            [sys.executable, "-m", "strom.cli.main", "server-start", layout.properties(broker_id)],
            layout.broker_log(broker_id),
            layout.broker_pid(broker_id),
        )

    def create_topic(self, name: str, partitions: int, replication_factor: int, configs: dict | None = None) -> None:
        from confluent_kafka.admin import NewTopic

        futures = self.admin.create_topics([NewTopic(name, partitions, replication_factor, config=configs or {})])
        for future in futures.values():
            future.result(timeout=30)
        self.wait(lambda: self.full_isr(name), 30, f"{name} to be fully in sync")

    def delete_topic(self, name: str) -> None:
        """Delete ``name`` and wait until no broker has its files, so the page cache they held is free."""
        from strom.cli.cluster import Layout

        for future in self.admin.delete_topics([name], operation_timeout=30).values():
            future.result(timeout=30)
        data_dirs = [Layout(self.dir).data(broker_id) for broker_id in (1, 2, 3)]

        def gone() -> bool:
            return not any(entry.startswith(f"{name}-") for data in data_dirs for entry in os.listdir(data))

        self.wait(gone, 30, f"{name}'s files to be deleted")

    def partitions(self, topic: str):
        metadata = self.admin.list_topics(topic, timeout=10)
        return metadata.topics[topic].partitions

    def full_isr(self, topic: str) -> bool:
        try:
            parts = self.partitions(topic)
        except Exception:
            return False
        return bool(parts) and all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in parts.values())

    @staticmethod
    def wait(condition, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.1)
        raise SystemExit(f"timed out waiting for {what}")

    @classmethod
    def under(cls, directory: str | None, name: str, lag_time_max_ms: int = LAG_TIME_MAX_MS) -> LocalCluster:
        """A cluster in ``directory``/cluster (a benchmark's --dir), or in a temporary directory
        that ``stop`` removes."""
        root = directory or tempfile.mkdtemp(prefix=f"strom-bench-{name}-")
        return cls(os.path.join(root, "cluster"), lag_time_max_ms, None if directory else root)

    def stop(self) -> None:
        strom("cluster", "stop", "--dir", self.dir)
        if self._removed_with is not None:
            shutil.rmtree(self._removed_with, ignore_errors=True)


# -- throughput ------------------------------------------------------------------------------------
def produce_throughput(bootstrap: str, topic: str, count: int, size: int, idempotent: bool) -> float:
    """Seconds to produce ``count`` messages of ``size`` bytes with acks=all, until all are acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "queue.buffering.max.messages": 500000,
            "log_level": 3,
        }
    )
    payload = os.urandom(size // 2).hex().encode()[:size]
    failed = []

    def report(err, msg):
        if err is not None:
            failed.append(err)

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payload, partition=i % 3, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.perf_counter() - started
    if left or failed:
        raise SystemExit(f"{topic}: {left} undelivered, {len(failed)} failed ({failed[:3]})")
    return elapsed


def kcat_acks_all(idempotent: bool) -> dict[str, str]:
    """kcat's producer settings in the throughput loads (librdkafka's default batch size)."""
    return {"acks": "all", "enable.idempotence": str(idempotent).lower(), "linger.ms": "5"}


def kcat_line(size: int) -> bytes:
    """One kcat input line that makes a message of ``size`` bytes (hex: no newline inside)."""
    return os.urandom(size // 2).hex().encode()[: size - 1] + b"\n"


def kcat_throughput(kcat: str, bootstrap: str, topic: str, count: int, size: int, idempotent: bool) -> float:
    """Seconds for kcat (librdkafka in C, so the load is not a Python loop) to produce ``count``
    messages of ``size`` bytes over the topic's partitions with acks=all, until all are
    acknowledged; kcat exits non-zero if any delivery failed."""
    config = kcat_acks_all(idempotent)
    return kcat_produce(kcat, bootstrap, topic, kcat_line(size) * count, config, partition=None, quiet=True)


# -- failover --------------------------------------------------------------------------------------
def failover_round(cluster: LocalCluster, topic: str) -> tuple[float, int, list[int]]:
    """Kill the leader of partition 0; seconds until the first acknowledged write on its partitions."""
    from confluent_kafka import Producer

    parts = cluster.partitions(topic)
    victim = parts[0].leader
    led = sorted(p for p, meta in parts.items() if meta.leader == victim)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 200,
            "topic.metadata.refresh.interval.ms": 500,
            "reconnect.backoff.max.ms": 200,
            "log_level": 0,
        }
    )
    first_ack: list[float] = []
    kill_time = [0.0]
    lock = threading.Lock()

    def report(err, msg, sent_at):
        # only a write sent after the kill counts: earlier ones may have been committed before it
        if err is None and kill_time[0] and sent_at > kill_time[0]:
            with lock:
                if not first_ack:
                    first_ack.append(time.monotonic())

    stop = threading.Event()

    def write():
        i = 0
        while not stop.is_set():
            sent_at = time.monotonic()
            producer.produce(
                topic, b"x" * 100, partition=led[i % len(led)], on_delivery=functools.partial(report, sent_at=sent_at)
            )
            producer.poll(0.005)
            i += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    time.sleep(1.0)  # steady state first
    # The clock starts once the kill has returned. Started before it, the writer thread could hold
    # the GIL between the two for a few ms and have a write acknowledged by the still-living leader
    # (a round of 0.00 s in one run).
    cluster.kill(victim)
    kill_time[0] = time.monotonic()
    deadline = time.monotonic() + SESSION_TIMEOUT_MS / 1000 + 30
    while not first_ack and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    writer.join(10)
    producer.flush(30)
    took = first_ack[0] - kill_time[0] if first_ack else float("nan")
    cluster.restart(victim)
    cluster.wait(lambda: cluster.full_isr(topic), 60, f"{topic} back in sync after restarting {victim}")
    return took, victim, led


# -- end-to-end latency ----------------------------------------------------------------------------
def _consume_latencies(bootstrap: str, topic: str, expected: int, ready, results) -> None:
    """The consumer side of end_to_end_latency, in its own process: a consumer sharing the
    producer's interpreter would wait for its GIL and add that to every figure."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, -1) for p in range(3)])  # -1: from the end
    latencies: list[float] = []
    warmed: set[int] = set()
    deadline = time.monotonic() + 120
    while len(latencies) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        value, partition = msg.value(), msg.partition()
        assert value is not None and partition is not None  # the bench's own messages
        if value == b"warm-up":
            if partition not in warmed:
                warmed.add(partition)
                ready.put(len(warmed))
            continue
        (sent,) = struct.unpack(">d", value[:8])
        latencies.append((time.time() - sent) * 1000)
    consumer.close()
    results.put(latencies)


def client_cpu_s(load: str) -> float:
    """CPU seconds of the throughput load so far: kcat's (finished child processes) or this process's."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN if load == "kcat" else resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def end_to_end_latency(
    bootstrap: str, topic: str, seconds: float, rate: int, linger_ms: float, watched: dict[str, int]
) -> tuple[list[float], dict[str, float]]:
    """Milliseconds from produce() to the consumer's poll() returning the message (wall clock:
    the consumer runs in another process), and the share of one CPU that each process used while
    the messages were sent: on two cores a client that takes one of them leaves the brokers
    queueing behind each other, and that shows in the tail. ``watched``: name -> pid, besides the
    producer (this process) and the consumer."""
    import multiprocessing
    import queue

    from confluent_kafka import Producer

    expected = int(seconds * rate)
    context = multiprocessing.get_context("spawn")
    ready, results = context.Queue(), context.Queue()
    reader = context.Process(target=_consume_latencies, args=(bootstrap, topic, expected, ready, results))
    reader.start()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "log_level": 3,
        }
    )
    try:
        # connections, producer id and offset lookups first: time the steady state, not the start
        warmed = 0
        deadline = time.monotonic() + 60
        while warmed < 3 and time.monotonic() < deadline:
            for p in range(3):
                producer.produce(topic, b"warm-up", partition=p)
            producer.flush(10)
            try:
                while True:
                    warmed = max(warmed, ready.get(timeout=0.2))
            except queue.Empty:
                pass
        interval = 1.0 / rate
        watched = {"producer": os.getpid(), "consumer": reader.pid or 0, **watched}
        cpu_before = {name: cpu_seconds(pid) for name, pid in watched.items()}
        started = time.perf_counter()
        for i in range(expected):
            ahead = started + i * interval - time.perf_counter()
            if ahead > 0:
                producer.poll(0)
                time.sleep(max(ahead, PACING_TICK_S))
            producer.produce(topic, struct.pack(">d", time.time()) + b"x" * 92, partition=i % 3)
        sending_s = time.perf_counter() - started
        cpu = {name: (cpu_seconds(pid) - cpu_before[name]) / sending_s for name, pid in watched.items()}
        producer.flush(30)
        try:
            return results.get(timeout=150), cpu
        except queue.Empty:
            return [], cpu
    finally:
        reader.join(10)
        if reader.is_alive():
            reader.kill()


def followed_partitions(cluster: LocalCluster) -> dict[int, int]:
    """broker id -> partitions it replicates without leading them (what its fetchers carry)."""
    metadata = cluster.admin.list_topics(timeout=10)
    counts = {b: 0 for b in metadata.brokers}
    for topic in metadata.topics.values():
        for partition in topic.partitions.values():
            for replica in partition.replicas:
                if replica != partition.leader:
                    counts[replica] = counts.get(replica, 0) + 1
    return dict(sorted(counts.items()))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput_rounds(
    cluster: LocalCluster,
    throughput: Callable[[str, str, int, int, bool], float],
    args: argparse.Namespace,
    modes: tuple[bool, ...],
) -> dict[str, float]:
    """RF=1 then RF=3 for each producer mode (idempotent or not) in every one of ``args.rounds``
    rounds, each pair on new topics that are deleted after it. The rounds once wrote to the same
    two topics, and from the fourth or fifth on (about 5 GB written) the brokers spent three
    times the CPU per message, most likely because this VM writes into new memory about nine
    times slower once some 8 GB hold data (``scripts/tmpfs_write_rate.py`` shows that without
    strom). Deleting each round's logs gives their page cache back, and the rounds stayed even.
    Prints each round and the median ratio per mode, and returns the medians."""
    mb = args.messages * args.size / 1e6
    names = {True: "idempotent", False: "plain"}
    print(
        f"\nproduce with {args.load}, acks=all, {args.messages} x {args.size} B, 3 partitions, "
        f"{' and '.join(names[mode] for mode in modes)} producer, linger.ms=5, the client's default batch.size; "
        f"RF=1 and RF=3 alternate on new topics, {args.rounds} rounds. CPU-s per million messages: the three "
        f"brokers together, and the client"
    )
    print(
        f"{'':21}{'RF=1 msg/s':>11}{'MB/s':>7}{'brokers':>8}{'client':>7}"
        f"{'RF=3 msg/s':>12}{'MB/s':>7}{'brokers':>8}{'client':>7}{'ratio':>7}"
    )
    broker_pids = [cluster.pid(b) for b in (1, 2, 3)]
    per_million = 1e6 / args.messages
    ratios: dict[bool, list[float]] = {mode: [] for mode in modes}
    for round_ in range(args.rounds):
        for idempotent in modes:
            row = f"round {round_ + 1:<3}{names[idempotent]:<12}"
            topics = {
                1: f"bench-rf1-round{round_ + 1}-{names[idempotent]}",
                3: f"bench-rf3-round{round_ + 1}-{names[idempotent]}",
            }
            for replication_factor, topic in topics.items():
                cluster.create_topic(
                    topic, 3, replication_factor, {"min.insync.replicas": str(min(2, replication_factor))}
                )
                throughput(cluster.bootstrap, topic, min(20000, args.messages), args.size, idempotent)  # warm up
            round_seconds = []
            for topic in topics.values():
                broker_cpu, client_cpu = sum(map(cpu_seconds, broker_pids)), client_cpu_s(args.load)
                seconds = throughput(cluster.bootstrap, topic, args.messages, args.size, idempotent)
                broker_cpu = sum(map(cpu_seconds, broker_pids)) - broker_cpu
                client_cpu = client_cpu_s(args.load) - client_cpu
                row += (
                    f"{args.messages / seconds:{11 if topic == topics[1] else 12}.0f}{mb / seconds:7.1f}"
                    f"{broker_cpu * per_million:8.2f}{client_cpu * per_million:7.2f}"
                )
                round_seconds.append(seconds)
            for topic in topics.values():
                cluster.delete_topic(topic)
            ratios[idempotent].append(round_seconds[0] / round_seconds[1])
            print(f"{row}{ratios[idempotent][-1]:7.2f}")
    for idempotent, found in ratios.items():
        print(
            f"RF=3 / RF=1 throughput ratio, {names[idempotent]} producer: median {statistics.median(found):.2f} "
            f"(min {min(found):.2f})"
        )
    return {f"RF=3 / RF=1, {names[idempotent]}": statistics.median(found) for idempotent, found in ratios.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1000000, help="messages per throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (RF=1 then RF=3 in each)")
    parser.add_argument("--size", type=int, default=200, help="message size in bytes")
    parser.add_argument("--failovers", type=int, default=3, help="leader kills to time")
    parser.add_argument("--latency-s", type=float, default=10.0, help="seconds of paced latency measurement")
    parser.add_argument(
        "--rates",
        type=int,
        nargs="+",
        default=[1000, 10000],
        help="paced messages/s of the latency measurements (default 1000 10000, the issue's rates)",
    )
    parser.add_argument(
        "--linger-ms",
        type=float,
        nargs="+",
        default=[0, 1],
        help="the latency producer's linger.ms values, each run at every rate (default 0 1: at 0 librdkafka "
        "sends every message in a request of its own, and its threads take about a core at 10,000 msg/s)",
    )
    parser.add_argument("--dir", help="where the cluster lives (default: a temporary directory, removed)")
    parser.add_argument(
        "--load",
        choices=["kcat", "python"],
        default="kcat",
        help="the throughput load: kcat (C, default) or a confluent-kafka loop in this process",
    )
    parser.add_argument(
        "--idempotence",
        choices=["both", "on", "off"],
        default="both",
        help="the throughput producer: idempotent, plain, or both one after the other (default)",
    )
    parser.add_argument("--kcat", default=shutil.which("kcat") or "kcat")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    figures: dict[str, tuple[float, str]] = {}

    cluster = LocalCluster.under(args.dir, "cluster")
    print(f"cluster benchmark: 3 brokers + ZooKeeper on 127.0.0.1 in {cluster.dir}")
    print(
        f"settings: zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS} replica.lag.time.max.ms={LAG_TIME_MAX_MS}, "
        f"{os.cpu_count()} CPUs"
    )
    try:
        cluster.create_topic("bench-rf3", 3, 3, {"min.insync.replicas": "2"})  # the latency measurement's
        throughput: Callable[[str, str, int, int, bool], float] = produce_throughput
        if args.load == "kcat":
            throughput = functools.partial(kcat_throughput, args.kcat)
        modes = {"both": (True, False), "on": (True,), "off": (False,)}[args.idempotence]
        for name, ratio in throughput_rounds(cluster, throughput, args, modes).items():
            figures[name] = (ratio, "ratio")

        cluster.create_topic("bench-failover", 3, 3, {"min.insync.replicas": "2"})
        print(
            f"\nfailover: kill -9 of a leader -> first acks=all write acknowledged on its partitions "
            f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS})"
        )
        times = []
        for round_ in range(args.failovers):
            took, victim, led = failover_round(cluster, "bench-failover")
            times.append(took)
            print(f"  round {round_ + 1}: killed broker {victim} (leader of partitions {led}): {took:.2f} s")
        if times:
            print(f"  median {statistics.median(times):.2f} s, min {min(times):.2f} s, max {max(times):.2f} s")
            figures["failover, median"] = (statistics.median(times), "s")

        print(
            f"\nend-to-end latency, RF=3, acks=all, idempotent, {args.latency_s:.0f} s per rate; CPU: the share of "
            f"one core each process used while sending ({os.cpu_count()} cores in all)"
        )
        brokers = {f"broker {b}": cluster.pid(b) for b in (1, 2, 3)}
        for linger_ms in args.linger_ms:
            for rate in args.rates:
                latencies, cpu = end_to_end_latency(
                    cluster.bootstrap, "bench-rf3", args.latency_s, rate, linger_ms, brokers
                )
                if latencies:
                    print(
                        f"  linger.ms={linger_ms:g} {rate:5d} msg/s ({len(latencies)} messages): "
                        f"p50 {percentile(latencies, 0.50):.1f} ms  p99 {percentile(latencies, 0.99):.1f} ms  "
                        f"max {max(latencies):.1f} ms"
                    )
                    print("    CPU " + ", ".join(f"{name} {share:.0%}" for name, share in cpu.items()))
                    where = f"{rate} msg/s, linger.ms={linger_ms:g}"
                    figures[f"p50, {where}"] = (percentile(latencies, 0.50), "ms")
                    figures[f"p99, {where}"] = (percentile(latencies, 0.99), "ms")
        print(
            f"  partitions each broker follows (what every fetch of its fetchers carries, "
            f"__consumer_offsets included): {followed_partitions(cluster)}"
        )
    finally:
        cluster.stop()
    if args.record:
        record(args.record, "cluster", figures, argv)


if __name__ == "__main__":
    main()
