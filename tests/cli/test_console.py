"""``strom console-producer`` / ``console-consumer`` against a real broker: lines in, lines out.

The consumer runs without --group here (assign, no group coordinator needed).
"""

import re
import subprocess
import sys
import time


def strom(*args, input=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], input=input, capture_output=True, text=True, timeout=timeout
    )


def create(broker, topic, partitions=1, *extra):
    result = strom(
        "topics",
        "--bootstrap-server",
        broker.bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--replication-factor",
        "1",
        *extra,
    )
    assert result.returncode == 0, result.stderr


def produce(broker, topic, lines, *extra):
    result = strom(
        "console-producer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        *extra,
        input="".join(line + "\n" for line in lines),
    )
    assert result.returncode == 0, result.stderr
    return result


def consume(broker, topic, *extra):
    return strom("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic, *extra)


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's DefaultPartitioner for keyed records: murmur2(key) & 0x7fffffff % partitions."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    for i in range(len(key) // 4):
        k = int.from_bytes(key[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = len(key) & ~3
    extra = len(key) % 4
    if extra == 3:
        h ^= key[tail + 2] << 16
    if extra >= 2:
        h ^= key[tail + 1] << 8
    if extra >= 1:
        h ^= key[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def test_keyed_lines_come_back_with_key_partition_and_offset(broker):
    create(broker, "orders", 3)
    sent = [(f"user-{i % 4}", f"order {i}") for i in range(12)]
    produce(
        broker, "orders", [f"{k}:{v}" for k, v in sent], "--property", "parse.key=true", "--property", "key.separator=:"
    )

    result = consume(
        broker,
        "orders",
        "--from-beginning",
        "--max-messages",
        "12",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.partition=true",
        "--timeout-ms",
        "20000",
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "Processed a total of 12 messages"
    rows = [re.fullmatch(r"Partition:(\d+)\tOffset:(\d+)\t(\S+)\t(.+)", line) for line in result.stdout.splitlines()]
    assert all(rows), result.stdout
    got = [(int(r[1]), int(r[2]), r[3], r[4]) for r in rows]
    assert sorted((k, v) for _, _, k, v in got) == sorted(sent)
    for partition in range(3):
        mine = [(offset, key, value) for p, offset, key, value in got if p == partition]
        assert [offset for offset, _, _ in mine] == list(range(len(mine)))  # consecutive from 0
        expected = [(k, v) for k, v in sent if murmur2_partition(k.encode(), 3) == partition]
        assert [(k, v) for _, k, v in mine] == expected  # Kafka's placement, in send order


def test_values_only_by_default_and_max_messages_stops(broker):
    create(broker, "lines")
    produce(broker, "lines", [f"line {i}" for i in range(10)])
    started = time.monotonic()
    result = consume(broker, "lines", "--from-beginning", "--max-messages", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["line 0", "line 1", "line 2"]
    assert "Processed a total of 3 messages" in result.stderr
    assert time.monotonic() - started < 30


def test_timeout_ends_an_idle_consumer(broker):
    create(broker, "empty")
    started = time.monotonic()
    result = consume(broker, "empty", "--from-beginning", "--timeout-ms", "1500")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == "Processed a total of 0 messages"
    assert 1.4 < time.monotonic() - started < 30


def test_formatter_prints_timestamp_headers_and_custom_separators(broker):
    create(broker, "fmt")
    produce(
        broker,
        "fmt",
        ["trace:abc,span:1\tk1\tfirst", "trace:def\tk2\tsecond"],
        "--property",
        "parse.headers=true",
        "--property",
        "parse.key=true",
    )
    produce(broker, "fmt", ["no key"])
    result = consume(
        broker,
        "fmt",
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "20000",
        "--property",
        "print.timestamp=true",
        "--property",
        "print.headers=true",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "key.separator= | ",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    now_ms = time.time() * 1000
    for line in lines:
        timestamp = int(re.match(r"CreateTime:(\d+) \| ", line)[1])
        assert abs(timestamp - now_ms) < 120_000
    assert [line.split(" | ", 1)[1] for line in lines] == [
        "Offset:0 | trace:abc,span:1 | k1 | first",
        "Offset:1 | trace:def | k2 | second",
        "Offset:2 | NO_HEADERS | null | no key",
    ]


def test_partition_and_offset_select_where_to_start(broker):
    create(broker, "two", 2)
    # librdkafka's murmur2 partitioner sends every keyless line to one partition: find it, then read from 1
    produce(broker, "two", ["a0", "a1", "a2"], "--producer-property", "partitioner=murmur2")
    everything = consume(
        broker,
        "two",
        "--from-beginning",
        "--max-messages",
        "3",
        "--timeout-ms",
        "20000",
        "--property",
        "print.partition=true",
    )
    partition = int(re.match(r"Partition:(\d+)", everything.stdout)[1])
    result = consume(
        broker,
        "two",
        "--partition",
        str(partition),
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--timeout-ms",
        "20000",
        "--property",
        "print.offset=true",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Offset:1\ta1", "Offset:2\ta2"]

    earliest = consume(
        broker,
        "two",
        "--partition",
        str(partition),
        "--offset",
        "earliest",
        "--max-messages",
        "1",
        "--timeout-ms",
        "20000",
    )
    assert earliest.stdout == "a0\n"
    assert consume(broker, "two", "--partition", "7", "--offset", "0", "--timeout-ms", "1000").returncode == 1
    bad = consume(broker, "two", "--offset", "1")
    assert bad.returncode == 1 and "The partition is required when offset is specified." in bad.stderr


def test_without_from_beginning_only_new_messages_are_printed(broker):
    create(broker, "live")
    produce(broker, "live", ["old 1", "old 2"])
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "strom.cli.main",
            "console-consumer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "live",
            "--max-messages",
            "1",
            "--timeout-ms",
            "30000",
            "--property",
            "print.offset=true",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 40
        while consumer.poll() is None and time.monotonic() < deadline:
            produce(broker, "live", ["new"])  # until the consumer, positioned at the end, sees one
            time.sleep(0.5)
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
    assert consumer.returncode == 0, err
    offset, value = out.strip().split("\t")
    assert value == "new" and int(offset.removeprefix("Offset:")) >= 2


def test_producer_reports_parse_errors_and_failed_deliveries(broker):
    create(broker, "small", 1, "--config", "max.message.bytes=200")
    no_separator = strom(
        "console-producer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "small",
        "--property",
        "parse.key=true",
        input="no separator here\n",
    )
    assert no_separator.returncode == 1
    assert "No key separator found on line number 1: 'no separator here'" in no_separator.stderr

    too_big = strom(
        "console-producer", "--bootstrap-server", broker.bootstrap, "--topic", "small", input="x" * 1000 + "\n"
    )
    assert too_big.returncode == 1
    assert "Error when sending message to topic small" in too_big.stderr

    fine = strom(
        "console-producer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        "small",
        "--compression-codec",
        "gzip",
        "--producer-property",
        "acks=all",
        input="small one\n",
    )
    assert fine.returncode == 0, fine.stderr
    assert consume(broker, "small", "--from-beginning", "--max-messages", "1").stdout == "small one\n"


def test_producer_config_file_and_null_marker(broker, tmp_path):
    create(broker, "cfg")
    config = tmp_path / "producer.properties"
    config.write_text(
        "# Kafka-style file\nacks=1\nkey.serializer=org.apache.kafka.common.serialization."
        "StringSerializer\nlinger.ms = 5\n"
    )
    produce(
        broker,
        "cfg",
        ["NULL:tombstone-ish", "k:NULL"],
        "--producer.config",
        str(config),
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "null.marker=NULL",
    )
    result = consume(
        broker,
        "cfg",
        "--from-beginning",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "null.literal=<none>",
    )
    assert result.stdout.splitlines() == ["<none>\ttombstone-ish", "k\t<none>"]
