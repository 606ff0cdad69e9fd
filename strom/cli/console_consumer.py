"""``strom console-consumer``: print the messages of a topic, like kafka-console-consumer.sh.

    strom console-consumer --bootstrap-server 127.0.0.1:9092 --topic orders --from-beginning \\
        --property print.key=true --property print.offset=true --max-messages 10

Without a group (no --group, no group.id property) the consumer needs no group coordinator: it
assigns itself every partition of the topic (or only --partition) and starts at the beginning
(--from-beginning), at --offset N/earliest/latest, or at the end; it never commits. With a group it
subscribes and commits as it goes (enable.auto.commit), as Kafka's tool does.

Output follows Kafka's DefaultMessageFormatter: per message the enabled columns in the order
timestamp (``CreateTime:1700000000000``), ``Partition:p``, ``Offset:o``, headers (``k:v,k2:v2`` or
``NO_HEADERS``), key, value, separated by key.separator (tab) and ended by line.separator (newline);
null keys and values print as null.literal (``null``). Properties: print.timestamp, print.partition,
print.offset, print.headers, print.key, print.value, print.delivery, key.separator, line.separator,
headers.separator, null.literal. It stops after --max-messages, or when --timeout-ms pass without a
message, and then prints ``Processed a total of N messages`` on stderr. It first fetches metadata:
when no broker answers within --connect-timeout-ms (default 10000) it exits 1 with one line naming
the bootstrap servers. With ``--value-format avro|json|protobuf`` (and ``--key-format``) and
``--property schema.registry.url=URL`` each value is printed as JSON, decoded with the schema its id
names, as kafka-avro-console-consumer and its JSON Schema and Protobuf twins (strom.cli.typed_records).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable

from strom.cli.client_props import (
    ToolError,
    add_timeout_argument,
    client_config,
    ensure_reachable,
    error_text,
    load_properties,
    parse_key_values,
)
from strom.cli.typed_records import add_format_arguments

BATCH = 500
METADATA_TIMEOUT_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    parser.add_argument("--topic", help="the topic to consume from")
    parser.add_argument("--include", metavar="REGEX", help="consume every topic matching this regular expression")
    parser.add_argument("--partition", type=int, help="only this partition (starts at its end unless --offset)")
    parser.add_argument("--offset", help="with --partition: a non-negative offset, 'earliest' or 'latest'")
    parser.add_argument(
        "--from-beginning", action="store_true", help="start with the earliest message rather than the latest"
    )
    parser.add_argument("--group", help="consumer group id (subscribe and commit; needs a group coordinator)")
    parser.add_argument("--max-messages", type=int, help="exit after this many messages")
    parser.add_argument("--timeout-ms", type=int, help="exit when no message arrives for this long")
    parser.add_argument(
        "--property",
        "--formatter-property",
        dest="property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a formatter property, e.g. print.key=true (repeatable)",
    )
    parser.add_argument("--formatter-config", metavar="FILE", help="formatter properties file")
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
        "--consumer.config", "--command-config", dest="consumer_config", metavar="FILE", help="consumer properties file"
    )
    parser.add_argument(
        "--isolation-level",
        choices=("read_committed", "read_uncommitted"),
        help="read_committed hides aborted and open transactions (default read_uncommitted)",
    )
    parser.add_argument(
        "--skip-message-on-error",
        action="store_true",
        help="accepted for compatibility: message errors are always reported and skipped",
    )
    add_timeout_argument(parser, "--connect-timeout-ms")
    add_format_arguments(parser, "print")


class Formatter:
    """Kafka's DefaultMessageFormatter, writing bytes."""

    def __init__(self, props: dict[str, str]):
        def flag(name: str, default: bool) -> bool:
            return props[name].strip().lower() == "true" if name in props else default

        def text(name: str, default: str) -> bytes:
            return props.get(name, default).encode("utf-8")

        self.print_timestamp = flag("print.timestamp", False)
        self.print_partition = flag("print.partition", False)
        self.print_offset = flag("print.offset", False)
        self.print_delivery = flag("print.delivery", False)
        self.print_headers = flag("print.headers", False)
        self.print_key = flag("print.key", False)
        self.print_value = flag("print.value", True)
        self.key_separator = text("key.separator", "\t")
        self.line_separator = text("line.separator", "\n")
        self.headers_separator = text("headers.separator", ",")
        self.null_literal = text("null.literal", "null")
        # --key-format/--value-format avro|json|protobuf: the record's bytes -> its JSON (strom.cli.typed_records)
        self.decode_key: Callable[[bytes], bytes] | None = None
        self.decode_value: Callable[[bytes], bytes] | None = None

    def format(self, msg) -> bytes:
        columns: list[bytes] = []
        if self.print_timestamp:
            kind, timestamp = msg.timestamp()
            names = {1: "CreateTime", 2: "LogAppendTime"}
            columns.append(f"{names[kind]}:{timestamp}".encode() if kind in names else b"NO_TIMESTAMP")
        if self.print_partition:
            columns.append(b"Partition:%d" % msg.partition())
        if self.print_offset:
            columns.append(b"Offset:%d" % msg.offset())
        if self.print_delivery:
            columns.append(b"Delivery:NONE")
        if self.print_headers:
            headers = msg.headers()
            if not headers:
                columns.append(b"NO_HEADERS")
            else:
                columns.append(
                    self.headers_separator.join(
                        key.encode("utf-8") + b":" + (self.null_literal if value is None else bytes(value))
                        for key, value in headers
                    )
                )
        if self.print_key:
            key = msg.key()
            if key is not None and self.decode_key is not None:
                key = self.decode_key(key)
            columns.append(self.null_literal if key is None else key)
        if self.print_value:
            value = msg.value()
            if value is not None and self.decode_value is not None:
                value = self.decode_value(value)
            columns.append(self.null_literal if value is None else value)
            return self.key_separator.join(columns) + self.line_separator
        # Kafka ends the last column with the line separator only when the value is printed.
        return self.key_separator.join(columns) + (self.line_separator if columns else b"")


