"""``strom demo [--dir DIR] [--rate N] [--duration S]``: access logs → strom → Spark, live.

Starts an embedded broker (a ``strom server-start`` subprocess on a free port, data in
``DIR/data``, its Prometheus metrics and Schema Registry on free ports, their URLs printed), writes realistic nginx access-log lines to ``DIR/access.log`` (``gen-access-log``),
tails them into the topic ``access-log`` (``ingest``, position in ``DIR/ingest.state``) and runs
the Spark pipeline ``strom.spark.pipelines.access_log`` (checkpoints in ``DIR/checkpoints``,
Parquet tables in ``DIR/parquet``, results in the topic ``access-stats``, written exactly once:
each batch's results in Kafka transactions, read back read_committed). With the embedded broker
the results are Avro records registered under ``access-stats-value`` in its Schema Registry (JSON
against a cluster given with --bootstrap-server, which may have no registry). A terminal table
shows ingestion, the queries' progress and the latest closed windows, refreshed every 2 s.

Ctrl-C (or ``--duration`` seconds) stops everything in order: generator, ingest (flushed, state
saved), Spark queries, broker (SIGTERM, clean shutdown). Run it again with the same ``--dir`` and
it goes on from where it stopped: the ingest state and the Spark checkpoints make sure no line
is counted twice in the Parquet tables, and the sink's batch markers that no window result
appears twice in ``access-stats``. ``--dir`` defaults to ./strom-demo; ``--temp`` uses a
temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
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
QUERY_RESTARTS = 3  # a failed query is started again from its checkpoint this many times in a run


class EmbeddedBroker:
    """A ``strom server-start`` child process on 127.0.0.1:<free port>, stopped with SIGTERM."""

    def __init__(self, data_dir: str | os.PathLike, overrides: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.overrides = {
            "broker.id": "0",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> EmbeddedBroker:
        from strom.storage import dir_lock

        # the broker of a run that was killed stops by itself (--parent-pid) and frees the dir
        holder = dir_lock.wait_until_free(str(self.data_dir), STOP_TIMEOUT_S)
        if holder is not None:
            raise RuntimeError(
                f"{self.data_dir} is in use by another broker{f' (pid {holder})' if holder else ''}, "
                f"still there after {STOP_TIMEOUT_S:.0f}s; stop it, or use another --dir"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port_file = self.data_dir / "strom.port"
        port_file.unlink(missing_ok=True)
        (self.data_dir / "strom.schema-registry").unlink(missing_ok=True)  # the broker writes it anew
        # stops by itself if the demo is killed, SIGKILL included (strom.server.parent_watch)
        cmd = [sys.executable, "-m", "strom.cli.main", "server-start", "--parent-pid", str(os.getpid())]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0  # this start's output begins here
        with open(self.log_path, "ab") as log:
            # own process group: a Ctrl-C in the terminal reaches the demo, which stops the broker in order
            self.process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                from strom.startup import refusal_in

                reason = refusal_in(str(self.log_path), offset) or f"exited with {self.process.returncode}"
                raise RuntimeError(f"the broker did not start: {reason} (see {self.log_path})")
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

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_topics(
    bootstrap: str, topics: dict[str, int], timeout: float = 30.0, security: dict[str, str] | None = None
) -> None:
    """Create topics (name → partitions) that do not exist yet."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from strom.cli.client_props import logging_config

    admin = AdminClient({"bootstrap.servers": bootstrap, **logging_config(), **(security or {})})
    existing = admin.list_topics(timeout=timeout).topics
    wanted = [NewTopic(name, n, 1) for name, n in topics.items() if name not in existing]
    for name, future in admin.create_topics(wanted, request_timeout=timeout).items() if wanted else []:
        try:
            future.result(timeout)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir", default="strom-demo", help="working directory, kept between runs (default ./strom-demo)"
    )
    parser.add_argument("--temp", action="store_true", help="use a temporary directory, removed at the end")
    parser.add_argument("--rate", type=float, default=50.0, help="access-log lines per second (default 50)")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the access-log topic")
    parser.add_argument("--window", default="1 minute", help="event-time window (default 1 minute)")
    parser.add_argument("--watermark", default="10 seconds", help="allowed lateness (default 10 seconds)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval")
    parser.add_argument("--refresh", type=float, default=2.0, help="seconds between table refreshes")
    parser.add_argument(
        "--bootstrap-server",
        metavar="H:P",
        help="run against this cluster instead of a broker of its own (default: its own)",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties for --bootstrap-server (security.protocol, sasl.*, ssl.*: "
        "e.g. the file `strom cluster start --secure` prints); its bootstrap.servers is "
        "used when --bootstrap-server is not given",
    )


class Results:
    """The pipeline's results read back from the output topic, latest value per window: Avro
    records (Confluent's framing, decoded with the registry at ``registry_url``) or JSON, both
    read, as a ``--dir`` kept from an older run may hold JSON ones.

    read_committed: the pipeline writes in transactions, and a transaction a crash cut short is
    aborted, never shown.
    """

    def __init__(self, bootstrap: str, security: dict[str, str] | None = None, registry_url: str | None = None):
        from confluent_kafka import Consumer, TopicPartition

        from strom.cli.client_props import logging_config

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "strom-demo-view",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                **logging_config(),
                **(security or {}),
            }
        )
        self.consumer.assign([TopicPartition(OUTPUT_TOPIC, 0, 0)])
        self.minutes: dict[str, dict] = {}
        self.minute_rows = 0  # with minutes: a window given twice would show here
        self.statuses: dict[str, dict[int, int]] = {}
        self.top: dict[str, dict[int, tuple[str, int]]] = {}
        self.avro_rows = 0
        self._avro = None
        if registry_url:
            from confluent_kafka.schema_registry import SchemaRegistryClient
            from confluent_kafka.schema_registry.avro import AvroDeserializer
            from confluent_kafka.serialization import MessageField, SerializationContext

            deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
            context = SerializationContext(OUTPUT_TOPIC, MessageField.VALUE)
            self._avro = lambda value: deserialize(value, context)

    def decode(self, value: bytes) -> dict:
        """A result as a dict, its window start as ISO text to the second (the table's key)."""
        if value[:1] == b"\x00" and self._avro is not None:  # the magic byte: JSON starts with '{'
            row = dict(self._avro(value))
            self.avro_rows += 1
        else:
            row = json.loads(value)
        start = row.get("window_start", "")
        row["window_start"] = (start if isinstance(start, str) else start.isoformat())[:19]
        return row

    def poll(self) -> None:
        for msg in self.consumer.consume(10_000, 0.05):
            value = msg.value()
            if msg.error() is not None or value is None:
                continue
            row = self.decode(value)
            window = row["window_start"]
            if row.get("kind") == "minute":
                self.minutes[window] = row
                self.minute_rows += 1
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
        lines.append(
            f"  query {query.name:<13} batch {progress.get('batchId', '-')!s:>5}  "
            f"rows {progress.get('numInputRows', 0):>6}  "
            f"{progress.get('processedRowsPerSecond', 0.0):>9,.0f} rows/s  watermark {wm}"
        )
    lines += ["", "  window (UTC)          requests  page views  uniques    2xx   3xx   4xx   5xx  top URL"]
    windows = sorted(results.minutes)[-8:]
    if not windows:
        lines.append("  (no window closed yet: a window is final once the watermark passes its end)")
    for window in windows:
        row = results.minutes[window]
        top = results.top.get(window, {}).get(1)
        top_text = f"{top[0]} ({top[1]})" if top else ""
        lines.append(
            f"  {window[:19]:<21} {row['requests']:>8} {row['page_views']:>11} {row['unique_visitors']:>8}  "
            f"{status_classes(results.statuses.get(window, {}))}  {top_text}"
        )
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


