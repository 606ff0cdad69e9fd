"""``strom ingest``: tailing through rotation (rename + create, copytruncate) and a kill -9."""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

WAIT_S = 60


def topic_size(bootstrap: str, topic: str, partitions: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "size"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        )
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, done = [], set()
    deadline = time.monotonic() + WAIT_S
    while len(done) < partitions and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error() is None:
                values.append(msg.value())
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                done.add(msg.partition())
    consumer.close()
    assert len(done) == partitions, "could not read the topic to its end"
    return values


def wait_until(predicate, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_ingest_survives_rotation_and_kill_9(broker, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("weblog", 2, 1)])["weblog"].result(WAIT_S)
    log, state = tmp_path / "access.log", tmp_path / "ingest.json"
    expected: list[bytes] = []

    def write(path, start, count):
        lines = [f"{i} GET /page/{i % 97} {'x' * (i % 50)}".encode() for i in range(start, start + count)]
        with open(path, "ab") as out:
            out.write(b"".join(line + b"\n" for line in lines))
        expected.extend(lines)
        return start + count

    def start_ingest():
        out = open(tmp_path / "ingest.out", "ab")
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "strom.cli.main",
                "ingest",
                "--bootstrap-server",
                broker.bootstrap,
                "--topic",
                "weblog",
                "--file",
                str(log),
                "--follow",
                "--key-regex",
                r"/page/(\d+)",
                "--state-file",
                str(state),
                "--poll-interval",
                "0.05",
                "--report-interval",
                "1",
            ],
            stdout=out,
            stderr=out,
        )

    def size():
        return topic_size(broker.bootstrap, "weblog", 2)

    ingest = start_ingest()
    try:
        n = write(log, 0, 5_000)
        wait_until(lambda: size() == 5_000, "the first lines")
        # rename + create, as logrotate does by default; lines land in both files meanwhile
        n = write(log, n, 2_000)
        os.rename(log, tmp_path / "access.log.1")
        # kill -9 while it is busy: lines keep arriving until the kill, so it never catches up
        # first (150,000 lines written at once were all ingested before a slow poll saw any)
        stop_writing, writing = threading.Event(), threading.Lock()

        def keep_writing():
            nonlocal n
            while not stop_writing.is_set() and n < 1_000_000:
                with writing:
                    n = write(log, n, 1_000)
                time.sleep(0.005)

        writer = threading.Thread(target=keep_writing, daemon=True)
        writer.start()
        try:
            wait_until(lambda: size() > 10_000, "ingestion under way")
            with writing:  # nothing is written between the kill and the count
                written_at_kill = len(expected)
                ingest.send_signal(signal.SIGKILL)
                ingest.wait(WAIT_S)
        finally:
            stop_writing.set()
            writer.join(WAIT_S)
        killed_at = size()
        assert killed_at < written_at_kill, "the kill came too late to test anything"
        n = write(log, n, 3_000)  # written while the tool is down
    finally:
        if ingest.poll() is None:
            ingest.kill()

    ingest = start_ingest()
    try:
        wait_until(lambda: size() >= len(expected), "catching up after the restart")
        # copytruncate: the file keeps its inode and starts again from empty
        shutil.copy(log, tmp_path / "access.log.2")
        with open(log, "r+b") as handle:
            handle.truncate(0)
        n = write(log, n, 1_000)
        wait_until(lambda: size() >= len(expected), "the lines after the truncation")
        time.sleep(0.5)  # nothing more may arrive
        ingest.send_signal(signal.SIGTERM)
        assert ingest.wait(WAIT_S) == 0
    finally:
        if ingest.poll() is None:
            ingest.kill()

    values = read_topic(broker.bootstrap, "weblog", 2)
    counts = collections.Counter(values)
    repeated = [v for v, c in counts.items() if c > 1]
    assert not repeated, f"{len(repeated)} lines repeated, e.g. {repeated[:3]}"
    assert len(expected) == n > written_at_kill > 10_000  # every line written, once
    assert set(values) == set(expected) and len(values) == len(expected)
    output = (tmp_path / "ingest.out").read_text()
    assert "lines/s" in output
