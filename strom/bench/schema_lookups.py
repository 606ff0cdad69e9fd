"""Schema Registry lookups by id: how many a broker's registry answers per second, and their p99.

    python -m strom.bench.schema_lookups [--processes 4] [--seconds 5] [--schemas 100] [--record]

A deserializer that meets a schema id it has not seen asks the registry for it
(``GET /schemas/ids/{id}``), so this is the call a fleet of new consumers, or a restarted Spark
job's executors, makes all at once. The benchmark starts one broker serving the registry,
registers ``--schemas`` record schemas under as many subjects, then runs ``--processes``
processes that each use confluent-kafka's own ``SchemaRegistryClient`` (one keep-alive HTTP
connection each) to look up ids round-robin for ``--seconds``. The client caches what it has
fetched, so each process clears its caches before every lookup: every lookup is a request.
Prints the lookups per second of all processes together, the p50 and p99 of one lookup's
latency, and the broker's CPU use. Asserts nothing (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import time

from strom.bench.results import add_record_argument, record


def schema(index: int) -> str:
    fields = [{"name": f"field_{n}", "type": "long"} for n in range(8)]
    return json.dumps({"type": "record", "name": f"Event{index}", "namespace": "bench", "fields": fields})


def look_up(url: str, ids: list[int], seconds: float, start_at: float, results) -> None:
    """One client process: lookups until ``seconds`` after ``start_at``; puts (count, latencies)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})
    client.get_schema(ids[0])  # opens the connection before the clock starts
    while time.time() < start_at:
        time.sleep(0.001)
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    index = os.getpid()
    while True:
        began = time.perf_counter()
        if began >= deadline:
            break
        client.clear_caches()
        client.get_schema(ids[index % len(ids)])
        latencies.append(time.perf_counter() - began)
        index += 1
    results.put(latencies)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each process looks up (default 5)")
    parser.add_argument("--schemas", type=int, default=100, help="schemas registered and looked up (default 100)")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from strom.bench.requests import cpu_seconds, start_broker, stop_broker

    data_dir = tempfile.mkdtemp(prefix="strom-bench-lookups-")
    process, _port = start_broker(data_dir, {"schema.registry.listeners": "http://127.0.0.1:0"})
    try:
        with open(os.path.join(data_dir, "strom.schema-registry")) as handle:
            url = handle.read().strip()
        admin = SchemaRegistryClient({"url": url})
        ids = [admin.register_schema(f"bench-{i}-value", Schema(schema(i), "AVRO")) for i in range(args.schemas)]
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        start_at = time.time() + 3.0  # every process imported and connected by then
        workers = [
            context.Process(target=look_up, args=(url, ids, args.seconds, start_at, results))
            for _ in range(args.processes)
        ]
        for worker in workers:
            worker.start()
        while time.time() < start_at:
            time.sleep(0.01)
        cpu_before = cpu_seconds(process.pid)
        per_process = [results.get(timeout=args.seconds + 60) for _ in workers]
        cpu_used = cpu_seconds(process.pid) - cpu_before
        for worker in workers:
            worker.join(30)
        latencies = sorted(latency for one in per_process for latency in one)
        rate = len(latencies) / args.seconds
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        print(f"{args.schemas} schemas, {args.processes} processes of confluent-kafka's SchemaRegistryClient")
        print(f"lookups by id: {rate:,.0f}/s  p50 {p50:.2f} ms  p99 {p99:.2f} ms  ({len(latencies)} lookups)")
        print(f"broker CPU: {cpu_used / args.seconds:.2f} cores")
        if args.record:
            record(
                args.record,
                "schema_lookups",
                {"lookups per second": (rate, "1/s"), "p99 latency": (p99, "ms")},
                argv,
            )
    finally:
        stop_broker(process, data_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
