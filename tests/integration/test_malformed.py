"""Hostile and broken input on the wire: the broker drops (or answers) that connection, keeps serving
everyone else, and does not let a few bytes make it allocate without bound."""

from __future__ import annotations

import socket
import struct

import pytest

from strom.protocol import api
from strom.protocol.codec import decode_response, encode_request
from strom.protocol.entities import build
from tests.integration.clients import (
    WAIT_S,
    RawClient,
    assert_same,
    confluent_consume,
    confluent_produce,
    module_broker,  # noqa: F401 - fixture
    rss_kb,
    sample_messages,
    unique_topic,
)

UNSUPPORTED_VERSION = 35
API_VERSIONS = 18


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header_v1(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"bad-client") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def header_v2(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"bad-client") -> bytes:
    return header_v1(api_key, version, correlation_id, client_id) + b"\x00"


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


# Each entry: (what, bytes to send). The broker may close the connection or answer; it must not die,
# hang other clients, or allocate what the bytes claim.
HOSTILE = {
    "http-request": b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",
    "tls-client-hello": bytes.fromhex("16030100a5010000a10303") + bytes(32) + b"\x00" * 40,
    "random-garbage": bytes(range(7, 256, 3)) * 20,
    "huge-frame-length": struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64,
    "negative-frame-length": struct.pack(">i", -1) + b"\x00" * 16,
    "most-negative-frame-length": struct.pack(">i", -(2**31)) + b"\x00" * 16,
    "header-shorter-than-8-bytes": frame(b"\x00\x12\x00"),
    "client-id-longer-than-frame": frame(struct.pack(">hhih", 3, 1, 1, 0x7FFF) + b"abc"),
    # Metadata v1: topics array claims 2**31-1 entries in a 20-byte body.
    "metadata-v1-huge-array": frame(header_v1(3, 1) + struct.pack(">i", 0x7FFFFFFF) + b"\x00\x01a" * 5 + b"\x00"),
    # Metadata v12 (flexible): compact array count 2**31 as a varint.
    "metadata-v12-huge-compact-array": frame(header_v2(3, 12) + uvarint(2**31) + b"\x02a" * 6),
    # Produce v9: one topic, one partition, records claiming ~2 GB.
    "produce-v9-huge-records": frame(
        header_v2(0, 9)
        + b"\x00"
        + struct.pack(">hi", -1, 1000)
        + b"\x02"
        + b"\x02t"
        + b"\x02"
        + struct.pack(">i", 0)
        + uvarint(0x7FFFFFF0)
        + b"\x00" * 30
    ),
    # Produce v3 with a records blob that is not a record batch at all.
    "produce-v3-garbage-records": frame(
        header_v1(0, 3)
        + struct.pack(">hhi", -1, -1, 1000)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">i", 1)
        + struct.pack(">i", 0)
        + struct.pack(">i", 40)
        + b"\xff" * 40
    ),
    # Fetch v4 whose topics array count is negative (not null: Fetch topics are not nullable).
    "fetch-v4-negative-array": frame(
        header_v1(1, 4) + struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + struct.pack(">i", -5)
    ),
}


def send_hostile(bootstrap: str, data: bytes, *, close_after_send: bool = False) -> str:
    """Send `data`; returns 'closed' or 'answered' (or 'open' if the broker waits for more bytes)."""
    with RawClient(bootstrap, timeout=5) as client:
        try:
            client.send_bytes(data)
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        if close_after_send:
            return "sent"
        try:
            client.read_frame(timeout=3)
            return "answered"
        except TimeoutError:
            return "open"
        except Exception:
            return "closed"


def round_trip(bootstrap: str) -> None:
    """A real client still produces and consumes."""
    topic = unique_topic("mal-ok")
    sent = sample_messages(3)
    assert confluent_produce(bootstrap, topic, sent, **{"message.timeout.ms": 10_000}) == [0, 1, 2]
    assert_same(confluent_consume(bootstrap, topic, 3, timeout=10), sent)


def assert_alive(broker) -> None:
    assert broker.process.poll() is None, f"broker exited:\n{broker.read_log()}"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bytes_drop_the_connection_and_the_broker_keeps_serving(module_broker, name):
    outcome = send_hostile(module_broker.bootstrap, HOSTILE[name])
    # A frame the broker cannot even delimit or decode ends that connection (as Kafka does);
    # anything else may be answered. It must never leave the connection hanging.
    assert outcome in ("closed", "answered"), f"{name}: connection left {outcome}"
    assert_alive(module_broker)
    round_trip(module_broker.bootstrap)


def test_truncated_frame_then_close(module_broker):
    for partial in [
        struct.pack(">i", 100) + b"\x00\x03\x00\x01" + b"\x00" * 6,  # body cut short
        b"\x00\x00",  # size prefix cut short
        struct.pack(">i", 50 * 1024 * 1024) + b"\x00" * 1000,
    ]:  # big frame, abandoned
        assert send_hostile(module_broker.bootstrap, partial, close_after_send=True) == "sent"
    assert_alive(module_broker)
    round_trip(module_broker.bootstrap)


