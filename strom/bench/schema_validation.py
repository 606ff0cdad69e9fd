"""Produce throughput with schema id validation on against off (issue 30's goal: at least 0.9).

    python -m strom.bench.schema_validation [--messages 200000] [--rounds 3] [--compression none] [--record]

Starts one broker serving the Schema Registry, registers a record schema of 10 fields under
``validated-value``, and creates two topics of one partition: ``plain`` and ``validated``
(``confluent.value.schema.validation=true``). The same Avro records (Confluent's wire format,
about 100 bytes each) are produced to each with confluent-kafka (acks=1, linger.ms=5), the two
topics taking turns ``--rounds`` times so that a drift of the machine hits both. Prints each
round's records per second, the medians, and their ratio (validated / plain), and the broker's CPU
time per record with validation off and on (read from /proc around each round: on a loaded
machine the CPU a record costs the broker moves far less than the rates do). Asserts nothing
(shared, noisy machines).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import struct
import tempfile
import time
import urllib.request

from strom.bench.results import add_record_argument, record_if_asked

SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "status", "type": "int"},
        {"name": "bytes", "type": "long"},
        {"name": "latency_ms", "type": "double"},
        {"name": "method", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "mobile", "type": "boolean"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
    ],
}
TOPICS = ("plain", "validated")


def register(url: str, subject: str, schema: dict) -> int:
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    request = urllib.request.Request(
        f"{url}/subjects/{subject}/versions",
        data=body,
        method="POST",
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["id"]


def records(schema_id: int, count: int) -> list[bytes]:
    import fastavro

    parsed = fastavro.parse_schema(SCHEMA)
    prefix = struct.pack(">bI", 0, schema_id)
    out = []
    for i in range(count):
        buf = io.BytesIO()
        buf.write(prefix)
        fastavro.schemaless_writer(
            buf,
            parsed,
            {
                "id": i,
                "user": f"user-{i % 1000}",
                "page": f"/products/{i % 97}",
                "status": 200 if i % 10 else 404,
                "bytes": 512 + i % 4096,
                "latency_ms": (i % 250) / 10,
                "method": "GET",
                "country": "DE",
                "mobile": bool(i % 2),
                "referrer": None if i % 3 else "https://example.org/",
            },
        )
        out.append(buf.getvalue())
    return out


def produce_rate(bootstrap: str, topic: str, values: list[bytes], compression: str) -> float:
    """Records per second of one producer sending ``values`` and waiting for every delivery."""
    from confluent_kafka import Producer

    failed = 0

    def on_delivery(err, msg) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "compression.type": compression,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    began = time.perf_counter()
    for value in values:
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) or failed:
        raise SystemExit(f"{topic}: {failed} records failed, some not delivered within 120 s")
    return len(values) / (time.perf_counter() - began)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="records per round and topic")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each topic once per round")
    parser.add_argument("--compression", default="none", choices=("none", "lz4", "zstd", "gzip", "snappy"))
    add_record_argument(parser)
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient, NewTopic

    from strom.bench.requests import cpu_seconds, start_broker, stop_broker

    data_dir = tempfile.mkdtemp(prefix="strom-bench-sv-")
    process, port = start_broker(data_dir, {"schema.registry.listeners": "http://127.0.0.1:0"})
    try:
        bootstrap = f"127.0.0.1:{port}"
        with open(os.path.join(data_dir, "strom.schema-registry")) as handle:
            url = handle.read().strip()
        schema_id = register(url, "validated-value", SCHEMA)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        configs = {"plain": {}, "validated": {"confluent.value.schema.validation": "true"}}
        for future in admin.create_topics([NewTopic(t, 1, 1, config=configs[t]) for t in TOPICS]).values():
            future.result(30)
        values = records(schema_id, args.messages)
        size = sum(len(v) for v in values) / len(values)
        print(f"{args.messages} records of {size:.0f} bytes per round, compression {args.compression}", flush=True)
        rates: dict[str, list[float]] = {t: [] for t in TOPICS}
        cpu_us: dict[str, list[float]] = {t: [] for t in TOPICS}  # the broker's CPU per record
        produce_rate(bootstrap, "plain", values[: min(10_000, len(values))], args.compression)  # warm-up
        for round_ in range(args.rounds):
            for topic in TOPICS if round_ % 2 == 0 else reversed(TOPICS):
                began = cpu_seconds(process.pid)
                rates[topic].append(produce_rate(bootstrap, topic, values, args.compression))
                cpu_us[topic].append((cpu_seconds(process.pid) - began) / len(values) * 1e6)
            print(
                f"round {round_ + 1}: plain {rates['plain'][-1]:,.0f}/s, validated {rates['validated'][-1]:,.0f}/s",
                flush=True,
            )
        plain, validated = statistics.median(rates["plain"]), statistics.median(rates["validated"])
        print(f"median records/s: validation off {plain:,.0f}, on {validated:,.0f}")
        print(f"ratio (on / off): {validated / plain:.2f}")
        cpu_off, cpu_on = statistics.median(cpu_us["plain"]), statistics.median(cpu_us["validated"])
        print(f"broker CPU a record (median): validation off {cpu_off:.2f} us, on {cpu_on:.2f} us")
        figures = {
            "validation off": (plain, "records/s"),
            "validation on": (validated, "records/s"),
            "on / off": (validated / plain, "ratio"),
            "broker CPU a record, validation off": (cpu_off, "µs"),
            "broker CPU a record, validation on": (cpu_on, "µs"),
        }
        record_if_asked(args, "schema_validation", figures, argv)
    finally:
        stop_broker(process, data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