def parse_offset(args: argparse.Namespace):
    """The start position as a librdkafka offset (logical OFFSET_BEGINNING/OFFSET_END or absolute)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if args.offset is None:
        return OFFSET_BEGINNING if args.from_beginning else OFFSET_END
    value = args.offset.strip().lower()
    if value == "earliest":
        return OFFSET_BEGINNING
    if value == "latest":
        return OFFSET_END
    try:
        offset = int(value)
    except ValueError:
        offset = -1
    if offset < 0:
        raise ToolError(
            f"The provided offset value '{args.offset}' is incorrect. Valid values are "
            "'earliest', 'latest', or a non-negative long."
        )
    return offset


def check_args(args: argparse.Namespace, group: str | None) -> None:
    if bool(args.topic) == bool(args.include):
        raise ToolError("Exactly one of --topic or --include is required")
    if args.partition is not None:
        if not args.topic:
            raise ToolError("The topic is required when partition is specified.")
        if args.from_beginning and args.offset is not None:
            raise ToolError("Options from-beginning and offset cannot be specified together.")
        if group:
            raise ToolError("Options group and partition cannot be specified together.")
    elif args.offset is not None:
        raise ToolError("The partition is required when offset is specified.")


def consumer_config(args: argparse.Namespace) -> tuple[dict[str, str], str | None]:
    file_props = load_properties(args.consumer_config) if args.consumer_config else {}
    extra = parse_key_values(args.consumer_property, "consumer property")
    groups = {g for g in (args.group, file_props.get("group.id"), extra.get("group.id")) if g}
    if len(groups) > 1:
        raise ToolError(
            "The group ids provided in different places (directly using '--group', via "
            "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
            + ", ".join(f"'{g}'" for g in sorted(groups))
        )
    group = groups.pop() if groups else None
    config = {**file_props, **extra}
    reset = config.get("auto.offset.reset")
    if reset is not None and args.from_beginning and reset not in ("earliest", "smallest", "beginning"):
        raise ToolError(
            f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', please remove one option"
        )
    config.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    config.setdefault("client.id", "console-consumer")
    config.setdefault("enable.partition.eof", "false")
    config["isolation.level"] = args.isolation_level or config.get("isolation.level", "read_uncommitted")
    if group:
        config["group.id"] = group
    else:
        # librdkafka needs a group.id even for assign(); it is never joined and nothing is committed.
        config["group.id"] = f"console-consumer-{random.randrange(100000)}"
        config["enable.auto.commit"] = "false"
        config["enable.auto.offset.store"] = "false"
    return client_config(args.bootstrap_server, None, config), group


def partitions_to_assign(consumer, args: argparse.Namespace, deadline: float | None, stop) -> list:
    """Every partition of --topic (or the --include matches), waiting for them to exist like Kafka does."""
    from confluent_kafka import TopicPartition

    start = parse_offset(args)
    regex = re.compile(args.include) if args.include else None
    while True:
        if args.topic:
            metadata = consumer.list_topics(args.topic, timeout=METADATA_TIMEOUT_S)
            topics = {args.topic: metadata.topics.get(args.topic)}
        else:
            assert regex is not None  # main() requires --include without --topic
            metadata = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
            topics = {name: t for name, t in metadata.topics.items() if regex.fullmatch(name)}
        assignment = []
        for name, topic in sorted(topics.items()):
            if topic is None or topic.error is not None or not topic.partitions:
                continue
            ids = sorted(topic.partitions)
            if args.partition is not None:
                if args.partition not in topic.partitions:
                    raise ToolError(
                        f"Partition {args.partition} of topic {name} does not exist (it has {len(ids)} partitions)"
                    )
                ids = [args.partition]
            assignment += [TopicPartition(name, p, start) for p in ids]
        if assignment:
            return assignment
        if stop() or (deadline is not None and time.monotonic() >= deadline):
            return []
        time.sleep(0.5)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaException

    stopping = False

    def on_signal(signum, frame) -> None:
        nonlocal stopping
        stopping = True

    try:
        formatter_props = load_properties(args.formatter_config) if args.formatter_config else {}
        formatter_props.update(parse_key_values(args.property, "formatter property"))
        formatter = Formatter(formatter_props)
        if args.key_format != "string" or args.value_format != "string":
            from strom.cli.typed_records import decoder

            if args.key_format != "string":
                formatter.decode_key = decoder(formatter_props, "key")
            if args.value_format != "string":
                formatter.decode_value = decoder(formatter_props, "value")
        config, group = consumer_config(args)
        check_args(args, group)
        consumer = Consumer(config)
    except (ToolError, KafkaException, re.error) as exc:
        print(f"strom console-consumer: {error_text(exc)}", file=sys.stderr)
        return 1
    try:
        ensure_reachable(consumer, config["bootstrap.servers"], args.connect_timeout_ms / 1000)
    except (ToolError, KafkaException) as exc:
        print(f"strom console-consumer: {error_text(exc)}", file=sys.stderr)
        consumer.close()
        return 1

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    timeout_s = args.timeout_ms / 1000.0 if args.timeout_ms is not None and args.timeout_ms >= 0 else None
    max_messages = args.max_messages if args.max_messages is not None and args.max_messages >= 0 else None
    out = sys.stdout.buffer
    count = 0
    status = 0
    try:
        last_activity = time.monotonic()
        if group:
            topics = [args.topic] if args.topic else ["^" + args.include]
            consumer.subscribe(topics)
        else:
            deadline = None if timeout_s is None else last_activity + timeout_s
            assignment = partitions_to_assign(consumer, args, deadline, lambda: stopping)
            if assignment:
                consumer.assign(assignment)
            else:
                max_messages = count  # nothing to read: the timeout passed first
        while not stopping and (max_messages is None or count < max_messages):
            wait = 0.5
            if timeout_s is not None:
                left = last_activity + timeout_s - time.monotonic()
                if left <= 0:
                    break
                wait = min(wait, left)
            want = BATCH if max_messages is None else min(BATCH, max_messages - count)
            messages = consumer.consume(num_messages=want, timeout=wait)
            if not messages:
                continue
            last_activity = time.monotonic()
            chunk = []
            for msg in messages:
                error = msg.error()
                if error is not None:
                    # librdkafka retries transient errors itself; only a fatal one ends the consumer.
                    if error.fatal():
                        raise KafkaException(error)
                    if error.name() != "_PARTITION_EOF":
                        print(f"strom console-consumer: {error.str()}", file=sys.stderr)
                    continue
                chunk.append(formatter.format(msg))
                count += 1
            out.write(b"".join(chunk))
            out.flush()
    except BrokenPipeError:
        print("Unable to write to standard out, closing consumer.", file=sys.stderr)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    except (KafkaException, ToolError) as exc:
        print(
            f"strom console-consumer: Error processing message, terminating consumer process: {error_text(exc)}",
            file=sys.stderr,
        )
        status = 1
    finally:
        try:
            consumer.close()
        except Exception:  # closing must not hide the count
            pass
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return status