def test_hostile_input_keeps_memory_bounded(broker):
    round_trip(broker.bootstrap)  # warm up: topic creation, client connections, caches
    before = rss_kb(broker.process.pid)
    for _ in range(10):
        for data in HOSTILE.values():
            send_hostile(broker.bootstrap, data, close_after_send=True)
        send_hostile(broker.bootstrap, struct.pack(">i", 100) + b"\x00" * 10, close_after_send=True)
    for data in HOSTILE.values():
        send_hostile(broker.bootstrap, data)
    assert_alive(broker)
    round_trip(broker.bootstrap)
    grown_mb = (rss_kb(broker.process.pid) - before) / 1024
    assert grown_mb < 50, f"broker RSS grew by {grown_mb:.1f} MB on a few KB of hostile input"


def test_announced_but_unsent_frames_do_not_reserve_memory(broker):
    """A size prefix is a claim, not bytes: five connections announcing 100 MB frames (14 bytes sent each)
    must not make the broker hold 500 MB while it waits for bytes that never come."""
    round_trip(broker.bootstrap)
    before = rss_kb(broker.process.pid)
    host, port = broker.bootstrap.rsplit(":", 1)
    sockets = []
    try:
        for _ in range(5):
            sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
            sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + header_v1(3, 1))
            sockets.append(sock)
        round_trip(broker.bootstrap)  # the broker has read every prefix by the time it answers this
        grown_mb = (rss_kb(broker.process.pid) - before) / 1024
    finally:
        for sock in sockets:
            sock.close()
    assert_alive(broker)
    assert grown_mb < 50, f"broker RSS grew by {grown_mb:.0f} MB for 5 announced-but-unsent frames (70 bytes)"


# -- unknown api keys and versions: an error code, and the connection stays usable ----------------


def api_versions_v3_ok(client: RawClient) -> None:
    response = client.request(
        API_VERSIONS, 3, {"client_software_name": "strom-tests", "client_software_version": "1.0"}
    )
    assert int(response.error_code) == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[API_VERSIONS][0] == 0 and keys[API_VERSIONS][1] >= 3


def read_correlation_and_body(client: RawClient, header_version: int = 0) -> tuple[int, bytes]:
    data = client.read_frame()
    (correlation_id,) = struct.unpack_from(">i", data, 0)
    return correlation_id, data[4 + (1 if header_version else 0) :]


@pytest.mark.parametrize("version", [0, 5])
def test_unknown_api_key_gets_unsupported_version(module_broker, version):
    with RawClient(module_broker.bootstrap) as client:
        client.send_bytes(frame(header_v1(999, version, correlation_id=4242) + b"\x01\x02\x03"))
        correlation_id, body = read_correlation_and_body(client)
        assert correlation_id == 4242
        assert struct.unpack_from(">h", body, 0)[0] == UNSUPPORTED_VERSION
        api_versions_v3_ok(client)  # same connection, still usable


def test_api_versions_unknown_version_is_answered_at_v0(module_broker):
    with RawClient(module_broker.bootstrap) as client:
        # A future client sends ApiVersions v99 with the newest header it knows (v2) and a body we cannot know.
        body = encode_request(
            build(
                api.request_class(API_VERSIONS, 3),
                {"client_software_name": "future-client", "client_software_version": "99"},
            )
        )
        client.send_bytes(frame(header_v2(API_VERSIONS, 99, correlation_id=99) + body))
        correlation_id, payload = read_correlation_and_body(client, header_version=0)
        assert correlation_id == 99
        response = decode_response(API_VERSIONS, 0, payload)
        assert int(response.error_code) == UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[API_VERSIONS][0] == 0 and ranges[API_VERSIONS][1] >= 3  # so the client can pick a version
        assert 0 in ranges and 1 in ranges and 3 in ranges  # Produce, Fetch, Metadata advertised
        api_versions_v3_ok(client)  # same connection, still usable


def test_every_advertised_version_is_served(module_broker):
    """ApiVersions is truthful: a minimal request at every advertised (api, version) gets a decodable answer."""
    with RawClient(module_broker.bootstrap) as client:
        response = client.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        advertised = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
    assert len(advertised) >= 7, advertised
    failures = []
    for api_key, low, high in advertised:
        for version in range(low, high + 1):
            cls = api.request_class(api_key, version)
            if cls is None:
                failures.append(f"{api_key} v{version}: advertised but no schema exists")
                continue
            values = {
                "acks": -1,
                "timeout": 1000,
                "max_wait": 0,
                "replica_id": -1,
                "session_epoch": -1,
                "transaction_timeout": 1000,
                "client_software_name": "t",
                "client_software_version": "1",
            }
            try:
                with RawClient(module_broker.bootstrap, timeout=5) as client:
                    client.request(api_key, version, build(cls, values))
            except Exception as exc:  # noqa: BLE001 - collect every failure, report them all
                failures.append(f"{api.ApiKey(api_key).name} v{version}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    assert_alive(module_broker)


def test_many_idle_connections_do_not_block_others(module_broker):
    """Connections that send nothing (or half a size prefix) do not stop the broker from serving."""
    sockets = []
    try:
        host, port = module_broker.bootstrap.rsplit(":", 1)
        for i in range(200):
            sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
            if i % 2:
                sock.sendall(b"\x00\x00")
            sockets.append(sock)
        round_trip(module_broker.bootstrap)
    finally:
        for sock in sockets:
            sock.close()
    assert_alive(module_broker)
