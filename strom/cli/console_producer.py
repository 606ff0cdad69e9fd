"""``strom console-producer``: send each line of stdin as one message, like kafka-console-producer.sh.

    printf 'k1:hello\\nk2:world\\n' | strom console-producer --bootstrap-server 127.0.0.1:9092 \\
        --topic orders --property parse.key=true --property key.separator=:

Reader properties (``--property``) are Kafka's LineMessageReader's: parse.key, key.separator (tab),
parse.headers, headers.delimiter (tab), headers.separator (``,``, a regex), headers.key.separator
(``:``), null.marker, ignore.error. A line with headers reads ``h1:v1,h2:v2<TAB>key<TAB>value``.
Producer settings come from --producer.config, then --producer-property, then the explicit options.
With ``--value-format avro|json|protobuf`` (and ``--key-format``) and ``--property
schema.registry.url=URL``, ``--property value.schema=TEXT`` (or ``value.schema.id=N``), each value
is JSON sent in Confluent's wire format, as kafka-avro-console-producer and its JSON Schema and
Protobuf twins (strom.cli.typed_records).
Keys are partitioned with murmur2, as Kafka's Java producer does, so keys land where Kafka puts them.
All messages are flushed at end of input; the exit code is 1 if any message was not delivered.
It first fetches metadata: when no broker answers within --connect-timeout-ms (default 10000) it
exits 1 with one line naming the bootstrap servers (``--timeout`` is Kafka's linger.ms here).
"""

from __future__ import annotations

import argparse
import re
import sys

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

FLUSH_TIMEOUT_S = 120.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT", help="REQUIRED: the broker(s) to connect to"
    )
    parser.add_argument("--topic", required=True, help="REQUIRED: the topic to produce to")
    parser.add_argument(
        "--property",
        "--reader-property",
        dest="property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line reader property, e.g. parse.key=true (repeatable)",
    )
    parser.add_argument("--reader-config", metavar="FILE", help="line reader properties file")
    parser.add_argument(
        "--producer-property",
        "--command-property",
        dest="producer_property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a producer config (repeatable)",
    )
    parser.add_argument(
        "--producer.config", "--command-config", dest="producer_config", metavar="FILE", help="producer properties file"
    )
    parser.add_argument(
        "--compression-codec",
        nargs="?",
        const="gzip",
        choices=CODECS,
        help="none, gzip (the default when given without a value), snappy, lz4 or zstd",
    )
    parser.add_argument("--sync", action="store_true", help="send each message synchronously")
    parser.add_argument("--batch-size", type=int, help="bytes per batch (batch.size)")
    parser.add_argument(
        "--timeout", type=int, metavar="MS", help="linger.ms: how long a message may wait for a batch (default 1000)"
    )
    parser.add_argument("--request-required-acks", metavar="ACKS", help="acks: 0, 1 or -1/all (default -1)")
    parser.add_argument("--request-timeout-ms", type=int, help="request.timeout.ms (default 1500)")
    parser.add_argument("--message-send-max-retries", type=int, help="retries (default 3)")
    parser.add_argument("--retry-backoff-ms", type=int, help="retry.backoff.ms (default 100)")
    add_timeout_argument(parser, "--connect-timeout-ms")
    add_format_arguments(parser, "send")