class LiveTable:
    """The table on a terminal: redrawn in place by rich on the alternate screen, so that it is the only
    thing there while the demo runs (the screen comes back as it was, and the last table is printed
    below it). Elsewhere (a pipe, a log file) it is printed every ``plain_every`` seconds."""

    def __init__(self, tty: bool, plain_every: float):
        self.plain_every = plain_every
        self.last_plain = 0.0
        self.live = None
        if tty:
            from rich.live import Live

            self.live = Live(screen=True, auto_refresh=False)
            self.live.start()

    def show(self, table: str) -> None:
        if self.live is not None:
            from rich.text import Text

            self.live.update(Text(table), refresh=True)
        elif time.monotonic() - self.last_plain >= self.plain_every:
            print(table + "\n", flush=True)
            self.last_plain = time.monotonic()

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


@contextlib.contextmanager
def jvm_output_to(path: Path):
    """Start Spark's JVM with its stdout and stderr in ``path``: it inherits fds 1 and 2 when PySpark
    launches it, and keeps them, so its notes at startup, log lines and the stack traces of a batch
    interrupted at shutdown go to the file, not over the table. Python's own output is unchanged."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def parquet_summary(spark, parquet_dir: str) -> str:
    path = os.path.join(parquet_dir, "minute_stats")
    if not glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True):  # a first batch cut short leaves none
        return "Parquet: no window written yet"
    from pyspark.sql import functions as F

    row = (
        spark.read.parquet(path)
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.countDistinct("window_start").alias("windows"),
            F.sum("requests").alias("requests"),
        )
        .first()
    )
    return (
        f"Parquet minute_stats: {row.windows} windows in {row.rows} rows, {row.requests or 0:,} requests "
        f"(one row per window: nothing counted twice)"
    )


# Set in the environment of every process a run starts (the broker, Spark's JVM and its Python
# workers inherit it), so that the next run on the same --dir can find what is left of this one.
RUN_MARK = "STROM_DEMO_DIR"


def processes_of_earlier_run(base: Path) -> list[int]:
    """The live processes started by an earlier run on ``base`` (found by RUN_MARK in /proc)."""
    mark = f"{RUN_MARK}={base}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if mark in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def wait_for_earlier_run(base: Path, timeout_s: float) -> list[int]:
    """Wait (bounded) until nothing of a killed run on ``base`` is left; the pids still there.

    A run killed with SIGKILL leaves Spark's JVM behind for a moment: it notices that its Python
    driver is gone (its stdin closes) and shuts down, stopping its streaming queries, which may
    still be writing their checkpoint and state. A new run that started its queries meanwhile
    read that checkpoint while it was being written, and its queries failed (seen as
    java.io.OptionalDataException in the restarted demo, in one full-suite run of two). The broker
    of the killed run is waited for the same way, through its directory's lock."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = processes_of_earlier_run(base)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def run(args: argparse.Namespace) -> int:
    from strom.cli.client_props import ToolError, command_properties, send_client_log_to
    from strom.cli.gen_access_log import generate
    from strom.cli.ingest import Ingest
    from strom.spark.pipelines import access_log

    try:
        security = command_properties(args.command_config)  # librdkafka's keys, for the demo's own clients
    except ToolError as exc:
        print(f"strom demo: {exc}", file=sys.stderr)
        return 1
    base = Path(tempfile.mkdtemp(prefix="strom-demo-") if args.temp else args.dir).resolve()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"strom demo: --dir {base}: cannot create {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    left = wait_for_earlier_run(base, STOP_TIMEOUT_S)
    if left:
        pids = ", ".join(str(pid) for pid in left)
        print(
            f"strom demo: {base} is still used by an earlier run's processes (pid {pids}) after "
            f"{STOP_TIMEOUT_S:.0f}s; stop them, or use another --dir",
            file=sys.stderr,
        )
        return 1
    os.environ[RUN_MARK] = str(base)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    tty = sys.stdout.isatty()
    print(f"strom demo: working directory {base}", flush=True)
    external = args.bootstrap_server or security.get("bootstrap.servers")
    security.pop("bootstrap.servers", None)
    broker = (
        None
        if external
        else EmbeddedBroker(
            base / "data",
            {"metrics.listener": "http://127.0.0.1:0", "schema.registry.listeners": "http://127.0.0.1:0"},
        )
    )
    bootstrap = external or ""
    registry_url = None
    spark = queries = ingest = results = table = None
    threads: list[threading.Thread] = []
    generated = [0]
    try:
        if broker is not None:
            try:
                broker.start()
            except RuntimeError as exc:
                print(f"strom demo: {exc}", file=sys.stderr)
                return 1
            bootstrap = broker.bootstrap
            print(f"strom demo: broker on {bootstrap} (log: {broker.log_path})", flush=True)
            metrics_file = broker.data_dir / "strom.metrics"
            if metrics_file.exists():
                print(f"strom demo: Prometheus metrics on {metrics_file.read_text().strip()}", flush=True)
            registry_file = broker.data_dir / "strom.schema-registry"
            if registry_file.exists():
                registry_url = registry_file.read_text().strip()
                print(f"strom demo: Schema Registry on {registry_url}", flush=True)
                print(
                    f"strom demo: {OUTPUT_TOPIC} holds Avro records of subject {OUTPUT_TOPIC}-value; to browse "
                    f"them decoded, in another terminal: strom console --bootstrap-server {bootstrap} "
                    f"--schema-registry-url {registry_url}",
                    flush=True,
                )
        else:
            print(f"strom demo: using the cluster at {bootstrap}", flush=True)
        create_topics(bootstrap, {TOPIC: args.partitions, OUTPUT_TOPIC: 1}, security=security)

        log_path = base / "access.log"

        def write_logs():
            with open(log_path, "a", encoding="utf-8") as out:
                generate(args.rate, None, out, stop=stop.is_set, on_tick=lambda n: generated.__setitem__(0, n))

        notes = _Notes()
        send_client_log_to(notes.write)  # librdkafka's lines: the note under the table, not over it
        ingest = Ingest(
            argparse.Namespace(
                bootstrap_server=bootstrap,
                command_config=args.command_config,
                topic=TOPIC,
                file=[str(log_path)],
                follow=True,
                key_regex=r"^(\S+)",
                state_file=str(base / "ingest.state"),
                poll_interval=0.2,
                report_interval=10.0,
                producer_property=[],
            ),
            out=notes,
        )
        threads = [
            threading.Thread(target=write_logs, name="gen-access-log", daemon=True),
            threading.Thread(target=ingest.run, name="ingest", daemon=True),
        ]
        for thread in threads:
            thread.start()

        print("strom demo: starting Spark (this takes a while)...", flush=True)
        with jvm_output_to(base / "spark.log"):
            spark = access_log.build_session("strom-demo", shuffle_partitions=2)
        print(f"strom demo: Spark's own output goes to {base / 'spark.log'}", flush=True)
        spark.sparkContext.setLogLevel("ERROR")
        pipeline = {
            "bootstrap": bootstrap,
            "topic": TOPIC,
            "output_topic": OUTPUT_TOPIC,
            "parquet_dir": str(base / "parquet"),
            "checkpoint_dir": str(base / "checkpoints"),
            "window": args.window,
            "watermark": args.watermark,
            "trigger_seconds": args.trigger_seconds,
            "kafka_options": access_log.kafka_options_from_properties(args.command_config),
            "schema_registry_url": registry_url,
        }
        queries = access_log.start(spark, **pipeline)
        restarts = 0
        results = Results(bootstrap, security, registry_url)
        started = time.monotonic()
        deadline = None if args.duration is None else started + args.duration
        table = LiveTable(tty, 10 * args.refresh)
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            results.poll()
            failed = [q for q in queries if not q.isActive]
            if failed and restarts < QUERY_RESTARTS:
                # As a streaming job's supervisor would: a failed query starts again from its
                # checkpoint, which counts nothing twice (the sink's transactions and batch
                # markers). Seen after a kill -9: a restarted run's first micro-batch failed inside
                # Spark (java.io.OptionalDataException deserializing a task), then ran cleanly.
                restarts += 1
                for query in failed:
                    notes.write(
                        f"query {query.name} failed ({str(query.exception()).splitlines()[0][:200]}); "
                        f"restarting it from its checkpoint ({restarts}/{QUERY_RESTARTS})\n"
                    )
                    queries[queries.index(query)] = access_log.start_query(spark, query.name, **pipeline)
                failed = []
            if failed:
                table.close()
                print(f"strom demo: query {failed[0].name} stopped: {failed[0].exception()}", file=sys.stderr)
                return 1
            table.show(render(started, generated[0], ingest, queries, results, notes.last))
            stop.wait(args.refresh)
        table.close()
        results.poll()
        print(render(started, generated[0], ingest, queries, results, notes.last), flush=True)
        print(
            f"strom demo: {OUTPUT_TOPIC} (read_committed) holds {results.minute_rows} minute rows for "
            f"{len(results.minutes)} windows ({results.avro_rows} results read as Avro)",
            flush=True,
        )
        return 0
    finally:
        if table is not None:
            table.close()
        send_client_log_to(lambda line: None)  # the broker stops last: its clients' disconnects are expected
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
        if broker is not None:
            broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        send_client_log_to(None)
        if args.temp:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"strom demo: state kept in {base}; run it again to continue", flush=True)
