"""``strom producer-perf-test``: producer throughput and latency, like Kafka's ProducerPerformance.

    strom producer-perf-test --topic perf --num-records 1000000 --record-size 100 --throughput -1 \\
        --producer-props bootstrap.servers=127.0.0.1:9092 acks=1 linger.ms=5

Every 5 s it prints Kafka's window line (``N records sent, R records/sec (M MB/sec), A ms avg latency,
X ms max latency.``) -- or, when stderr is a terminal, a progress bar there instead -- and at the end
Kafka's summary line: ``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max
latency, p50 ms 50th, p95 ms 95th, p99 ms 99th, p999 ms 99.9th.``

Latency is produce() to delivery report, as librdkafka measures it for each message (``Message.latency``);
deliveries are served every few hundred messages so the report is not delayed by the send loop.
Payloads are pre-generated (random upper-case letters, like Kafka's) and reused, so the loop costs one
produce() per record. Percentiles are over a sample of at most 500,000 latencies, as in Kafka.
With ``--csv FILE`` it writes one row per second (records delivered, records/s, MB/s, average
latency) and with ``--plot FILE`` draws them (HTML with inline SVG charts; see ``strom.cli.perf_series``).
The exit code is 1 if any record failed, or when no broker answers within --timeout (default 10 s),
which it says in one line naming the bootstrap servers.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from array import array

from strom.cli.client_props import (
    ToolError,
    add_timeout_argument,
    client_config,
    ensure_reachable,
    error_text,
    exits_quietly_on_broken_pipe,
)
from strom.cli.perf_series import Series
from strom.cli.progress import ProgressBar, wants_progress_bar

REPORT_INTERVAL_S = 5.0
POLL_EVERY = 256  # records between poll(0) calls: keeps delivery reports (and latencies) timely
PAYLOAD_POOL = 1024
MAX_SAMPLES = 500_000
ERRORS_SHOWN = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="produce messages to this topic")
    parser.add_argument("--num-records", type=int, required=True, help="number of messages to produce")
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="message size in bytes")
    payload.add_argument("--payload-file", help="UTF-8 file of payloads, picked at random for each record")
    payload.add_argument("--payload-monotonic", action="store_true", help="payload is the record number as text")
    parser.add_argument(
        "--payload-delimiter", default="\\n", help="delimiter between payloads in --payload-file (default newline)"
    )
    parser.add_argument(
        "--throughput", type=float, required=True, help="throttle to about this many messages/s; -1 for no limit"
    )
    parser.add_argument(
        "--producer-props",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="producer configs, e.g. bootstrap.servers=HOST:PORT acks=1",
    )
    parser.add_argument(
        "--producer.config", "--command-config", dest="producer_config", metavar="FILE", help="producer properties file"
    )
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT", help="the broker(s) to connect to")
    parser.add_argument("--transactional-id", help="produce in transactions with this id")
    parser.add_argument(
        "--transaction-duration-ms",
        type=int,
        help="commit a transaction after this long (default 3000 when transactional)",
    )
    add_timeout_argument(parser)
    parser.add_argument("--csv", metavar="FILE", help="write the per-second series to this CSV file")
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the per-second series: FILE.html (inline SVG), FILE.svg, or FILE.png (matplotlib)",
    )


def make_payloads(args: argparse.Namespace) -> list[bytes] | None:
    """Pre-generated payloads, or None for --payload-monotonic."""
    if args.payload_monotonic:
        return None
    if args.payload_file:
        delimiter = "\n" if args.payload_delimiter == "\\n" else args.payload_delimiter
        try:
            with open(args.payload_file, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ToolError(f"Cannot read {args.payload_file}: {exc.strerror or exc}") from exc
        payloads = [p.encode("utf-8") for p in text.split(delimiter) if p]
        if not payloads:
            raise ToolError("File does not exist or empty file provided.")
        print(f"Reading payloads from: {os.path.abspath(args.payload_file)}")
        print(f"Number of messages read: {len(payloads)}")
        rng = random.Random(0)
        return [payloads[rng.randrange(len(payloads))] for _ in range(PAYLOAD_POOL)]
    size = args.record_size
    count = min(PAYLOAD_POOL, max(args.num_records, 1))
    letters = bytes(65 + b % 26 for b in range(256))
    blob = os.urandom(size * count).translate(letters)
    return [blob[i * size : (i + 1) * size] for i in range(count)]


class Stats:
    """Counters fed by the delivery callback; windows and totals printed as Kafka prints them."""

    def __init__(self, num_records: int):
        self.start = time.monotonic()
        self.sampling = max(num_records // min(max(num_records, 1), MAX_SAMPLES), 1)
        self.samples = array("d")
        self.count = 0
        self.bytes = 0
        self.total_latency = 0.0
        self.max_latency = 0.0  # over finished windows
        self.window_max = 0.0  # in the current window
        self.failed = 0
        self.errors: list[str] = []
        self.window_start = self.start
        self.window_marks = (0, 0, 0.0)  # count, bytes, total latency when the window began

    def callback(self, fixed_size: int | None):
        """The delivery callback: it runs once per record, so it does only the counting."""
        samples_append = self.samples.append
        sampling = self.sampling
        stats = self

        def on_delivery(err, msg) -> None:
            if err is not None:
                stats.failed += 1
                if len(stats.errors) < ERRORS_SHOWN:
                    stats.errors.append(err.str())
                return
            latency = msg.latency() * 1000.0
            stats.count += 1
            stats.total_latency += latency
            if latency > stats.window_max:
                stats.window_max = latency
            if stats.count % sampling == 0:
                samples_append(latency)
            if fixed_size is None:
                value = msg.value()
                stats.bytes += len(value) if value is not None else 0

        return on_delivery

    def settle(self, fixed_size: int | None) -> None:
        """Bring ``bytes`` up to date (computed, not counted, when every record has the same size)."""
        if fixed_size is not None:
            self.bytes = self.count * fixed_size

    def window_due(self, now: float) -> bool:
        return now - self.window_start >= REPORT_INTERVAL_S

    def window_line(self, now: float) -> str:
        count0, bytes0, latency0 = self.window_marks
        count = self.count - count0
        elapsed = max(now - self.window_start, 1e-9)
        average = (self.total_latency - latency0) / count if count else 0.0
        return (
            f"{count} records sent, {count / elapsed:.1f} records/sec "
            f"({(self.bytes - bytes0) / elapsed / 1048576:.2f} MB/sec), {average:.1f} ms avg latency, "
            f"{self.window_max:.1f} ms max latency."
        )

    def new_window(self, now: float) -> None:
        self.max_latency = max(self.max_latency, self.window_max)
        self.window_max = 0.0
        self.window_start = now
        self.window_marks = (self.count, self.bytes, self.total_latency)

    def percentiles(self, *quantiles: float) -> list[int]:
        """Kafka's: the sorted sample at index int(q * size), in whole milliseconds."""
        ordered = sorted(self.samples)
        if not ordered:
            return [0 for _ in quantiles]
        return [int(ordered[min(int(q * len(ordered)), len(ordered) - 1)]) for q in quantiles]

    def total_line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        max_latency = max(self.max_latency, self.window_max)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        average = self.total_latency / self.count if self.count else 0.0
        return (
            f"{self.count} records sent, {self.count / elapsed:f} records/sec "
            f"({self.bytes / elapsed / 1048576:.2f} MB/sec), {average:.2f} ms avg latency, "
            f"{max_latency:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, {p99} ms 99th, "
            f"{p999} ms 99.9th."
        )


