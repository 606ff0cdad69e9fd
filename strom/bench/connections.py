"""Many idle client connections on one broker: what each one costs, and what they cost a workload.

    python -m strom.bench.connections [--connections 5000] [--rounds 2] [--seconds 5] [--rate 1000] [--record]

Starts a broker process (as strom.bench.requests does, data in a temporary directory) after
raising this process's open-files soft limit to the hard limit (the broker inherits it). Then,
``--rounds`` times, alternating:

- without: a produce workload (confluent-kafka, acks=1, linger.ms=0, one ``--size`` byte message
  every 1/``--rate`` s for ``--seconds``), each message timed from ``produce()`` to its delivery
  report;
- with: ``--connections`` TCP connections opened from this process, each completing an
  ApiVersions exchange (what every client sends first) and then left open and silent; the
  broker's RSS (VmRSS in /proc/PID/status) before and after gives the growth per connection; its
  CPU over two idle seconds is read; then the same workload runs while they stay open, and they
  are closed again.

Prints RSS growth per connection, idle broker CPU, p50/p99 produce latency and broker CPU per
message with and without the idle connections, and the ratios. Asserts nothing about time (the
machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import errno
import selectors
import shutil
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from strom.bench.requests import cpu_seconds, start_broker
from strom.bench.results import add_record_argument, record_if_asked
from strom.protocol.codec import decode_response, encode
from strom.protocol.frame import request_frame, response_body_offset
from strom.resources import raise_open_files_limit

API_VERSIONS = 18
VERSION = 3  # ApiVersionsRequest's version; flexible, as librdkafka and the Java client send it first
CONNECTING_AT_ONCE = 256  # handshakes in flight: the listen backlog stays far from full


def api_versions_frame(correlation_id: int) -> bytes:
    body = encode(ApiVersionsRequest(client_software_name="strom-bench", client_software_version="1"))
    return request_frame(API_VERSIONS, VERSION, correlation_id, b"strom-bench-idle", body)


@dataclass
class _Exchange:
    sock: socket.socket
    correlation_id: int
    sent: bool = False
    received: bytearray = field(default_factory=bytearray)


class IdleConnections:
    """Sockets to one broker that have each completed ApiVersions, then stay open and silent.

    One selector loop drives them all (a thread per socket would cost this process more than the
    broker); at most CONNECTING_AT_ONCE handshakes are in flight, so none waits out a SYN retry.
    """

    def __init__(self, host: str, port: int):
        self.address = (host, port)
        self.sockets: list[socket.socket] = []
        self._correlation = 0

    def __len__(self) -> int:
        return len(self.sockets)

    def open(self, count: int, timeout_s: float = 120.0) -> None:
        """Open ``count`` more; raises with what failed when one is refused, reset or late."""
        deadline = time.monotonic() + timeout_s
        selector = selectors.DefaultSelector()
        started = 0
        try:
            while started < count or selector.get_map():
                while started < count and len(selector.get_map()) < CONNECTING_AT_ONCE:
                    selector.register(*self._connect())
                    started += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.sockets)} connections completed ApiVersions within {timeout_s}s")
                for key, _ in selector.select(min(left, 1.0)):
                    if self._step(key.data):
                        selector.unregister(key.fileobj)
                        self.sockets.append(key.data.sock)
                    else:
                        selector.modify(key.fileobj, selectors.EVENT_READ, key.data)
        except BaseException:
            for key in list(selector.get_map().values()):
                key.data.sock.close()
            raise
        finally:
            selector.close()

    def _connect(self) -> tuple[socket.socket, int, _Exchange]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex(self.address)
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            raise OSError(code, f"connect to {self.address}: {errno.errorcode.get(code, code)}")
        self._correlation += 1
        return sock, selectors.EVENT_WRITE, _Exchange(sock, self._correlation)

    def _step(self, exchange: _Exchange) -> bool:
        """Advance one socket's handshake; True once its ApiVersions response is in."""
        sock = exchange.sock
        if not exchange.sent:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, f"connect to {self.address}: {errno.errorcode.get(code, code)}")
            sock.send(api_versions_frame(exchange.correlation_id))  # ~60 bytes: an empty buffer takes them
            exchange.sent = True
            return False
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"the broker closed a connection before answering ApiVersions ({self.address})")
        exchange.received += chunk
        if len(exchange.received) < 4 or len(exchange.received) < 4 + int.from_bytes(exchange.received[:4], "big"):
            return False
        _check_response(bytes(exchange.received[4:]), exchange.correlation_id)
        return True

    def ping(self, sample: int | None = None, timeout_s: float = 60.0) -> int:
        """Send ApiVersions again on ``sample`` of the open sockets (all by default) and read each
        answer: they are still served, not just still open. Returns how many answered."""
        chosen = self.sockets if sample is None else self.sockets[:: max(1, len(self.sockets) // sample)]
        deadline = time.monotonic() + timeout_s
        answered = 0
        for start in range(0, len(chosen), CONNECTING_AT_ONCE):
            selector = selectors.DefaultSelector()
            try:
                for sock in chosen[start : start + CONNECTING_AT_ONCE]:
                    self._correlation += 1
                    exchange = _Exchange(sock, self._correlation, sent=True)
                    sock.send(api_versions_frame(exchange.correlation_id))
                    selector.register(sock, selectors.EVENT_READ, exchange)
                while selector.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"{answered} of {len(chosen)} idle connections answered within {timeout_s}s")
                    for key, _ in selector.select(min(left, 1.0)):
                        if self._step(key.data):
                            selector.unregister(key.fileobj)
                            answered += 1
            finally:
                selector.close()
        return answered

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets = []


def _check_response(frame: bytes, correlation_id: int) -> None:
    offset = response_body_offset(API_VERSIONS, VERSION, frame, correlation_id)
    response = decode_response(API_VERSIONS, VERSION, memoryview(frame), offset)
    if response.error_code != 0:
        raise RuntimeError(f"ApiVersions answered with error {response.error_code}")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def settled_rss_kib(pid: int, timeout_s: float = 5.0) -> int:
    """RSS once it stops moving (the broker may still be accepting or freeing connections)."""
    deadline = time.monotonic() + timeout_s
    last = rss_kib(pid)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = rss_kib(pid)
        if now == last:
            return now
        last = now
    return last


def wait_idle(pid: int, timeout_s: float = 15.0) -> None:
    """Until the broker uses under a tenth of a core (it may still be closing connections)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < 0.05:
            return


def produce_latencies(producer, topic: str, seconds: float, rate: float, payload: bytes) -> list[float]:
    """Seconds from produce() to the delivery report of each message, paced at ``rate``/s."""
    from time import perf_counter

    latencies: list[float] = []
    errors: list[object] = []

    def report(sent: float, err, _msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            latencies.append(perf_counter() - sent)

    interval = 1.0 / rate
    count = int(seconds * rate)
    began = perf_counter()
    for i in range(count):
        due = began + i * interval
        while (now := perf_counter()) < due:
            producer.poll(due - now)  # serves delivery reports as they come
        sent = perf_counter()
        producer.produce(topic, payload, partition=0, on_delivery=lambda err, msg, sent=sent: report(sent, err, msg))
        producer.poll(0)
    if producer.flush(60) != 0:
        raise TimeoutError(f"{len(producer)} messages not delivered within 60 s")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2, help="without/with pairs (default 2)")
    parser.add_argument("--seconds", type=float, default=5.0, help="workload length per phase")
    parser.add_argument("--rate", type=float, default=1000.0, help="messages per second")
    parser.add_argument("--size", type=int, default=100)
    add_record_argument(parser)
    args = parser.parse_args(argv)
    from confluent_kafka import Producer

    soft, hard = raise_open_files_limit()
    if soft < args.connections + 256:
        raise SystemExit(f"open files limit {soft} (hard {hard}) is too low for {args.connections} connections")
    data_dir = tempfile.mkdtemp(prefix="strom-bench-connections-")
    broker, port = start_broker(data_dir)
    idle = IdleConnections("127.0.0.1", port)
    payload = b"x" * args.size
    phases: dict[str, list[float]] = {"without": [], "with": []}
    round_p99: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    per_connection: list[float] = []
    idle_cpu: list[float] = []
    try:
        producer = Producer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "acks": "1", "linger.ms": 0, "enable.idempotence": False}
        )
        produce_latencies(producer, "connections", 1.0, args.rate, payload)  # topic, metadata, warm-up
        base_rss = settled_rss_kib(broker.pid)
        print(f"broker RSS after warm-up: {base_rss / 1024:.1f} MiB; open files limit {soft}", flush=True)
        for round_ in range(args.rounds):
            for phase in ("without", "with"):
                if phase == "with":
                    before = settled_rss_kib(broker.pid)
                    began = time.perf_counter()
                    idle.open(args.connections)
                    opened_s = time.perf_counter() - began
                    after = settled_rss_kib(broker.pid)
                    per_connection.append((after - before) / args.connections)
                    cpu_before = cpu_seconds(broker.pid)
                    time.sleep(2.0)
                    idle_cpu.append((cpu_seconds(broker.pid) - cpu_before) / 2.0)
                    print(
                        f"round {round_ + 1}: {args.connections} idle connections opened in {opened_s:.1f} s; "
                        f"broker RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB "
                        f"({per_connection[-1]:.1f} KiB per connection); idle broker CPU {idle_cpu[-1] * 100:.1f}%",
                        flush=True,
                    )
                cpu_before = cpu_seconds(broker.pid)
                latencies = produce_latencies(producer, "connections", args.seconds, args.rate, payload)
                cpu[phase].append((cpu_seconds(broker.pid) - cpu_before) / len(latencies))
                phases[phase].extend(latencies)
                round_p99[phase].append(percentile(latencies, 0.99))
                print(
                    f"round {round_ + 1} {phase:>7}: {len(latencies)} messages, p50 "
                    f"{percentile(latencies, 0.5) * 1000:.2f} ms, p99 {percentile(latencies, 0.99) * 1000:.2f} ms, "
                    f"broker CPU {cpu[phase][-1] * 1e6:.0f} us/message",
                    flush=True,
                )
                if phase == "with":
                    answered = idle.ping(sample=100)
                    idle.close()
                    print(f"round {round_ + 1}: {answered} of 100 sampled idle connections still answered", flush=True)
                wait_idle(broker.pid)  # closing thousands of connections is work too: not the next phase's
        producer.flush(10)
        del producer  # before the broker goes: librdkafka would log its reconnects
    finally:
        idle.close()
        broker.terminate()
        broker.wait(timeout=30)
        shutil.rmtree(data_dir, ignore_errors=True)

    without, with_ = phases["without"], phases["with"]
    p50 = (percentile(without, 0.5), percentile(with_, 0.5))
    p99 = (percentile(without, 0.99), percentile(with_, 0.99))
    print(
        f"\n{args.connections} idle connections, {args.rounds} rounds, {args.rate:.0f} msg/s x {args.size} B, "
        f"acks=1, confluent-kafka, linger.ms=0"
    )
    print(
        f"RSS growth per idle connection: {per_connection[0]:.2f} KiB "
        f"(the first round; later rounds, reusing what closed connections freed: "
        f"{', '.join(f'{v:.2f}' for v in per_connection[1:]) or '-'})"
    )
    print(f"broker CPU while they idle: {statistics.median(idle_cpu) * 100:.1f}% of a core")
    print(
        f"produce latency without: p50 {p50[0] * 1000:.2f} ms, p99 {p99[0] * 1000:.2f} ms;"
        f" with: p50 {p50[1] * 1000:.2f} ms, p99 {p99[1] * 1000:.2f} ms"
    )
    print(f"ratio with/without: p50 {p50[1] / p50[0]:.2f}, p99 {p99[1] / p99[0]:.2f}")
    ratios = [w / wo for w, wo in zip(round_p99["with"], round_p99["without"])]
    print(f"p99 ratio of each round (with / the without just before it): {', '.join(f'{r:.2f}' for r in ratios)}")
    print(
        f"broker CPU per message without {statistics.median(cpu['without']) * 1e6:.0f} us, "
        f"with {statistics.median(cpu['with']) * 1e6:.0f} us"
    )
    figures = {
        "RSS per idle connection (first round)": (per_connection[0], "KiB"),
        "broker CPU while they idle": (statistics.median(idle_cpu) * 100, "% of a core"),
        "produce p99 without": (p99[0] * 1000, "ms"),
        "produce p99 with": (p99[1] * 1000, "ms"),
        "p99 with / without": (p99[1] / p99[0], "ratio"),
    }
    record_if_asked(args, "connections", figures, argv)


if __name__ == "__main__":
    main()
