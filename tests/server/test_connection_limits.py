"""Connection limits (KIPs 306, 402, 612): max.connections, max.connections.per.ip and its
overrides, per-listener limits and connection creation rates, first on their own, then on a real
broker under a flood of 5,000 connection attempts from one address while a producer on another
address carries on."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from strom.bench.connection_flood import FLOOD_ADDRESS, flood
from strom.bench.connections import api_versions_frame, percentile, produce_latencies, rss_kib
from strom.metrics.stats import BrokerStats
from strom.resources import raise_open_files_limit
from strom.server.config import BrokerConfig
from strom.server.connection_limits import ConnectionLimits
from tests.broker_process import BrokerProcess, start_expecting_failure
from tests.metrics.conftest import METRICS_ON, Scrape, metrics_url


def limits(settings: dict[str, str], inter_broker: str | None = None) -> ConnectionLimits:
    config = BrokerConfig.from_mapping(settings)
    return ConnectionLimits(config, inter_broker, config.listener_limit, BrokerStats())


def test_an_address_over_its_limit_is_refused_and_an_override_raises_it():
    found = limits({"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "localhost:3,10.0.0.9:0"})
    assert [found.admit("PLAINTEXT", "10.0.0.1").refused for _ in range(3)] == [None, None, "max.connections.per.ip"]
    assert [found.admit("PLAINTEXT", "127.0.0.1").refused for _ in range(4)] == [
        None,
        None,
        None,
        "max.connections.per.ip",
    ]
    assert found.admit("PLAINTEXT", "10.0.0.9").refused == "max.connections.per.ip"
    found.release("PLAINTEXT", "10.0.0.1")
    assert found.admit("PLAINTEXT", "10.0.0.1").refused is None  # a closed connection frees its place
    assert found.stats.connections_refused == {("PLAINTEXT", "max.connections.per.ip"): 3}


def test_the_broker_wide_limit_spares_the_inter_broker_listener_and_a_listener_has_its_own():
    found = limits(
        {
            "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,OTHER://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,OTHER:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "max.connections": "3",
            "listener.name.other.max.connections": "1",
        },
        inter_broker="INTERNAL",
    )
    assert [found.admit("INTERNAL", f"10.0.0.{i}").refused for i in range(5)] == [None] * 5
    assert found.admit("OTHER", "10.0.1.1").refused is None
    assert found.admit("OTHER", "10.0.1.2").refused == "listener.name.other.max.connections"
    assert [found.admit("CLIENT", f"10.0.2.{i}").refused for i in range(3)] == [None, None, "max.connections"]


def test_a_connection_over_the_creation_rate_waits_kafkas_throttle_time():
    found = limits({"max.connection.creation.rate": "5", "quota.window.num": "2", "quota.window.size.seconds": "1"})
    delays = [found.admit("PLAINTEXT", f"10.0.0.{i}").delay_s for i in range(12)]
    # measured over at least one full window (1 s here): 5 connections fit, the sixth is over
    assert delays[:5] == [0.0] * 5
    assert all(d > 0 for d in delays[5:]) and delays == sorted(delays)
    assert max(delays) <= 2.0  # capped at the window
    assert found.stats.connection_accept_throttle_ms["PLAINTEXT"] > 0


def test_a_malformed_override_stops_startup_naming_the_key(tmp_path):
    result = start_expecting_failure(tmp_path / "data", "max.connections.per.ip.overrides=no-count-here")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "max.connections.per.ip.overrides" in result.stderr and "is not host:count" in result.stderr


def _ask(sock: socket.socket) -> bytes:
    """ApiVersions on ``sock``: the response frame, or b"" if the broker closed it."""
    sock.sendall(api_versions_frame(1))
    data = b""
    try:
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            if not chunk:
                return b""
            data += chunk
    except ConnectionResetError:
        return b""
    return data


@pytest.mark.parametrize("attempts", [5000])
def test_a_flood_from_one_address_gets_its_limit_while_another_address_is_served(tmp_path, attempts):
    soft, _ = raise_open_files_limit()  # the broker inherits it
    assert soft >= attempts + 512, f"open files limit {soft}"
    per_ip = 20
    with BrokerProcess(tmp_path / "data", {"max.connections.per.ip": str(per_ip), **METRICS_ON}) as broker:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0})
        produce_latencies(producer, "steady", 1.0, 200, b"x" * 100)  # topic, metadata, warm-up
        assert broker.process is not None
        rss_before = rss_kib(broker.process.pid)
        alone = produce_latencies(producer, "steady", 2.0, 200, b"x" * 100)
        outcome = []
        flooding = threading.Thread(target=lambda: outcome.append(flood(broker.port, attempts)))
        flooding.start()
        under = produce_latencies(producer, "steady", 2.0, 200, b"x" * 100)
        flooding.join(120)
        assert not flooding.is_alive()
        rss_after = rss_kib(broker.process.pid)
        [result] = outcome
        print(
            f"flood: {result.attempts} attempts in {result.seconds:.1f} s, {result.answered} answered, "
            f"{result.closed} closed; producer p99 alone {percentile(alone, 0.99) * 1000:.2f} ms, "
            f"under the flood {percentile(under, 0.99) * 1000:.2f} ms; broker RSS {rss_before / 1024:.1f} -> "
            f"{rss_after / 1024:.1f} MiB"
        )
        # the flood got exactly its limit, every other attempt was closed, and nothing was lost
        assert (result.answered, result.closed, result.unsettled) == (per_ip, attempts - per_ip, 0)
        assert len(under) == 400 and len(alone) == 400
        assert rss_after - rss_before < 32 * 1024, "the broker's memory grew with the refused connections"
        scrape = Scrape(urllib.request.urlopen(metrics_url(broker.data_dir), timeout=10).read().decode())
        refused = scrape.value(
            "strom_server_connections_refused_total", listener="PLAINTEXT", limit="max.connections.per.ip"
        )
        assert refused == attempts - per_ip
        # a refusal is logged at most once a second, with how many there were
        lines = [line for line in broker.read_log().splitlines() if "refused" in line and "connection(s)" in line]
        assert 1 <= len(lines) <= result.seconds + 2, lines
        # the flood's place is free again once it closed its connections
        deadline = time.monotonic() + 10
        while True:
            with socket.create_connection(("127.0.0.1", broker.port), source_address=(FLOOD_ADDRESS, 0)) as sock:
                if _ask(sock):
                    break
            assert time.monotonic() < deadline, "the flood's address stayed refused after it closed everything"
            time.sleep(0.1)
        producer.flush(10)


def _configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "configs", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_ip_quota_closes_an_address_over_its_connection_rate_and_spares_the_others(tmp_path):
    with BrokerProcess(tmp_path / "data", {"quota.window.num": "2", "quota.window.size.seconds": "1"}) as broker:
        set_rate = _configs(
            broker.bootstrap,
            *("--alter", "--entity-type", "ips", "--entity-name", FLOOD_ADDRESS),
            *("--add-config", "connection_creation_rate=5"),
        )
        assert set_rate.returncode == 0, set_rate.stderr
        assert set_rate.stdout.strip() == f"Completed updating config for ip {FLOOD_ADDRESS}."
        shown = _configs(broker.bootstrap, "--describe", "--entity-type", "ips")
        assert shown.stdout.strip() == f"Quota configs for ip '{FLOOD_ADDRESS}' are connection_creation_rate=5.0"
        result = flood(broker.port, 200)
        # measured over at least one full window of 1 s: about 5 get through, the rest are held
        # unanswered for the throttle time and closed
        assert 1 <= result.answered <= 10 and result.answered + result.closed == 200, result
        for _ in range(20):  # another address is not throttled
            with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
                assert _ask(sock)
        removed = _configs(
            broker.bootstrap,
            *("--alter", "--entity-type", "ips", "--entity-name", FLOOD_ADDRESS),
            *("--delete-config", "connection_creation_rate"),
        )
        assert removed.returncode == 0, removed.stderr
        assert _configs(broker.bootstrap, "--describe", "--entity-type", "ips").stdout.strip() == ""
        assert flood(broker.port, 50).answered == 50
        bad = _configs(
            broker.bootstrap,
            *("--alter", "--entity-type", "ips", "--entity-name", "not-an-ip"),
            *("--add-config", "connection_creation_rate=5"),
        )
        assert bad.returncode == 1 and "not-an-ip is not a valid IP address" in bad.stderr
