"""Seed corpora captured from real clients: ``python -m strom.fuzz capture [--out DIR]``.

A broker process is started with its advertised listener pointing at a recording TCP proxy, so
every connection of every client (bootstrap and the ones Metadata sends them to) goes through
the proxy, which keeps what each client sent. The four clients then do what users do: produce
with every codec, idempotent and transactional producers, group consumers with commits,
read_committed reads, admin operations; kcat produces, consumes, joins a group and lists
metadata. Request frames are written to ``requests/`` (shared by the frame, decode and broker
targets), connection streams to ``frame/seeds``, and the record sets of Produce requests to
``records/seeds``. Served API versions no client sent get a zero-valued request built from
kio's schema, so every decoder has a seed; ``storage/seeds`` are logs strom writes itself.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from strom.protocol import api
from strom.protocol.api import ApiKey

WAIT_S = 20.0
PER_KIND = 3  # distinct frames kept per (client, api, version)
_I32 = struct.Struct(">i")


class RecordingProxy:
    """127.0.0.1:<port> → the broker; keeps the bytes each client connection sent."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.label = "setup"
        self.streams: list[tuple[str, bytearray]] = []
        self._lock = threading.Lock()
        self._stop = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.upstream is not None, "set upstream before clients connect"
            try:
                server = socket.create_connection(self.upstream, timeout=WAIT_S)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            stream = bytearray()
            with self._lock:
                self.streams.append((self.label, stream))
                self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, stream), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, None), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, record: bytearray | None) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if record is not None:
                    with self._lock:
                        record += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self.listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()


def split_frames(stream: bytes) -> list[bytes]:
    frames, position = [], 0
    while len(stream) - position >= 4:
        (size,) = _I32.unpack_from(stream, position)
        if size < 0 or len(stream) - position - 4 < size:
            break
        frames.append(stream[position + 4 : position + 4 + size])
        position += 4 + size
    return frames


# -- the clients ------------------------------------------------------------------------------------


def _confluent(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
        [NewTopic("cap-c", 2, 1), NewTopic("cap-compact", 1, 1, config={"cleanup.policy": "compact"})],
        operation_timeout=10,
    ).values():
        future.result(WAIT_S)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 5,
                "enable.idempotence": codec != "none",
            }
        )
        for i in range(20):
            producer.produce(
                "cap-c",
                key=f"k{i % 3}".encode(),
                value=f"value {i} {codec} ".encode() * 5,
                partition=i % 2,
                headers=[("h", b"v")] if i % 2 else None,
            )
        producer.produce("cap-compact", key=b"key", value=b"compacted")
        producer.flush(WAIT_S)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cap-txn"})
    txn.init_transactions(WAIT_S)
    txn.begin_transaction()
    txn.produce("cap-c", value=b"in a transaction", partition=0)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cap-group",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["cap-c"])
    got = 0
    deadline = time.monotonic() + WAIT_S
    while got < 20 and time.monotonic() < deadline:
        if (msg := consumer.poll(0.2)) is not None and not msg.error():
            got += 1
    txn.send_offsets_to_transaction([TopicPartition("cap-c", 0, 1)], consumer.consumer_group_metadata(), WAIT_S)
    txn.commit_transaction(WAIT_S)
    txn.begin_transaction()
    txn.produce("cap-c", value=b"aborted", partition=1)
    txn.abort_transaction(WAIT_S)
    consumer.commit(asynchronous=False)
    consumer.committed([TopicPartition("cap-c", 0)], WAIT_S)
    consumer.close()
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cap-c")
    for future in admin.describe_configs([resource]).values():
        future.result(WAIT_S)
    for future in admin.incremental_alter_configs(
        [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                "cap-c",
                incremental_configs=[
                    ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
                ],
            )
        ]
    ).values():
        future.result(WAIT_S)
    broker = ConfigResource(ConfigResource.Type.BROKER, "0")
    for future in admin.describe_configs([broker]).values():
        future.result(WAIT_S)
    for future in admin.create_partitions([NewPartitions("cap-c", 3)]).values():
        future.result(WAIT_S)
    admin.list_offsets(
        {TopicPartition("cap-c", 0): OffsetSpec.latest(), TopicPartition("cap-c", 1): OffsetSpec.earliest()}
    )[TopicPartition("cap-c", 0)].result(WAIT_S)
    admin.delete_records([TopicPartition("cap-c", 1, 2)])[TopicPartition("cap-c", 1, 2)].result(WAIT_S)
    admin.describe_cluster().result(WAIT_S)
    admin.list_consumer_groups().result(WAIT_S)
    for future in admin.describe_consumer_groups(["cap-group"]).values():
        future.result(WAIT_S)
    admin.describe_topics(_topic_collection(["cap-c"]))
    for call in (
        lambda: admin.delete_consumer_groups(["cap-group"]),
        lambda: admin.delete_topics(["cap-compact"], operation_timeout=10),
    ):
        for future in call().values():
            future.result(WAIT_S)
    time.sleep(0.5)