def producer_config(args: argparse.Namespace) -> dict[str, str]:
    props = {}
    for item in args.producer_props:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ToolError(f"Invalid property: {item}")
        props[key] = value
    if args.transactional_id:
        props["transactional.id"] = args.transactional_id
    elif args.transaction_duration_ms is not None and "transactional.id" not in props:
        props["transactional.id"] = f"performance-producer-{os.urandom(8).hex()}"
    return client_config(args.bootstrap_server, args.producer_config, props, **{"client.id": "perf-producer-client"})


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    if args.num_records <= 0:
        print("strom producer-perf-test: --num-records should be greater than zero", file=sys.stderr)
        return 2
    if args.record_size is not None and args.record_size <= 0:
        print("strom producer-perf-test: --record-size should be greater than zero", file=sys.stderr)
        return 2
    try:
        config = producer_config(args)
        payloads = make_payloads(args)
        producer = Producer(config)
        ensure_reachable(producer, config["bootstrap.servers"], args.timeout / 1000)
    except (ToolError, KafkaException) as exc:
        print(f"strom producer-perf-test: {error_text(exc)}", file=sys.stderr)
        return 1
    transactional = "transactional.id" in config
    if transactional:
        try:
            producer.init_transactions(30)
        except KafkaException as exc:
            print(
                f"strom producer-perf-test: cannot start transactions ({config['transactional.id']}): "
                f"{error_text(exc)}",
                file=sys.stderr,
            )
            return 1

    fixed_size = args.record_size if payloads is not None and args.payload_file is None else None
    stats = Stats(args.num_records)
    bar = ProgressBar(args.num_records) if wants_progress_bar() else None
    series = per_second_series(args) if args.csv or args.plot else None
    try:
        send_all(producer, args, payloads, stats, fixed_size, bar, transactional, series)
        while len(producer) > 0:  # flush in slices so the bar and window lines keep moving
            producer.flush(0.2)
            report(stats, fixed_size, bar, series)
    except KeyboardInterrupt:
        print("strom producer-perf-test: interrupted", file=sys.stderr)
        producer.flush(5)
    except KafkaException as exc:
        print(f"strom producer-perf-test: {error_text(exc)}", file=sys.stderr)
        return 1
    finally:
        if bar is not None:
            bar.close()
    stats.settle(fixed_size)
    print(stats.total_line(time.monotonic()), flush=True)
    if series is not None:
        series.sample(time.monotonic(), stats.count, stats.bytes, stats.total_latency, final=True)
        try:
            series.write(args.csv, args.plot)
        except ToolError as exc:
            print(f"strom producer-perf-test: {exc}", file=sys.stderr)
            return 1
    if stats.failed:
        print(
            f"strom producer-perf-test: {stats.failed} records failed, e.g.: " + "; ".join(stats.errors),
            file=sys.stderr,
        )
        return 1
    return 0


