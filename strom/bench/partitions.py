"""Many-partitions benchmark: a 3-broker cluster carrying thousands of RF=3 partitions.

    python -m strom.bench.partitions [--partitions 10000] [--messages 20000] [--idle-s 10] [--record]

Starts ZooKeeper and three brokers with ``strom cluster start`` (as ``strom.bench.cluster`` does,
zookeeper.session.timeout.ms=6000, but with Kafka's default replica.lag.time.max.ms=30000) and
prints:

- topic creation: the seconds from CreateTopics until every partition has a leader and a full
  ISR in every broker's Metadata;
- idle CPU per broker (percent of one core over ``--idle-s`` seconds with no clients) and RSS;
- a workload over every partition: ``--messages`` records spread round-robin over all
  partitions with an idempotent acks=all producer, then read back from every partition by an
  assigned consumer; the count read must equal the count acknowledged;
- failover: kill -9 of one broker; the seconds until every partition has a live leader in
  Metadata, and that figure minus the session timeout (the goal is under 10 s after expiry).

Prints figures; asserts nothing about time (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import time

from strom.bench.cluster import SESSION_TIMEOUT_MS, LocalCluster
from strom.bench.connections import rss_kib
from strom.bench.requests import cpu_seconds
from strom.bench.results import add_record_argument, record_if_asked
from strom.resources import raise_open_files_limit

# Each broker holds every partition's replica at RF=3: a descriptor per segment, plus sockets.
# Kafka's documentation asks for at least 100,000 open files per broker.
OPEN_FILES = 100_000


def raise_open_files_for_brokers() -> str:
    """Raise this process's open files limit (the brokers inherit it) where allowed, as an
    operator would with LimitNOFILE=; the brokers themselves never touch the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < OPEN_FILES:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
        except (ValueError, OSError) as exc:
            return f"open files limit {soft}/{hard} (could not raise it to {OPEN_FILES}: {exc})"
    soft, hard = raise_open_files_limit()  # the soft limit up to the hard one, as a broker does
    return f"open files limit {soft}/{hard}"


def rss_mib(pid: int) -> float:
    return rss_kib(pid) / 1024


def logs_made(cluster: LocalCluster, broker_id: int, topic: str) -> int:
    """How many of ``topic``'s partition directories the broker has made (its replicas' logs)."""
    from strom.cli.cluster import Layout

    return len(glob.glob(os.path.join(Layout(cluster.dir).data(broker_id), f"{topic}-*")))


def leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    """partition -> leader as one broker's Metadata shows it (-1 when it has none)."""
    metadata = cluster.admin.list_topics(topic, timeout=30)
    return {p: meta.leader for p, meta in metadata.topics[topic].partitions.items()}


def wait_all_led(cluster: LocalCluster, topic: str, partitions: int, dead: int | None, timeout_s: float) -> float:
    """Seconds until every partition has a leader that is not ``dead``; raises on timeout."""
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        try:
            found = leaders(cluster, topic)
        except Exception:
            found = {}
        if len(found) == partitions and all(leader >= 0 and leader != dead for leader in found.values()):
            return time.monotonic() - started
        time.sleep(0.2)
    raise SystemExit(f"timed out after {timeout_s:.0f}s waiting for every partition of {topic} to have a leader")