class LineReader:
    """Kafka's LineMessageReader: one line -> (headers, key, value)."""

    def __init__(self, props: dict[str, str]):
        self.parse_key = props.get("parse.key", "false").strip().lower() == "true"
        self.key_separator = props.get("key.separator", "\t")
        self.parse_headers = props.get("parse.headers", "false").strip().lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.ignore_error = props.get("ignore.error", "false").strip().lower() == "true"
        self.null_marker = props.get("null.marker")
        self.line_number = 0
        pairs = [
            ("headers.delimiter", self.headers_delimiter, "headers.separator", self.headers_separator),
            ("headers.delimiter", self.headers_delimiter, "headers.key.separator", self.headers_key_separator),
            ("headers.separator", self.headers_separator, "headers.key.separator", self.headers_key_separator),
        ]
        for name_a, a, name_b, b in pairs:
            if a == b:
                raise ToolError(f"{name_a} and {name_b} may not be equal")
        for name, value in (
            ("key.separator", self.key_separator),
            ("headers.separator", self.headers_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.key.separator", self.headers_key_separator),
        ):
            if value == self.null_marker:
                raise ToolError(f"null.marker and {name} may not be equal")
        self.headers_split = re.compile(self.headers_separator)

    def _part(self, enabled: bool, line: str, start: int, separator: str, what: str) -> str | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise ToolError(f"No {what} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return text.encode("utf-8", "surrogateescape")

    def parse(self, line: str) -> tuple[list[tuple[str, bytes | None]] | None, bytes | None, bytes | None]:
        self.line_number += 1
        headers = self._part(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(self.parse_key, line, header_end, self.key_separator, "key separator")
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end :]
        header_list = None
        if headers is not None and headers != self.null_marker:
            header_list = [self._header(pair) for pair in self.headers_split.split(headers)]
        return header_list, self._bytes(key), self._bytes(value)

    def _header(self, pair: str) -> tuple[str, bytes | None]:
        index = pair.find(self.headers_key_separator)
        if index == -1:
            if self.ignore_error:
                return pair, None
            raise ToolError(f"No header key separator found in pair '{pair}' on line number {self.line_number}")
        key = pair[:index]
        if key == self.null_marker:
            raise ToolError(
                f"Header keys should not be equal to the null marker '{self.null_marker}' as they can't be null"
            )
        return key, self._bytes(pair[index + len(self.headers_key_separator) :])


def producer_config(args: argparse.Namespace) -> dict[str, str]:
    explicit = {
        "compression.type": args.compression_codec,
        "batch.size": args.batch_size,
        "linger.ms": args.timeout,
        "acks": args.request_required_acks,
        "request.timeout.ms": args.request_timeout_ms,
        "retries": args.message_send_max_retries,
        "retry.backoff.ms": args.retry_backoff_ms,
    }
    overrides = parse_key_values(args.producer_property, "producer property")
    overrides.update({key: str(value) for key, value in explicit.items() if value is not None})
    return client_config(
        args.bootstrap_server,
        args.producer_config,
        overrides,
        **{
            "client.id": "console-producer",
            "acks": "-1",
            "linger.ms": "1000",
            "request.timeout.ms": "1500",
            "retries": "3",
            "retry.backoff.ms": "100",
            "partitioner": "murmur2_random",
        },
    )


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    failures = 0

    def on_delivery(err, msg) -> None:
        nonlocal failures
        if err is not None:
            failures += 1
            key = msg.key()
            value = msg.value()
            print(
                f"Error when sending message to topic {msg.topic()} with key: "
                f"{'null' if key is None else f'{len(key)} bytes'}, "
                f"value: {'null' if value is None else f'{len(value)} bytes'} with error: {err.str()}",
                file=sys.stderr,
            )

    try:
        reader_props = load_properties(args.reader_config) if args.reader_config else {}
        reader_props.update(parse_key_values(args.property, "reader property"))
        reader = LineReader(reader_props)
        encode_key = encode_value = None
        if args.key_format != "string":
            from strom.cli.typed_records import encoder

            encode_key = encoder(reader_props, args.topic, "key", args.key_format)
        if args.value_format != "string":
            from strom.cli.typed_records import encoder

            encode_value = encoder(reader_props, args.topic, "value", args.value_format)
        config = producer_config(args)
        producer = Producer(config)
        ensure_reachable(producer, config["bootstrap.servers"], args.connect_timeout_ms / 1000)
    except (ToolError, KafkaException, re.error) as exc:
        print(f"strom console-producer: {error_text(exc)}", file=sys.stderr)
        return 1

    prompt = sys.stdin.isatty() and sys.stdout.isatty()
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape", newline="\n", closefd=False)
    status = 0
    try:
        while True:
            if prompt:
                sys.stdout.write(">")
                sys.stdout.flush()
            line = stdin.readline()
            if not line:
                break
            line = line[:-1] if line.endswith("\n") else line
            line = line[:-1] if line.endswith("\r") else line
            headers, key, value = reader.parse(line)
            if encode_key is not None:
                key = encode_key(key, reader.line_number)
            if encode_value is not None:
                value = encode_value(value, reader.line_number)
            send(producer, args.topic, key, value, headers, on_delivery)
            if args.sync:
                producer.flush(FLUSH_TIMEOUT_S)
    except ToolError as exc:
        print(f"strom console-producer: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        status = 130
    except KafkaException as exc:
        print(f"strom console-producer: {error_text(exc)}", file=sys.stderr)
        status = 1
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if remaining:
        print(
            f"strom console-producer: {remaining} messages were not delivered within {FLUSH_TIMEOUT_S:.0f}s",
            file=sys.stderr,
        )
        status = status or 1
    if failures:
        status = status or 1
    return status


def send(producer, topic: str, key, value, headers, on_delivery) -> None:
    while True:
        try:
            if headers:
                producer.produce(topic, value, key, on_delivery=on_delivery, headers=headers)
            else:
                producer.produce(topic, value, key, on_delivery=on_delivery)
            break
        except BufferError:
            producer.poll(0.1)  # the local queue is full: let deliveries drain it
    producer.poll(0)
