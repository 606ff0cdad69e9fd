"""Decoding Confluent-framed Protobuf values into Arrow columns, against Avro's decoder, in one process.

    python -m strom.bench.protobuf_decode [--records 20000] [--repeat 5] [--record]

The Spark source, the console and the Iceberg workers decode a batch of framed values at a time
(``strom.iceberg.protobuf_columns.decode``; Avro's is ``strom.spark.avro_columns``). This times
that step alone, no broker and no Spark, for one batch of ``--records`` values of the same
10-field record (the Avro ``BenchEvent`` of ``strom.bench.spark``, and its Protobuf twin: an
int64, an int32, two strings, a double, a float, a bool, an enum, an optional string and a
Timestamp) decoded four ways:

* Protobuf, ``decode`` (the batch parsed at once, then column by column);
* Protobuf per message: each value parsed on its own and turned into a row (``as_dict``, the
  Iceberg schema modes' way), the rows then given to ``pyarrow.array``;
* Avro columnar (``AvroColumnDecoder``) and Avro with fastavro per record (its fallback).

The four take turns, round by round, so the load of a shared machine falls on them alike; the
best round counts. Prints µs per record in wall-clock and in this process's CPU time (the
steadier of the two on a loaded machine: the decoders are single-threaded) and the load
average; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from strom.bench.results import add_record_argument, record_if_asked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m strom.bench.protobuf_decode",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=20_000, help="values in the batch (default 20000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds; the best counts (default 5)")
    add_record_argument(parser)
    args = parser.parse_args(argv)

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from strom.bench.spark import AVRO_SCHEMA, PROTO, avro_values, protobuf_values
    from strom.iceberg import protobuf_columns as pc
    from strom.spark.avro_columns import AvroColumnDecoder
    from strom.spark.avro_types import spark_type
    from strom.spark.protobuf_types import load

    n = args.records
    schema = load(PROTO)
    descriptor = schema.message()
    cls = pc.message_class(descriptor)
    proto_batch = pa.array(protobuf_values(cls, n, pc.frame(1)), pa.binary())
    avro_text = json.dumps(AVRO_SCHEMA)
    avro_batch = pa.array([b"\x00\x00\x00\x00\x02" + body for body in avro_values(n)], pa.binary())
    avro_type = to_arrow_type(spark_type(AVRO_SCHEMA)[0], timezone="UTC")

    def avro(columnar: bool):
        decoder = AvroColumnDecoder(avro_text, avro_type, lambda _: avro_text)
        if not columnar:
            decoder._columnar[2] = False
        return lambda: decoder.decode(avro_batch)

    proto_type = pc.arrow_type(descriptor)

    def per_message():
        rows = [pc.as_dict(cls.FromString(value[6:])) for value in proto_batch.to_pylist()]
        return pa.array(rows, proto_type)

    decoded = pc.decode(proto_batch, descriptor, (0,), lambda _: True)[0]
    if decoded.to_pylist() != per_message().to_pylist():
        raise RuntimeError("decode and the per-message reading disagree")
    runs = {
        "protobuf decode": lambda: pc.decode(proto_batch, descriptor, (0,), lambda _: True),
        "protobuf per message": per_message,
        "avro columnar": avro(True),
        "avro fastavro per record": avro(False),
    }
    for run in runs.values():
        run()  # warm-up
    wall = {name: float("inf") for name in runs}
    cpu = dict(wall)
    for _ in range(args.repeat):  # round by round, so that the machine's load falls on all alike
        for name, run in runs.items():
            started, started_cpu = time.perf_counter(), time.process_time()
            run()
            cpu[name] = min(cpu[name], time.process_time() - started_cpu)
            wall[name] = min(wall[name], time.perf_counter() - started)
    load_1m = os.getloadavg()[0]
    from google.protobuf.internal import api_implementation

    print(
        f"{n:,} values of a 10-field record, best of {args.repeat} rounds, load average {load_1m:.2f}, "
        f"protobuf backend {api_implementation.Type()}"
    )
    print(f"  {'':28s} {'wall':>6s}  {'CPU':>6s}  µs/record")
    for name in runs:
        print(f"  {name:28s} {wall[name] / n * 1e6:6.2f}  {cpu[name] / n * 1e6:6.2f}")
    ratio = cpu["protobuf decode"] / cpu["avro columnar"]
    print(f"  protobuf decode / avro columnar (CPU): {ratio:.2f}")
    figures = {f"{name} µs/record (CPU)": (cpu[name] / n * 1e6, "µs") for name in runs}
    figures["protobuf decode / avro columnar (CPU)"] = (ratio, "ratio")
    record_if_asked(args, "protobuf_decode", figures, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