def _topic_collection(names):
    from confluent_kafka import TopicCollection

    return TopicCollection(names)


def _kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    try:
        from kafka.admin import OffsetSpec
    except ImportError:  # older kafka-python
        OffsetSpec = None

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("cap-kp", 1, 1)])
    for codec in (None, "gzip", "snappy", "lz4", "zstd"):
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5)
        for i in range(10):
            producer.send("cap-kp", key=b"k", value=f"kafka-python {codec} {i}".encode() * 4, headers=[("h", b"1")])
        producer.flush(WAIT_S)
        producer.close()
    consumer = KafkaConsumer(
        "cap-kp",
        bootstrap_servers=bootstrap,
        group_id="cap-kp-group",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        enable_auto_commit=False,
    )
    for _ in consumer:
        pass
    consumer.commit()
    consumer.close()
    # Every admin call kafka-python has that strom serves; a refused one still leaves its request.
    calls = [
        lambda: admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cap-kp")]),
        lambda: admin.list_groups(),
        lambda: admin.describe_groups(["cap-kp-group"]),
        lambda: admin.list_group_offsets("cap-kp-group"),
        lambda: admin.describe_cluster(),
        lambda: admin.describe_log_dirs(),
        lambda: admin.describe_producers([TopicPartition("cap-kp", 0)]),
        lambda: admin.list_transactions(),
        lambda: admin.describe_transactions(["cap-txn"]),
        lambda: admin.list_partition_offsets({TopicPartition("cap-kp", 0): OffsetSpec.LATEST}),
        lambda: admin.delete_records({TopicPartition("cap-kp", 0): 1}),
        lambda: admin.create_partitions({"cap-kp": NewPartitions(2)}),
        lambda: admin.elect_leaders(election_type=0, topic_partitions={"cap-kp": [0]}),
        lambda: admin.delete_group_offsets("cap-kp-group", [TopicPartition("cap-kp", 0)]),
        lambda: admin.delete_groups(["cap-kp-group"]),
        lambda: admin.delete_topics(["cap-kp"]),
    ]
    for call in calls:
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the request was sent; its answer does not matter here
            print(f"capture: kafka-python admin call failed: {type(exc).__name__}: {exc}", flush=True)
    admin.close()


def _aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        for codec in (None, "gzip", "lz4", "zstd"):
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, compression_type=codec, enable_idempotence=codec is not None
            )
            await producer.start()
            try:
                for i in range(10):
                    await producer.send_and_wait("cap-aio", f"aiokafka {codec} {i}".encode(), key=b"a")
            finally:
                await producer.stop()
        txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="cap-aio-txn")
        await txn.start()
        try:
            async with txn.transaction():
                await txn.send_and_wait("cap-aio", b"aiokafka transactional")
        finally:
            await txn.stop()
        consumer = AIOKafkaConsumer(
            "cap-aio",
            bootstrap_servers=bootstrap,
            group_id="cap-aio-group",
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=3000)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(asyncio.wait_for(run(), 60))


