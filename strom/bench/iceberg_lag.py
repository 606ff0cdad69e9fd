"""Translation lag under a steady produce load: how far behind the log an Iceberg table stays.

    python -m strom.bench.iceberg_lag [--rate 20000] [--seconds 60] [--size 100] [--partitions 4]
                                      [--target-lag-ms 1000] [--record]

Starts one broker process (``iceberg.enabled=true``) and a ``key_value`` topic of
``--partitions`` partitions, then produces ``--rate`` messages/s of ``--size``-byte values for
``--seconds`` (confluent-kafka, acks=all, linger.ms=5, round robin over the partitions, paced in
bursts every 5 ms). Once a second, while the load runs and after it stops until the table has
caught up (at most ``--catch-up-s``), it samples

- the lag in records as the broker reports it: ``strom_iceberg_translation_lag_records`` of the
  topic's partitions summed, from the broker's Prometheus ``/metrics`` (the last stable offsets
  now against the table offsets the last translation round read back);
- the lag in seconds as ``strom iceberg status`` defines it: the age of the oldest acknowledged
  record the table does not hold yet, the table's offsets read with pyiceberg from the broker's
  catalog and each record's age from the delivery report (the producer's CreateTime).

Prints max/p50/final of both during the load, the rate actually achieved, and how long after the
load stopped the table held every acknowledged record. Asserts nothing (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from strom.bench.iceberg_broker import IcebergBroker, distinct_value, load_average, paced_produce
from strom.bench.results import add_record_argument, record_if_asked

TOPIC = "lagged"


class Acknowledged:
    """Per partition, the CreateTime (ms) of every acknowledged record by offset (delivery reports
    of one partition arrive in offset order; the topic is new, so offsets start at 0)."""

    def __init__(self, partitions: int):
        self.timestamps: dict[int, list[int]] = {p: [] for p in range(partitions)}
        self.errors = 0

    def report(self, err, msg) -> None:
        if err is not None:
            self.errors += 1
            return
        self.timestamps[msg.partition()].append(msg.timestamp()[1])

    def ends(self) -> dict[int, int]:
        return {p: len(stamps) for p, stamps in self.timestamps.items()}

    def lag_seconds(self, table: dict[int, int], now_ms: int) -> float:
        """The age of the oldest acknowledged record at or past the table's offsets (0: none)."""
        ages = [
            (now_ms - stamps[table.get(p, 0)]) / 1000
            for p, stamps in self.timestamps.items()
            if table.get(p, 0) < len(stamps)
        ]
        return max(ages, default=0.0)


def sample(broker: IcebergBroker, acknowledged: Acknowledged) -> tuple[int | None, float, int]:
    """(the broker's lag in records, the table's lag in seconds, records acknowledged but not in the table)."""
    records = broker.lag_records(TOPIC)
    table = broker.table_offsets(TOPIC)
    ends = acknowledged.ends()
    behind = sum(max(0, end - table.get(p, 0)) for p, end in ends.items())
    return records, acknowledged.lag_seconds(table, int(time.time() * 1000)), behind


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=20_000.0, help="messages per second (default 20,000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the load (default 60)")
    parser.add_argument("--size", type=int, default=100, help="value bytes (default 100)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--target-lag-ms", type=int, default=1000, help="iceberg.target.lag.ms (default 1000)")
    parser.add_argument("--catch-up-s", type=float, default=300.0, help="longest wait after the load (default 300)")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    from confluent_kafka import Producer

    broker = IcebergBroker("strom-bench-iceberg-lag-", args.target_lag_ms, args.dir).start()
    acknowledged = Acknowledged(args.partitions)
    samples: list[tuple[float, int | None, float, int]] = []  # (seconds since the load began, records, s, behind)
    loading = threading.Event()
    stop = threading.Event()
    caught_up_s: float | None = None
    try:
        broker.create_topic(TOPIC, args.partitions, **{"iceberg.mode": "key_value"})
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "enable.idempotence": False,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        broker.lag_records(TOPIC), broker.table_offsets(TOPIC)  # imports and first reads: not in the samples
        began = time.monotonic()

        def sampling() -> None:
            while not stop.wait(1.0):
                try:
                    records, seconds, behind = sample(broker, acknowledged)
                except Exception as exc:  # a catalog read racing a commit, say: the next second samples again
                    print(f"  sample failed: {exc!r}", flush=True)
                    continue
                samples.append((time.monotonic() - began, records, seconds, behind))
                shown = "-" if records is None else f"{records:,}"
                print(
                    f"  {samples[-1][0]:5.0f} s {'load' if loading.is_set() else 'after'}: broker-reported lag "
                    f"{shown} records; table {behind:,} records / {seconds:.1f} s behind the acknowledged",
                    flush=True,
                )

        loading.set()
        sampler = threading.Thread(target=sampling, name="lag-sampler", daemon=True)
        sampler.start()
        sent = int(args.seconds * args.rate)
        took = paced_produce(
            producer, TOPIC, sent, args.rate, distinct_value(args.size), args.partitions, acknowledged.report
        )
        loading.clear()
        load_samples = list(samples)
        load_end = time.monotonic()
        try:
            broker.wait_translated(TOPIC, acknowledged.ends(), args.catch_up_s)
            caught_up_s = time.monotonic() - load_end
        except TimeoutError as exc:
            print(f"  {exc}")
        stop.set()
        sampler.join(15)
        del producer
    finally:
        stop.set()
        broker.close()
    acked = sum(acknowledged.ends().values())
    records = [r for _, r, _, _ in load_samples if r is not None]
    seconds = [s for _, _, s, _ in load_samples]
    print(
        f"\n{sent:,} messages x {args.size} B to {args.partitions} partitions in {took:.1f} s: "
        f"{acked / took:,.0f} msg/s acknowledged (asked {args.rate:,.0f}), {acknowledged.errors} delivery errors; "
        f"iceberg.target.lag.ms={args.target_lag_ms}; {load_average()}"
    )
    figures: dict[str, tuple[float, str]] = {"achieved rate": (acked / took, "msg/s")}
    if records:
        print(
            f"lag in records during the load (broker metric, {len(records)} samples): max {max(records):,}, "
            f"p50 {statistics.median(records):,.0f}, final {records[-1]:,}"
        )
        figures |= {
            "lag records max": (max(records), "records"),
            "lag records p50": (statistics.median(records), "records"),
        }
    if seconds:
        print(
            f"lag in seconds during the load (oldest record not in the table): max {max(seconds):.1f} s, "
            f"p50 {statistics.median(seconds):.1f} s, final {seconds[-1]:.1f} s"
        )
        figures |= {"lag seconds max": (max(seconds), "s"), "lag seconds p50": (statistics.median(seconds), "s")}
    if caught_up_s is not None:
        print(f"the table held every acknowledged record {caught_up_s:.1f} s after the load stopped")
        figures["time to zero lag after the load"] = (caught_up_s, "s")
    else:
        print(f"the table had not caught up {args.catch_up_s:.0f} s after the load stopped")
    record_if_asked(args, "iceberg_lag", figures, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
