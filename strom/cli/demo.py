"""``strom demo [--dir DIR] [--rate N] [--duration S]``: access logs → strom → Spark, live.

Starts an embedded broker (a ``strom server-start`` subprocess on a free port, data in
``DIR/data``), writes realistic nginx access-log lines to ``DIR/access.log`` (``gen-access-log``),
tails them into the topic ``access-log`` (``ingest``, position in ``DIR/ingest.state``) and runs
the Spark pipeline ``strom.spark.pipelines.access_log`` (checkpoints in ``DIR/checkpoints``,
Parquet tables in ``DIR/parquet``, JSON results in the topic ``access-stats``). A terminal table
shows ingestion, the queries' progress and the latest closed windows, refreshed every 2 s.

Ctrl-C (or ``--duration`` seconds) stops everything in order: generator, ingest (flushed, state
saved), Spark queries, broker (SIGTERM, clean shutdown). Run it again with the same ``--dir`` and
it goes on from where it stopped: the ingest state and the Spark checkpoints make sure no line
is counted twice in the Parquet tables. ``--dir`` defaults to ./strom-demo; ``--temp`` uses a
temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TOPIC = "access-log"
OUTPUT_TOPIC = "access-stats"
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


class EmbeddedBroker:
    """A ``strom server-start`` child process on 127.0.0.1:<free port>, stopped with SIGTERM."""

    def __init__(self, data_dir: str | os.PathLike, overrides: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.overrides = {"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0",
                          "log.dirs": str(self.data_dir), "group.initial.rebalance.delay.ms": "0",
                          **(overrides or {})}
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "EmbeddedBroker":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port_file = self.data_dir / "strom.port"
        port_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "strom.cli.main", "server-start"]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            # own process group: a Ctrl-C in the terminal reaches the demo, which stops the broker in order
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}; see {self.log_path}")
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text:
                self.port = int(text)
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"broker did not start within {STARTUP_TIMEOUT_S:.0f}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 30.0) -> None:
    """Create topics (name → partitions) that do not exist yet."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=timeout).topics
    wanted = [NewTopic(name, n, 1) for name, n in topics.items() if name not in existing]
    for name, future in (admin.create_topics(wanted, request_timeout=timeout).items() if wanted else []):
        try:
            future.result(timeout)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="strom-demo", help="working directory, kept between runs (default ./strom-demo)")
    parser.add_argument("--temp", action="store_true", help="use a temporary directory, removed at the end")
    parser.add_argument("--rate", type=float, default=50.0, help="access-log lines per second (default 50)")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the access-log topic")
    parser.add_argument("--window", default="1 minute", help="event-time window (default 1 minute)")
    parser.add_argument("--watermark", default="10 seconds", help="allowed lateness (default 10 seconds)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval")
    parser.add_argument("--refresh", type=float, default=2.0, help="seconds between table refreshes")


class Results:
    """The pipeline's JSON results read back from the output topic, latest value per window."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Consumer, TopicPartition

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "strom-demo-view",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        self.consumer.assign([TopicPartition(OUTPUT_TOPIC, 0, 0)])
        self.minutes: dict[str, dict] = {}
        self.statuses: dict[str, dict[int, int]] = {}
        self.top: dict[str, dict[int, tuple[str, int]]] = {}

    def poll(self) -> None:
        for msg in self.consumer.consume(10_000, 0.05):
            if msg.error() is not None or msg.value() is None:
                continue
            row = json.loads(msg.value())
            window = row.get("window_start", "")
            if row.get("kind") == "minute":
                self.minutes[window] = row  # a replayed batch repeats a row: same window, same numbers
            elif row.get("kind") == "status":
                self.statuses.setdefault(window, {})[int(row["status"])] = row["requests"]
            elif row.get("kind") == "top_url":
                self.top.setdefault(window, {})[int(row["rank"])] = (row["url"], row["requests"])

    def close(self) -> None:
        self.consumer.close()


def status_classes(counts: dict[int, int]) -> str:
    classes = {c: 0 for c in (2, 3, 4, 5)}
    for status, n in counts.items():
        classes[status // 100] = classes.get(status // 100, 0) + n
    return " ".join(f"{classes[c]:>5}" for c in (2, 3, 4, 5))


def render(started: float, generated: int, ingest, queries, results: Results, note: str) -> str:
    lines = [f"strom demo  (up {time.monotonic() - started:5.0f}s; Ctrl-C stops, a restart resumes)", ""]
    lines.append(f"  access.log lines written this run: {generated:>10,}")
    lines.append(f"  lines ingested into '{TOPIC}':     {ingest.total_lines:>10,}")
    for query in queries:
        progress = query.lastProgress or {}
        wm = (progress.get("eventTime") or {}).get("watermark", "-")
        lines.append(f"  query {query.name:<13} batch {progress.get('batchId', '-')!s:>5}  "
                     f"rows {progress.get('numInputRows', 0):>6}  "
                     f"{progress.get('processedRowsPerSecond', 0.0):>9,.0f} rows/s  watermark {wm}")
    lines += ["", "  window (UTC)          requests  page views  uniques    2xx   3xx   4xx   5xx  top URL"]
    windows = sorted(results.minutes)[-8:]
    if not windows:
        lines.append("  (no window closed yet: a window is final once the watermark passes its end)")
    for window in windows:
        row = results.minutes[window]
        top = results.top.get(window, {}).get(1)
        top_text = f"{top[0]} ({top[1]})" if top else ""
        lines.append(f"  {window[:19]:<21} {row['requests']:>8} {row['page_views']:>11} {row['unique_visitors']:>8}  "
                     f"{status_classes(results.statuses.get(window, {}))}  {top_text}")
    if note:
        lines += ["", f"  {note}"]
    return "\n".join(lines)


class _Notes:
    """Where the ingest tool's messages go while the table owns the terminal."""

    def __init__(self):
        self.last = ""

    def write(self, text: str) -> None:
        if text.strip():
            self.last = text.strip()

    def flush(self) -> None:
        pass