def per_second_series(args: argparse.Namespace) -> Series:
    def derive(count: int, nbytes: int, latency: float, seconds: float) -> tuple:
        return (
            round(count / seconds, 1),
            round(nbytes / seconds / 1048576, 3),
            round(latency / count, 2) if count else 0.0,
        )

    return Series(
        f"strom producer-perf-test: {args.num_records:,} records to {args.topic}",
        ("records", "records_per_sec", "mb_per_sec", "avg_latency_ms"),
        derive,
    )


def report(stats: Stats, fixed_size: int | None, bar: ProgressBar | None, series: Series | None = None) -> None:
    now = time.monotonic()
    stats.settle(fixed_size)
    if series is not None:
        series.sample(now, stats.count, stats.bytes, stats.total_latency)
    if bar is not None:
        bar.update(stats.count, now)
        if stats.window_due(now):
            stats.new_window(now)
    elif stats.window_due(now):
        print(stats.window_line(now), flush=True)
        stats.new_window(now)


def send_all(
    producer, args, payloads, stats: Stats, fixed_size, bar, transactional: bool, series: Series | None = None
) -> None:
    topic = args.topic
    produce = producer.produce
    poll = producer.poll
    on_delivery = stats.callback(fixed_size)
    mask = len(payloads) - 1 if payloads is not None and len(payloads) & (len(payloads) - 1) == 0 else None
    pool = len(payloads) if payloads is not None else 0
    throughput = args.throughput if args.throughput > 0 else None
    start = time.monotonic()
    txn_duration = (args.transaction_duration_ms or 3000) / 1000.0
    txn_start = start
    if transactional:
        producer.begin_transaction()
    for i in range(args.num_records):
        if payloads is None:
            payload = str(i).encode()
        else:
            payload = payloads[i & mask] if mask is not None else payloads[i % pool]
        while True:
            try:
                produce(topic, payload, None, -1, on_delivery)  # positional: no keyword parsing per call
                break
            except BufferError:
                poll(0.01)  # the local queue is full: serve deliveries until there is room
        if i % POLL_EVERY == 0:
            poll(0)
            report(stats, fixed_size, bar, series)
            if transactional and time.monotonic() - txn_start >= txn_duration:
                producer.commit_transaction()
                producer.begin_transaction()
                txn_start = time.monotonic()
        if throughput is not None:
            # Sleep (serving deliveries) while more than a millisecond ahead: poll() counts whole ms.
            due = start + (i + 1) / throughput
            while (ahead := due - time.monotonic()) > 0.001:
                poll(ahead)
                if series is not None:  # slow runs: keep the rows about a second long
                    report(stats, fixed_size, bar, series)
    if transactional:
        producer.commit_transaction()
