"""A connection flood from one address against a normal client on another.

    python -m strom.bench.connection_flood [--attempts 5000] [--per-ip 50] [--seconds 5] [--rate 500]
        [--record]

Starts a broker with ``max.connections.per.ip=--per-ip``. A normal producer (confluent-kafka,
acks=1, one 100-byte message every 1/``--rate`` s) runs from 127.0.0.1, first alone, then while a
flood from 127.0.0.2 (another loopback address) makes ``--attempts`` connections as fast as it
can: each connects, sends ApiVersions (what every client sends first), and is kept open to the
end, so the flood asks for every connection it can get. The broker should hold at most
``--per-ip`` of them and close the rest at once, while the producer's latency stays what it was.

Prints the p50 and p99 produce latency alone and under the flood and their ratio, how many of the
flood's connections were answered and how many the broker closed, and the broker's RSS before and
after. Asserts nothing about time (shared, noisy machines).
"""

from __future__ import annotations

import argparse
import errno
import selectors
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass

from strom.bench.connections import api_versions_frame, percentile, produce_latencies, settled_rss_kib
from strom.bench.requests import start_broker
from strom.bench.results import add_record_argument, record_if_asked
from strom.resources import raise_open_files_limit

FLOOD_ADDRESS = "127.0.0.2"


@dataclass
class FloodResult:
    attempts: int
    answered: int  # got their ApiVersions response: the broker holds them
    closed: int  # closed by the broker without an answer
    unsettled: int  # neither within the flood's time limit
    seconds: float


def flood(port: int, attempts: int, source: str = FLOOD_ADDRESS, timeout_s: float = 60.0) -> FloodResult:
    """``attempts`` connections from ``source``, each sending ApiVersions and kept open until every
    one is answered or closed; then all are closed."""
    selector = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    answered = closed = 0
    began = time.monotonic()
    deadline = began + timeout_s
    try:
        for i in range(attempts):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((source, 0))
            sock.setblocking(False)
            code = sock.connect_ex(("127.0.0.1", port))
            if code not in (0, errno.EINPROGRESS):
                sock.close()
                closed += 1
                continue
            socks.append(sock)
            selector.register(sock, selectors.EVENT_WRITE, [api_versions_frame(i + 1), b""])
            answered, closed = _drain(selector, answered, closed, 0)
        while selector.get_map() and time.monotonic() < deadline:
            answered, closed = _drain(selector, answered, closed, 0.1)
        unsettled = len(selector.get_map())
    finally:
        selector.close()
        for sock in socks:
            sock.close()
    return FloodResult(attempts, answered, closed, unsettled, time.monotonic() - began)


def _drain(selector: selectors.BaseSelector, answered: int, closed: int, timeout: float) -> tuple[int, int]:
    for key, events in selector.select(timeout):
        sock, state = key.fileobj, key.data
        assert isinstance(sock, socket.socket)
        try:
            if events & selectors.EVENT_WRITE and state[0]:
                sent = sock.send(state[0])
                state[0] = state[0][sent:]
                if not state[0]:
                    selector.modify(sock, selectors.EVENT_READ, state)
                continue
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
            data = b""
        except BlockingIOError:
            continue
        if not data:
            selector.unregister(sock)
            closed += 1
            continue
        state[1] += data
        if len(state[1]) >= 4 and len(state[1]) >= 4 + int.from_bytes(state[1][:4], "big"):
            selector.unregister(sock)  # answered: held open, silent, until the flood ends
            answered += 1
    return answered, closed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=5000)
    parser.add_argument("--per-ip", type=int, default=50, help="max.connections.per.ip (default 50)")
    parser.add_argument("--seconds", type=float, default=5.0, help="workload length per phase")
    parser.add_argument("--rate", type=float, default=500.0, help="messages per second")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    from confluent_kafka import Producer

    soft, _ = raise_open_files_limit()
    if soft < args.attempts + 256:
        raise SystemExit(f"open files limit {soft} is too low for {args.attempts} connections")
    data_dir = tempfile.mkdtemp(prefix="strom-bench-flood-")
    broker, port = start_broker(data_dir, {"max.connections.per.ip": str(args.per_ip)})
    try:
        producer = Producer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1", "linger.ms": 0, "enable.idempotence": False}
        )
        payload = b"x" * 100
        produce_latencies(producer, "flood", 1.0, args.rate, payload)  # topic, metadata, warm-up
        rss_before = settled_rss_kib(broker.pid)
        alone = produce_latencies(producer, "flood", args.seconds, args.rate, payload)
        outcome: list[FloodResult] = []
        flooding = threading.Thread(target=lambda: outcome.append(flood(port, args.attempts)))
        flooding.start()
        under = produce_latencies(producer, "flood", args.seconds, args.rate, payload)
        flooding.join(120)
        rss_after = settled_rss_kib(broker.pid)
        producer.flush(10)
        del producer
    finally:
        broker.terminate()
        broker.wait(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)
    result = outcome[0]
    print(
        f"flood from {FLOOD_ADDRESS}: {result.attempts} attempts in {result.seconds:.1f} s, {result.answered} "
        f"answered and held, {result.closed} closed by the broker, {result.unsettled} unsettled "
        f"(max.connections.per.ip={args.per_ip})"
    )
    p50 = (percentile(alone, 0.5), percentile(under, 0.5))
    p99 = (percentile(alone, 0.99), percentile(under, 0.99))
    print(
        f"normal producer from 127.0.0.1, {args.rate:.0f} msg/s: alone p50 {p50[0] * 1000:.2f} ms p99 "
        f"{p99[0] * 1000:.2f} ms; under the flood p50 {p50[1] * 1000:.2f} ms p99 {p99[1] * 1000:.2f} ms; "
        f"p99 ratio {p99[1] / p99[0]:.2f}"
    )
    print(f"broker RSS {rss_before / 1024:.1f} MiB before the flood, {rss_after / 1024:.1f} MiB after")
    figures = {
        "producer p99 alone": (p99[0] * 1000, "ms"),
        "producer p99 under the flood": (p99[1] * 1000, "ms"),
        "p99 under the flood / alone": (p99[1] / p99[0], "ratio"),
        "broker RSS after the flood": (rss_after / 1024, "MiB"),
    }
    record_if_asked(args, "connection_flood", figures, argv)


if __name__ == "__main__":
    main()