def parquet_summary(spark, parquet_dir: str) -> str:
    path = os.path.join(parquet_dir, "minute_stats")
    if not os.path.isdir(path):
        return "Parquet: no window written yet"
    from pyspark.sql import functions as F

    row = spark.read.parquet(path).agg(F.count(F.lit(1)).alias("rows"),
                                       F.countDistinct("window_start").alias("windows"),
                                       F.sum("requests").alias("requests")).first()
    return (f"Parquet minute_stats: {row.windows} windows in {row.rows} rows, {row.requests or 0:,} requests "
            f"(one row per window: nothing counted twice)")


def run(args: argparse.Namespace) -> int:
    from strom.cli.gen_access_log import generate
    from strom.cli.ingest import Ingest
    from strom.spark.pipelines import access_log

    base = Path(tempfile.mkdtemp(prefix="strom-demo-") if args.temp else args.dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    tty = sys.stdout.isatty()
    print(f"strom demo: working directory {base}", flush=True)
    broker = EmbeddedBroker(base / "data")
    spark = queries = ingest = results = None
    threads: list[threading.Thread] = []
    generated = [0]
    try:
        broker.start()
        print(f"strom demo: broker on {broker.bootstrap} (log: {broker.log_path})", flush=True)
        create_topics(broker.bootstrap, {TOPIC: args.partitions, OUTPUT_TOPIC: 1})

        log_path = base / "access.log"

        def write_logs():
            with open(log_path, "a", encoding="utf-8") as out:
                generate(args.rate, None, out, stop=stop.is_set, on_tick=lambda n: generated.__setitem__(0, n))

        notes = _Notes()
        ingest = Ingest(argparse.Namespace(
            bootstrap_server=broker.bootstrap, topic=TOPIC, file=[str(log_path)], follow=True,
            key_regex=r"^(\S+)", state_file=str(base / "ingest.state"), poll_interval=0.2,
            report_interval=10.0, producer_property=[]), out=notes)
        threads = [threading.Thread(target=write_logs, name="gen-access-log", daemon=True),
                   threading.Thread(target=ingest.run, name="ingest", daemon=True)]
        for thread in threads:
            thread.start()

        print("strom demo: starting Spark (this takes a while)...", flush=True)
        spark = access_log.build_session("strom-demo", shuffle_partitions=2)
        spark.sparkContext.setLogLevel("ERROR")
        queries = access_log.start(spark, bootstrap=broker.bootstrap, topic=TOPIC, output_topic=OUTPUT_TOPIC,
                                   parquet_dir=str(base / "parquet"), checkpoint_dir=str(base / "checkpoints"),
                                   window=args.window, watermark=args.watermark,
                                   trigger_seconds=args.trigger_seconds)
        results = Results(broker.bootstrap)
        started = time.monotonic()
        deadline = None if args.duration is None else started + args.duration
        last_plain = 0.0
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            results.poll()
            failed = [q for q in queries if not q.isActive]
            if failed:
                print(f"strom demo: query {failed[0].name} stopped: {failed[0].exception()}", file=sys.stderr)
                return 1
            table = render(started, generated[0], ingest, queries, results, notes.last)
            if tty:
                sys.stdout.write("\x1b[H\x1b[2J" + table + "\n")
                sys.stdout.flush()
            elif time.monotonic() - last_plain >= 10 * args.refresh:
                print(table + "\n", flush=True)
                last_plain = time.monotonic()
            stop.wait(args.refresh)
        results.poll()
        print(render(started, generated[0], ingest, queries, results, notes.last), flush=True)
        return 0
    finally:
        print("\nstrom demo: stopping...", flush=True)
        stop.set()
        if ingest is not None:
            ingest.stopping = True
        for thread in threads:
            thread.join(30)
        if queries:
            access_log.stop_queries(queries)
        if spark is not None:
            try:
                print(f"strom demo: {parquet_summary(spark, str(base / 'parquet'))}", flush=True)
            finally:
                spark.stop()
        if results is not None:
            results.close()
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if args.temp:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"strom demo: state kept in {base}; run it again to continue", flush=True)
