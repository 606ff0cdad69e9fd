"""``strom consumer-perf-test``: consumer throughput, like Kafka's ConsumerPerformance.

    strom consumer-perf-test --bootstrap-server 127.0.0.1:9092 --topic perf --messages 1000000

Prints Kafka's header and result line::

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2024-05-01 10:00:00:000, 2024-05-01 10:00:04:210, 95.3674, 22.6526, 1000000, 237529.6912, 0, 4210, 22.6526, 237529.6912

Bytes are key plus value bytes, as Kafka counts them. Without --group the consumer assigns itself
every partition (from the beginning, or the end with --from-latest) and needs no group coordinator, so
rebalance.time.ms is 0; with --group it subscribes and rebalance.time.ms is the time until the first
assignment. It stops after --messages or when --timeout ms pass without a message (or without an
answer from the bootstrap servers: then it exits 1 with one line naming them). With
--show-detailed-stats a line per --reporting-interval; otherwise, on a terminal, a progress bar on stderr.
With ``--csv FILE`` it writes one row per second (messages, messages/s, MB/s) and with ``--plot FILE``
draws them (HTML with inline SVG charts; see ``strom.cli.perf_series``).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time

from strom.cli.client_props import (
    ToolError,
    client_config,
    ensure_reachable,
    error_text,
    exits_quietly_on_broken_pipe,
    load_properties,
    parse_key_values,
)
from strom.cli.perf_series import Series
from strom.cli.progress import ProgressBar, wants_progress_bar

BATCH = 10_000
METADATA_TIMEOUT_S = 10.0
HEADER_FIELDS = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
MB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    parser.add_argument("--topic", help="the topic to consume from")
    parser.add_argument("--include", metavar="REGEX", help="consume every topic matching this regular expression")
    parser.add_argument("--messages", type=int, required=True, help="REQUIRED: the number of messages to consume")
    parser.add_argument(
        "--timeout",
        type=int,
        default=10_000,
        metavar="MS",
        help="the longest wait between two returned messages, in ms (default 10000)",
    )
    parser.add_argument("--group", help="consume in this consumer group (subscribe); default: assign, no group")
    parser.add_argument(
        "--from-latest", action="store_true", help="start at the end of the log rather than the beginning"
    )
    parser.add_argument(
        "--fetch-size", type=int, default=1024 * 1024, help="bytes to fetch per partition and request (default 1048576)"
    )
    parser.add_argument(
        "--socket-buffer-size", type=int, default=2 * 1024 * 1024, help="TCP receive buffer size (default 2097152)"
    )
    parser.add_argument(
        "--consumer.config", "--command-config", dest="consumer_config", metavar="FILE", help="consumer properties file"
    )
    parser.add_argument(
        "--consumer-property",
        "--command-property",
        dest="consumer_property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a consumer config (repeatable)",
    )
    parser.add_argument(
        "--show-detailed-stats", action="store_true", help="print a stats line every --reporting-interval"
    )
    parser.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="interval of the detailed stats, in ms (default 5000)",
    )
    parser.add_argument(
        "--date-format",
        default="yyyy-MM-dd HH:mm:ss:SSS",
        help="Java SimpleDateFormat pattern for the times (default yyyy-MM-dd HH:mm:ss:SSS)",
    )
    parser.add_argument("--hide-header", action="store_true", help="do not print the header line")
    parser.add_argument("--csv", metavar="FILE", help="write the per-second series to this CSV file")
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the per-second series: FILE.html (inline SVG), FILE.svg, or FILE.png (matplotlib)",
    )


_JAVA_DATE = [
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("hh", "%I"),
    ("mm", "%M"),
    ("ss", "%S"),
    ("a", "%p"),
    ("EEE", "%a"),
    ("Z", "%z"),
]


def date_formatter(pattern: str):
    """The subset of SimpleDateFormat that perf output uses; ``SSS`` is milliseconds."""
    parts = re.split(r"(yyyy|yy|MM|dd|HH|hh|mm|ss|SSS|EEE|a|Z)", pattern)
    table = dict(_JAVA_DATE)

    def format_ms(epoch_ms: float) -> str:
        moment = datetime.datetime.fromtimestamp(epoch_ms / 1000.0).astimezone()
        out = []
        for part in parts:
            if part == "SSS":
                out.append(f"{int(epoch_ms) % 1000:03d}")
            elif part in table:
                out.append(moment.strftime(table[part]))
            else:
                out.append(part.replace("'", ""))
        return "".join(out)

    return format_ms


def consumer_config(args: argparse.Namespace) -> tuple[dict[str, str], str | None]:
    extra = parse_key_values(args.consumer_property, "consumer property")
    defaults = {
        "client.id": "perf-consumer-client",
        "auto.offset.reset": "latest" if args.from_latest else "earliest",
        "max.partition.fetch.bytes": str(args.fetch_size),
        "socket.receive.buffer.bytes": str(args.socket_buffer_size),
        "enable.partition.eof": "false",
        "isolation.level": "read_uncommitted",
    }
    file_props = load_properties(args.consumer_config) if args.consumer_config else {}
    config = client_config(args.bootstrap_server, None, {**file_props, **extra}, **defaults)
    group = args.group or config.get("group.id")
    if group:
        config["group.id"] = group
    else:
        # librdkafka needs a group.id even for assign(); nothing joins it and nothing is committed.
        config["group.id"] = f"perf-consumer-{int(time.time() * 1000) % 100000}"
        config["enable.auto.commit"] = "false"
        config["enable.auto.offset.store"] = "false"
    return config, group


def assignment(consumer, args: argparse.Namespace, deadline: float) -> list:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    start = OFFSET_END if args.from_latest else OFFSET_BEGINNING
    regex = re.compile(args.include) if args.include else None
    while True:
        metadata = (
            consumer.list_topics(args.topic, timeout=METADATA_TIMEOUT_S)
            if args.topic
            else consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        )
        partitions = [
            TopicPartition(name, p, start)
            for name, topic in sorted(metadata.topics.items())
            if (name == args.topic if regex is None else regex.fullmatch(name))  # one of the two
            and topic.error is None
            for p in sorted(topic.partitions)
        ]
        if partitions or time.monotonic() >= deadline:
            return partitions
        time.sleep(0.2)


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaException

    if bool(args.topic) == bool(args.include):
        print("strom consumer-perf-test: exactly one of --topic or --include is required", file=sys.stderr)
        return 2
    try:
        fmt = date_formatter(args.date_format)
        config, group = consumer_config(args)
        consumer = Consumer(config)
    except (ToolError, KafkaException, re.error) as exc:
        print(f"strom consumer-perf-test: {error_text(exc)}", file=sys.stderr)
        return 1
    try:
        ensure_reachable(consumer, config["bootstrap.servers"], args.timeout / 1000)
    except (ToolError, KafkaException) as exc:
        print(f"strom consumer-perf-test: {error_text(exc)}", file=sys.stderr)
        consumer.close()
        return 1
    if not args.hide_header:
        if args.show_detailed_stats:
            print("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + HEADER_FIELDS)
        else:
            print("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec" + HEADER_FIELDS)
        sys.stdout.flush()

    timeout_s = args.timeout / 1000.0
    bar = ProgressBar(args.messages, "messages") if wants_progress_bar() and not args.show_detailed_stats else None
    start_ms = time.time() * 1000.0
    join_ms = 0.0
    join_round_ms = 0.0
    assigned_at: list[float] = []
    messages = 0
    nbytes = 0
    series = per_second_series(args) if args.csv or args.plot else None
    try:
        if group:
            join_start = time.time() * 1000.0

            def on_assign(c, partitions) -> None:
                if not assigned_at:
                    assigned_at.append(time.time() * 1000.0)

            consumer.subscribe([args.topic] if args.topic else ["^" + args.include], on_assign=on_assign)
        else:
            join_start = None
            consumer.assign(assignment(consumer, args, time.monotonic() + timeout_s))
        last_consumed = time.monotonic()
        last_report = time.monotonic()
        last_report_ms = start_ms
        last_messages = last_bytes = 0
        while messages < args.messages:
            now = time.monotonic()
            if now - last_consumed > timeout_s:
                break
            batch = consumer.consume(num_messages=min(BATCH, args.messages - messages), timeout=0.1)
            now = time.monotonic()
            if join_start is not None and assigned_at:
                join_ms = join_round_ms = assigned_at[0] - join_start
                join_start = None
            if batch:
                last_consumed = now
                for msg in batch:
                    error = msg.error()
                    if error is not None:
                        if error.fatal():
                            raise KafkaException(error)
                        continue
                    messages += 1
                    key = msg.key()
                    value = msg.value()
                    if key is not None:
                        nbytes += len(key)
                    if value is not None:
                        nbytes += len(value)
            if bar is not None:
                bar.update(messages, now)
            if series is not None:
                series.sample(now, messages, nbytes)
            if args.show_detailed_stats and (now - last_report) * 1000.0 >= args.reporting_interval:
                now_ms = time.time() * 1000.0
                print_detail(fmt, now_ms, last_report_ms, messages, last_messages, nbytes, last_bytes, join_round_ms)
                join_round_ms = 0.0
                last_report, last_report_ms = now, now_ms
                last_messages, last_bytes = messages, nbytes
    except KeyboardInterrupt:
        pass
    except KafkaException as exc:
        print(f"strom consumer-perf-test: {error_text(exc)}", file=sys.stderr)
        return 1
    finally:
        if bar is not None:
            bar.close()
        end_ms = time.time() * 1000.0
        try:
            consumer.close()
        except Exception:  # the numbers matter more than a clean close
            pass

    if series is not None:
        series.sample(time.monotonic(), messages, nbytes, final=True)
        try:
            series.write(args.csv, args.plot)
        except ToolError as exc:
            print(f"strom consumer-perf-test: {exc}", file=sys.stderr)
            return 1
    if messages < args.messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
            "exceeded. You can use the --timeout option to increase the timeout."
        )
    if not args.show_detailed_stats:
        elapsed_s = max((end_ms - start_ms) / 1000.0, 1e-9)
        fetch_ms = int(end_ms - start_ms - join_ms)
        mb = nbytes / MB
        fetch_s = max(fetch_ms / 1000.0, 1e-9)
        print(
            f"{fmt(start_ms)}, {fmt(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, {messages}, "
            f"{messages / elapsed_s:.4f}, {int(join_ms)}, {fetch_ms}, {mb / fetch_s:.4f}, "
            f"{messages / fetch_s:.4f}"
        )
    return 0


def per_second_series(args: argparse.Namespace) -> Series:
    def derive(count: int, nbytes: int, _extra: float, seconds: float) -> tuple:
        return round(count / seconds, 1), round(nbytes / seconds / MB, 3)

    return Series(
        f"strom consumer-perf-test: {args.topic or args.include}",
        ("messages", "messages_per_sec", "mb_per_sec"),
        derive,
    )


def print_detail(
    fmt,
    now_ms: float,
    last_ms: float,
    messages: int,
    last_messages: int,
    nbytes: int,
    last_bytes: int,
    join_round_ms: float,
) -> None:
    elapsed_ms = max(now_ms - last_ms, 1e-9)
    interval_mb = (nbytes - last_bytes) / MB
    fetch_ms = int(now_ms - last_ms - join_round_ms)
    fetch_mb_s = 1000.0 * interval_mb / fetch_ms if fetch_ms > 0 else 0.0
    fetch_msg_s = 1000.0 * (messages - last_messages) / fetch_ms if fetch_ms > 0 else 0.0
    print(
        f"{fmt(now_ms)}, 0, {nbytes / MB:.4f}, {1000.0 * interval_mb / elapsed_ms:.4f}, {messages}, "
        f"{1000.0 * (messages - last_messages) / elapsed_ms:.4f}, {int(join_round_ms)}, {fetch_ms}, "
        f"{fetch_mb_s:.4f}, {fetch_msg_s:.4f}",
        flush=True,
    )