def _kcat(bootstrap: str) -> None:
    def kcat(*args: str, stdin: bytes | None = None) -> None:
        subprocess.run(["kcat", "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=WAIT_S)

    kcat("-L")
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        kcat(
            "-P",
            "-t",
            "cap-kcat",
            "-z",
            codec,
            "-K",
            ":",
            stdin=b"".join(f"key{i}:kcat {codec} {i}\n".encode() for i in range(10)),
        )
    kcat("-C", "-t", "cap-kcat", "-e", "-q")
    kcat("-Q", "-t", f"cap-kcat:0:{int(time.time() * 1000) - 60_000}")
    kcat("-G", "cap-kcat-group", "cap-kcat", "-e", "-q", "-X", "auto.offset.reset=earliest")


CLIENTS = {"confluent": _confluent, "kafkapython": _kafka_python, "aiokafka": _aiokafka, "kcat": _kcat}


# -- writing the corpus -----------------------------------------------------------------------------


def write_corpus(streams: list[tuple[str, bytes]], out: Path) -> dict[str, int]:
    from strom.protocol.frame import parse_request_header
    from strom.server.handlers import HANDLERS, produce

    requests, frames_dir, records_dir = out / "requests", out / "frame" / "seeds", out / "records" / "seeds"
    for d in (requests, frames_dir, records_dir):
        d.mkdir(parents=True, exist_ok=True)
    kept: dict[tuple[str, int, int], int] = defaultdict(int)
    seen_kinds: set[tuple[int, int]] = set()
    counts = {"requests": 0, "streams": 0, "record_sets": 0, "synthetic": 0}
    for index, (label, stream) in enumerate(streams):
        frames = split_frames(bytes(stream))
        if not frames:
            continue
        head = b"".join(_I32.pack(len(f)) + f for f in frames[:6])
        if len(head) <= 8192:
            _write(frames_dir, f"{label}-stream", bytes([index % 256]) + head)
            counts["streams"] += 1
        for frame in frames:
            try:
                header, offset = parse_request_header(frame)
            except ValueError:
                continue
            key = (label, header.api_key, header.api_version)
            seen_kinds.add((header.api_key, header.api_version))
            if kept[key] < PER_KIND:
                kept[key] += 1
                _write(requests, f"{label}-{_api_name(header.api_key)}-v{header.api_version}", frame)
                counts["requests"] += 1
            if header.api_key == ApiKey.PRODUCE and header.api_version >= 3:
                request = produce.decode(frame, offset, header.api_version)
                for _, partitions in request.topic_data:
                    for _, records in partitions:
                        if records is not None and kept[(label, -1, records[21] & 7)] < PER_KIND:
                            kept[(label, -1, records[21] & 7)] += 1
                            for flags in (0x00, 0x03, 0x05):  # as sent; CRC fixed + compact; + time bounds
                                _write(records_dir, f"{label}-codec{records[21] & 7}", bytes([flags]) + bytes(records))
                            counts["record_sets"] += 1
    for spec in HANDLERS.values():
        for version in range(spec.min_version, spec.max_version + 1):
            if (spec.api_key, version) not in seen_kinds:
                synthetic = synthetic_request(spec.api_key, version)
                if synthetic is not None:
                    _write(requests, f"synthetic-{_api_name(spec.api_key)}-v{version}", synthetic)
                    counts["synthetic"] += 1
    return counts


def synthetic_request(api_key: int, version: int) -> bytes | None:
    """A zero-valued request of kio's schema (empty arrays), framed without the size prefix."""
    from strom.protocol.codec import encode
    from strom.protocol.entities import build
    from strom.protocol.frame import request_frame

    cls = api.request_class(api_key, version)
    if cls is None:
        return None
    try:
        body = encode(build(cls, {}))
    except Exception:
        return None
    return request_frame(api_key, version, 7, b"synthetic", body)[4:]


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name.lower()
    except ValueError:
        return f"api{api_key}"


def _write(directory: Path, stem: str, data: bytes) -> None:
    digest = hashlib.sha1(data).hexdigest()[:12]
    (directory / f"{stem}-{digest}").write_bytes(data)


def main(argv: list[str]) -> int:
    from strom.fuzz.corpus import CORPUS
    from strom.testing.nodes import ProcessNode

    parser = argparse.ArgumentParser(prog="python -m strom.fuzz capture")
    parser.add_argument("--out", default=str(CORPUS), help=f"corpus root (default {CORPUS})")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="comma-separated subset of " + ",".join(CLIENTS))
    args = parser.parse_args(argv)
    proxy = RecordingProxy()
    with tempfile.TemporaryDirectory(prefix="strom-capture-") as tmp:
        node = ProcessNode(
            0,
            Path(tmp) / "data",
            {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}", "auto.create.topics.enable": "true"},
        )
        node.start()
        proxy.upstream = ("127.0.0.1", node.port)
        try:
            for name in args.clients.split(","):
                proxy.label = name
                started = time.monotonic()
                CLIENTS[name](f"127.0.0.1:{proxy.port}")
                print(f"capture: {name} done in {time.monotonic() - started:.1f}s", flush=True)
        finally:
            time.sleep(0.3)
            proxy.close()
            node.stop()
    counts = write_corpus([(label, bytes(s)) for label, s in proxy.streams], Path(args.out))
    from strom.fuzz.storage import write_seeds

    counts["storage"] = write_seeds(Path(args.out) / "storage" / "seeds")
    print(f"capture: {len(proxy.streams)} connections; wrote {counts} under {args.out}")
    return 0
