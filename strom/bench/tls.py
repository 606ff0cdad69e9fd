"""What TLS and SASL cost: produce and consume throughput and broker CPU per message, by listener.

    python -m strom.bench.tls [--messages 500000] [--size 1000] [--record]

Starts one broker with three listeners, PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512), on
127.0.0.1 with a CA and certificate made on the spot (trustme, from the test extra), then for each
listener in turn runs ``strom producer-perf-test`` (acks=1, --throughput -1) and ``strom
consumer-perf-test`` on a topic of its own and reads the broker's CPU time from /proc/PID/stat
around each run. Prints records/s, MB/s and broker CPU microseconds per message, and each figure
as a ratio to PLAINTEXT's measured in the same run; asserts nothing. The clients run on the same
two cores as the broker, so their TLS work is in the wall-clock figures too.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from strom.bench.requests import cpu_seconds
from strom.bench.results import add_record_argument, record_if_asked
from strom.cluster.zookeeper_server import free_port

PRODUCE_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")


def strom(*args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "strom.cli.main", *args], capture_output=True, text=True, timeout=1200
    )
    if result.returncode != 0:
        raise SystemExit(f"strom {args[0]} failed: {result.stderr[-2000:]}")
    return result.stdout


def client_properties(directory: str, name: str, settings: dict[str, str]) -> str:
    path = os.path.join(directory, f"{name}.properties")
    with open(path, "w") as handle:
        handle.writelines(f"{key}={value}\n" for key, value in settings.items())
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=1000)
    add_record_argument(parser)
    args = parser.parse_args(argv)
    import trustme

    directory = tempfile.mkdtemp(prefix="strom-bench-tls-")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(os.path.join(directory, "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(os.path.join(directory, "broker.pem"))
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_SSL")}
    data = os.path.join(directory, "data")
    overrides = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "log.dirs": data,
        "ssl.keystore.location": os.path.join(directory, "broker.pem"),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    command = [sys.executable, "-m", "strom.cli.main", "server-start", "--parent-pid", str(os.getpid())]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    broker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(data, "strom.port")):
            if time.monotonic() > deadline or broker.poll() is not None:
                raise SystemExit("the broker did not start")
            time.sleep(0.05)
        plaintext = f"127.0.0.1:{ports['PLAINTEXT']}"
        strom(
            "configs",
            "--bootstrap-server",
            plaintext,
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "bench",
            "--add-config",
            "SCRAM-SHA-512=[password=bench-secret]",
        )
        tls = {"security.protocol": "SSL", "ssl.ca.location": os.path.join(directory, "ca.pem")}
        settings = {
            "PLAINTEXT": {},
            "SSL": tls,
            "SASL_SSL": {
                **tls,
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            },
        }
        results = {}
        for name, extra in settings.items():  # warm up: connections, topic creation, first segment files
            bootstrap = f"127.0.0.1:{ports[name]}"
            props = client_properties(directory, name, {"bootstrap.servers": bootstrap, **extra})
            strom(
                "producer-perf-test",
                "--topic",
                f"warmup-{name.lower()}",
                "--num-records",
                "20000",
                "--record-size",
                str(args.size),
                "--throughput",
                "-1",
                "--producer.config",
                props,
            )
        for name, extra in settings.items():
            bootstrap = f"127.0.0.1:{ports[name]}"
            props = client_properties(directory, name, {"bootstrap.servers": bootstrap, **extra})
            topic = f"bench-{name.lower()}"
            before = cpu_seconds(broker.pid)
            out = strom(
                "producer-perf-test",
                "--topic",
                topic,
                "--num-records",
                str(args.messages),
                "--record-size",
                str(args.size),
                "--throughput",
                "-1",
                "--producer.config",
                props,
                "--producer-props",
                "acks=1",
                "linger.ms=5",
            )
            produce_cpu = cpu_seconds(broker.pid) - before
            summary = [PRODUCE_LINE.search(line) for line in out.splitlines() if "th" in line and "99.9th" in line]
            last = summary[-1]
            assert last is not None, f"no summary line from producer-perf-test:\n{out}"
            produced = float(last.group(2)), float(last.group(3))
            before = cpu_seconds(broker.pid)
            out = strom(
                "consumer-perf-test",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--messages",
                str(args.messages),
                "--consumer.config",
                props,
                "--hide-header",
                "--timeout",
                "30000",
            )
            consume_cpu = cpu_seconds(broker.pid) - before
            fields = [f.strip() for f in out.strip().splitlines()[-1].split(",")]
            consumed = float(fields[5]), float(fields[3])
            results[name] = (produced, produce_cpu * 1e6 / args.messages, consumed, consume_cpu * 1e6 / args.messages)
    finally:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
    base = results["PLAINTEXT"]
    print(f"{args.messages} messages of {args.size} bytes per listener, one broker, acks=1")
    print(
        f"{'listener':10} {'produce rec/s':>14} {'MB/s':>7} {'CPU us/msg':>10} {'consume rec/s':>14} {'MB/s':>7} "
        f"{'CPU us/msg':>10}"
    )
    for name, ((p_rate, p_mb), p_cpu, (c_rate, c_mb), c_cpu) in results.items():
        print(f"{name:10} {p_rate:14.0f} {p_mb:7.1f} {p_cpu:10.2f} {c_rate:14.0f} {c_mb:7.1f} {c_cpu:10.2f}")
    figures: dict[str, tuple[float, str]] = {}
    for name, ((p_rate, _), p_cpu, (c_rate, _), c_cpu) in results.items():
        figures[f"{name} produce"] = (p_rate, "records/s")
        figures[f"{name} consume"] = (c_rate, "records/s")
        figures[f"{name} produce, broker CPU per message"] = (p_cpu, "µs")
        figures[f"{name} consume, broker CPU per message"] = (c_cpu, "µs")
        if name != "PLAINTEXT":
            figures[f"{name} / PLAINTEXT produce CPU per message"] = (p_cpu / base[1], "ratio")
            print(
                f"{name} / PLAINTEXT: produce {p_rate / base[0][0]:.2f}x throughput, {p_cpu / base[1]:.2f}x broker "
                f"CPU per message; consume {c_rate / base[2][0]:.2f}x throughput, {c_cpu / base[3]:.2f}x broker CPU "
                f"per message"
            )
    record_if_asked(args, "tls", figures, argv)


if __name__ == "__main__":
    main()