def workload(cluster: LocalCluster, topic: str, partitions: int, messages: int) -> tuple[int, int, float, float]:
    """(acknowledged, read back, produce seconds, consume seconds) over every partition."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "queue.buffering.max.messages": max(100000, messages),
            "log_level": 3,
        }
    )
    acknowledged = [0]
    failed: list[object] = []

    def report(err, msg):
        if err is None:
            acknowledged[0] += 1
        else:
            failed.append(err)

    started = time.monotonic()
    for i in range(messages):
        producer.produce(topic, b"v%d" % i, partition=i % partitions, on_delivery=report)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    produced_s = time.monotonic() - started
    if left or failed:
        print(f"  producer: {left} undelivered, {len(failed)} failed ({failed[:3]})")
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "bench-partitions",
            "enable.auto.commit": False,
            "log_level": 3,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    read = 0
    started = time.monotonic()
    deadline = started + 300
    while read < acknowledged[0] and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                read += 1
    consumed_s = time.monotonic() - started
    consumer.close()
    return acknowledged[0], read, produced_s, consumed_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10000, help="partitions of the RF=3 topic")
    parser.add_argument("--messages", type=int, default=20000, help="records spread over every partition")
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds of idle CPU measurement")
    parser.add_argument("--dir", help="where the cluster lives (default: a temporary directory, removed)")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    limits = raise_open_files_for_brokers()
    # Kafka's default replica.lag.time.max.ms: with 10,000 partitions a follower's round of fetches
    # on a shared 2-core machine can take longer than strom.bench.cluster's 3 s
    cluster = LocalCluster.under(args.dir, "partitions", lag_time_max_ms=30000)
    print(f"many-partitions benchmark: 3 brokers + ZooKeeper in {cluster.dir}, {os.cpu_count()} CPUs, {limits}")
    topic = "bench-many"
    try:
        from confluent_kafka.admin import NewTopic

        started = time.monotonic()
        futures = cluster.admin.create_topics(
            [NewTopic(topic, args.partitions, 3, config={"min.insync.replicas": "2"})], request_timeout=600
        )
        for future in futures.values():
            future.result(timeout=600)
        created_s = time.monotonic() - started
        cluster.wait(lambda: cluster.full_isr(topic), 900, f"{topic} to be fully in sync")
        in_sync_s = time.monotonic() - started
        cluster.wait(lambda: all(logs_made(cluster, b, topic) == args.partitions for b in (1, 2, 3)), 1800, "the logs")
        logs_s = time.monotonic() - started
        print(f"\ntopic with {args.partitions} partitions, RF=3:")
        print(
            f"  CreateTopics answered after {created_s:.1f} s; every partition led and fully in sync after {in_sync_s:.1f} s"
        )
        print(f"  every broker had created its {args.partitions} replica logs after {logs_s:.1f} s")

        pids = {b: cluster.pid(b) for b in (1, 2, 3)}
        time.sleep(2)
        before = {b: cpu_seconds(pid) for b, pid in pids.items()}
        time.sleep(args.idle_s)
        print(f"  idle, {args.idle_s:.0f} s, no clients:")
        busiest, largest = 0.0, 0.0
        for b, pid in pids.items():
            busy, rss = (cpu_seconds(pid) - before[b]) / args.idle_s * 100, rss_mib(pid)
            busiest, largest = max(busiest, busy), max(largest, rss)
            print(f"    broker {b}: CPU {busy:5.1f}% of a core, RSS {rss:7.1f} MiB")

        acked, read, produced_s, consumed_s = workload(cluster, topic, args.partitions, args.messages)
        print(
            f"  workload over every partition: {acked} acknowledged in {produced_s:.1f} s, "
            f"{read} read back in {consumed_s:.1f} s{'' if read == acked else '  MISMATCH'}"
        )

        victim = leaders(cluster, topic)[0]
        cluster.kill(victim)
        took = wait_all_led(cluster, topic, args.partitions, victim, SESSION_TIMEOUT_MS / 1000 + 600)
        print(
            f"\nkill -9 of broker {victim}: every partition led by a live broker after {took:.1f} s "
            f"({took - SESSION_TIMEOUT_MS / 1000:.1f} s after the {SESSION_TIMEOUT_MS / 1000:.0f} s session timeout)"
        )
        for b, pid in pids.items():
            if b != victim:
                print(f"    broker {b}: RSS {rss_mib(pid):7.1f} MiB")
    finally:
        cluster.stop()
    figures = {
        "CreateTopics answered": (created_s, "s"),
        "every partition fully in sync": (in_sync_s, "s"),
        "every replica log created": (logs_s, "s"),
        "every partition led again after kill -9": (took, "s"),
        "idle CPU, busiest broker": (busiest, "% of a core"),
        "RSS, largest broker": (largest, "MiB"),
    }
    record_if_asked(args, "partitions", figures, argv)


if __name__ == "__main__":
    main()
