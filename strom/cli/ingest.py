"""``strom ingest --bootstrap-server H:P --topic T --file PATH... [--follow]``: tail log files into a topic.

Like Flume's taildir source: each line of each file (PATH may be a glob) becomes one record,
keyed by ``--key-regex`` (its first group, or the whole match; no match → no key). Files are
tracked by inode, so they survive rotation:

* rename + create (logrotate's default): the renamed file is read to its end (and for a grace
  period after, for writers that have not reopened yet), then the new file from its start;
* copytruncate: a file that shrinks, or whose first bytes change, is read again from offset 0.

The read position of every file (device, inode, offset, and its first bytes to recognise a
reused inode) is kept in the state file (``--state-file``, written atomically), and only after
the broker acknowledged every record up to that position (acks=all, idempotent producer,
flush). Each record carries a header ``ingest.src`` = ``dev:inode:offset`` of its line; after a
crash (even kill -9 between an acknowledgement and the state write) a restart reads the
topic's records produced since the last saved state and skips the lines already there. So a
restart neither loses nor repeats lines. Without ``--follow`` the files are read to their end
and the tool exits; with it, it polls for new lines until SIGINT/SIGTERM, printing throughput.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    command_properties,
    ensure_reachable,
    logging_config,
    watermark_offsets,
)

if TYPE_CHECKING:
    from confluent_kafka import Producer

SRC_HEADER = "ingest.src"
HEAD_BYTES = 64
CHUNK_LINES = 20_000
CHUNK_BYTES = 4 * 1024 * 1024
READ_BYTES = 1024 * 1024
ROTATE_GRACE_S = 3.0
FLUSH_TIMEOUT_S = 60.0
CLIENT_TIMEOUT_S = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", required=True)
    parser.add_argument(
        "--file",
        nargs="+",
        required=True,
        action="extend",
        metavar="PATH",
        help="files to tail (globs allowed; repeatable)",
    )
    parser.add_argument("--follow", action="store_true", help="keep tailing until SIGINT/SIGTERM")
    parser.add_argument("--key-regex", default=None, help="record key: first group (or whole match) of this regex")
    parser.add_argument("--state-file", default=None, help="read positions (default: ./.strom-ingest-<topic>.json)")
    parser.add_argument("--poll-interval", type=float, default=0.2, help="seconds between polls with --follow")
    parser.add_argument("--report-interval", type=float, default=5.0, help="seconds between throughput lines")
    parser.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka producer property (repeatable)",
    )
    add_command_config_argument(parser, "producer and consumer client properties file (--producer.config)")


@dataclass
class Tracked:
    """One file being read, identified by (dev, ino); ``path`` is None once it was rotated away."""

    dev: int
    ino: int
    path: str | None
    handle: BinaryIO
    offset: int = 0  # acknowledged by the broker and saved
    read_pos: int = 0  # read and handed to the producer
    head: bytes = b""  # first bytes, to recognise truncation or a reused inode
    idle_since: float = field(default_factory=time.monotonic)

    @property
    def src(self) -> str:
        return f"{self.dev}:{self.ino}"

    def to_state(self) -> dict:
        return {"dev": self.dev, "ino": self.ino, "path": self.path, "offset": self.offset, "head": self.head.hex()}


class Ingest:
    def __init__(self, args: argparse.Namespace, out=sys.stdout):
        self.args = args
        self.out = out
        self.patterns = [os.path.abspath(p) for p in args.file]  # the state must not depend on cwd
        self.state_path = args.state_file or f".strom-ingest-{args.topic}.json"
        self.key_re = re.compile(args.key_regex.encode()) if args.key_regex else None
        self.files: dict[tuple[int, int], Tracked] = {}
        self.partitions: dict[int, int] = {}  # where the recovery scan starts, per partition
        self.recovered_high: dict[int, int] = {}  # scan ends; become scan starts once `skip` is used up
        self.skip: set[tuple[str, int]] = set()  # (src, line offset) already in the topic
        self.stopping = False
        self.total_lines = 0
        self.total_bytes = 0
        self.producer: Producer | None = None

    # -- state ---------------------------------------------------------------------------

    def load_state(self) -> list[dict]:
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
        except FileNotFoundError:
            return []
        if state.get("topic") != self.args.topic:
            raise SystemExit(f"strom ingest: {self.state_path} is the state of topic {state.get('topic')!r}")
        self.partitions = {int(p): int(o) for p, o in state.get("partitions", {}).items()}
        return state.get("files", [])

    def save_state(self) -> None:
        state = {
            "version": 1,
            "topic": self.args.topic,
            "partitions": {str(p): o for p, o in sorted(self.partitions.items())},
            "files": [f.to_state() for f in self.files.values()],
        }
        tmp = f"{self.state_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.state_path)

    # -- files ---------------------------------------------------------------------------

    def matching_paths(self) -> list[str]:
        paths = []
        for pattern in self.patterns:
            found = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
            paths += [p for p in found if os.path.isfile(p) and p not in paths]
        return paths

    def open_file(self, path: str, offset: int = 0, head: bytes = b"", rotated: bool = False) -> Tracked | None:
        try:
            handle = open(path, "rb")
        except OSError:
            return None
        st = os.fstat(handle.fileno())
        tracked = Tracked(st.st_dev, st.st_ino, None if rotated else path, handle, offset, offset, head)
        self.files[(st.st_dev, st.st_ino)] = tracked
        return tracked

    def restore(self, entries: list[dict]) -> None:
        """Find each saved file again by inode: at its path, among the patterns, or rotated beside it."""
        candidates = self.matching_paths()
        for entry in entries:
            dev, ino, path = entry["dev"], entry["ino"], entry.get("path")
            head = bytes.fromhex(entry.get("head", ""))
            where = ([path] if path else []) + candidates
            for directory in sorted({os.path.dirname(p) or "." for p in where}):
                try:  # a file rotated while we were stopped is usually beside its old name
                    where += [os.path.join(directory, name) for name in sorted(os.listdir(directory))]
                except OSError:
                    pass
            found = None
            for p in where:
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (dev, ino) and _head_matches(p, head):
                    found = p
                    break
            if found is None:
                self.log(
                    f"warning: lost track of {path or f'inode {ino}'} (deleted while stopped?); "
                    f"lines after byte {entry['offset']} may be missing"
                )
                continue
            self.open_file(found, entry["offset"], head, rotated=found not in candidates)

    def scan(self) -> None:
        """Notice new files, rotations (rename + create) and truncations (copytruncate)."""
        seen = set()
        for path in self.matching_paths():
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            seen.add(key)
            tracked = self.files.get(key)
            if tracked is None:
                self.open_file(path)
            elif tracked.path != path:
                tracked.path = path
        for key, tracked in self.files.items():
            if tracked.path is not None and key not in seen:
                tracked.path = None  # renamed away: drain it, then let it go
                tracked.idle_since = time.monotonic()
            elif tracked.path is not None:
                self.check_truncated(tracked)

    def check_truncated(self, tracked: Tracked) -> None:
        size = os.fstat(tracked.handle.fileno()).st_size
        if size < tracked.read_pos or (
            tracked.head and os.pread(tracked.handle.fileno(), len(tracked.head), 0) != tracked.head
        ):
            self.log(f"{tracked.path} was truncated (copytruncate?): reading it again from the start")
            tracked.offset = tracked.read_pos = 0
            tracked.head = b""
            self.skip = {s for s in self.skip if s[0] != tracked.src}

    def read_lines(self, tracked: Tracked, budget_lines: int, budget_bytes: int) -> list[tuple[int, bytes]]:
        """Complete lines from ``read_pos`` (a rotated file's last unterminated line too, once idle)."""
        lines: list[tuple[int, bytes]] = []
        fd = tracked.handle.fileno()
        while len(lines) < budget_lines and budget_bytes > 0:
            data = os.pread(fd, min(READ_BYTES, budget_bytes), tracked.read_pos)
            if not data:
                break
            end = data.rfind(b"\n")
            if end < 0:
                rotated_done = tracked.path is None and time.monotonic() - tracked.idle_since > ROTATE_GRACE_S
                if len(data) < READ_BYTES and not rotated_done:
                    break  # an incomplete last line: wait for its end
                end = len(data) - 1
            position = tracked.read_pos
            block = data[: end + 1]
            terminated = block.endswith(b"\n")
            parts = (block[:-1] if terminated else block).split(b"\n")
            for i, part in enumerate(parts):
                lines.append((position, part[:-1] if part.endswith(b"\r") else part))
                position += len(part) + (1 if terminated or i < len(parts) - 1 else 0)
                if len(lines) >= budget_lines:
                    break
            budget_bytes -= position - tracked.read_pos
            tracked.read_pos = position
        if len(tracked.head) < HEAD_BYTES and tracked.read_pos > len(tracked.head):
            tracked.head = os.pread(fd, min(HEAD_BYTES, tracked.read_pos), 0)
        if lines:
            tracked.idle_since = time.monotonic()
        return lines

    # -- producing -----------------------------------------------------------------------

    def recover(self) -> None:
        """Skip lines a crashed run delivered after its last state write: read them from the topic."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(
            {
                **logging_config(),
                **self.client_properties(),
                "bootstrap.servers": self.args.bootstrap_server,
                "group.id": "strom-ingest-recovery",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            try:
                ensure_reachable(consumer, self.args.bootstrap_server, CLIENT_TIMEOUT_S)
            except ToolError as exc:
                raise SystemExit(f"strom ingest: {exc}") from None
            metadata = consumer.list_topics(self.args.topic, timeout=CLIENT_TIMEOUT_S).topics[self.args.topic]
            if metadata.error is not None:
                raise SystemExit(
                    f"strom ingest: topic {self.args.topic!r}: {metadata.error.str()} "
                    "(create it first, e.g. with `strom topics --create`)"
                )
            ends = {}
            for p in metadata.partitions:
                low, high = watermark_offsets(consumer, TopicPartition(self.args.topic, p), CLIENT_TIMEOUT_S)
                # first run: nothing of ours can be there yet; a partition added since: all of it
                start = max(self.partitions.get(p, high if not self.partitions else low), low)
                self.partitions[p] = start
                if start < high:
                    ends[p] = (start, high)
                    self.recovered_high[p] = high
            if not ends:
                return
            consumer.assign([TopicPartition(self.args.topic, p, s) for p, (s, _) in ends.items()])
            remaining = set(ends)
            deadline = time.monotonic() + CLIENT_TIMEOUT_S
            while remaining and time.monotonic() < deadline:
                for msg in consumer.consume(10_000, 0.5):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            remaining.discard(msg.partition())
                        continue
                    # the stub's headers type also allows the dict produce() takes; a consumed message has pairs
                    for name, value in msg.headers() or ():  # type: ignore[str-unpack]
                        if name == SRC_HEADER and isinstance(value, bytes) and value:
                            dev, ino, offset = value.decode().split(":")
                            self.skip.add((f"{dev}:{ino}", int(offset)))
                    position = msg.offset()
                    assert position is not None  # None only on error events, skipped above
                    if position + 1 >= ends[msg.partition()][1]:
                        remaining.discard(msg.partition())
            if remaining:
                raise SystemExit(
                    f"strom ingest: could not read back partitions {sorted(remaining)} within {CLIENT_TIMEOUT_S:.0f}s"
                )
            if self.skip:
                self.log(
                    f"recovered: {len(self.skip)} line(s) were delivered after the last saved state; "
                    "they will not be sent again"
                )
        finally:
            consumer.close()

    def client_properties(self) -> dict[str, str]:
        """The --command-config file's properties (security.protocol, sasl.*, ssl.* ...)."""
        try:
            return command_properties(self.args.command_config)
        except ToolError as exc:
            raise SystemExit(f"strom ingest: {exc}") from None

    def make_producer(self):
        from confluent_kafka import Producer

        config = {
            "bootstrap.servers": self.args.bootstrap_server,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "message.timeout.ms": int(FLUSH_TIMEOUT_S * 1000),
            **logging_config(),
            **self.client_properties(),
        }
        for item in self.args.producer_property:
            key, _, value = item.partition("=")
            config[key.strip()] = value.strip()
        return Producer(config)

    def send_chunk(self) -> int:
        """Read up to one chunk from every file, produce it, flush, then save the state."""
        chunk: list[tuple[Tracked, int, bytes]] = []
        budget_lines, budget_bytes = CHUNK_LINES, CHUNK_BYTES
        for tracked in list(self.files.values()):
            for position, line in self.read_lines(tracked, budget_lines, budget_bytes):
                chunk.append((tracked, position, line))
                budget_lines -= 1
                budget_bytes -= len(line) + 1
            if budget_lines <= 0 or budget_bytes <= 0:
                break
        failures: list[str] = []
        delivered: list = []  # acknowledged Message objects

        def report(err, msg):
            if err is not None:
                failures.append(str(err))
            else:
                delivered.append(msg)

        topic = self.args.topic
        assert self.producer is not None  # run() makes it before the first chunk
        sent = 0
        for tracked, position, line in chunk:
            if self.skip and (tracked.src, position) in self.skip:
                continue
            key = None
            if self.key_re is not None:
                m = self.key_re.search(line)
                key = (m.group(1) if m.re.groups else m.group(0)) if m else None
            header: list[tuple[str, str | bytes | None]] = [(SRC_HEADER, f"{tracked.src}:{position}".encode())]
            while True:
                try:
                    self.producer.produce(topic, line, key=key, headers=header, on_delivery=report)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            sent += 1
        if sent:
            self.producer.flush(FLUSH_TIMEOUT_S)
        if failures or len(delivered) < sent:
            # what did arrive must not be sent again; everything else is re-read from the saved offsets
            for msg in delivered:
                src, _, position = dict(msg.headers())[SRC_HEADER].decode().rpartition(":")
                self.skip.add((src, int(position)))
            for tracked in self.files.values():
                tracked.read_pos = tracked.offset
            self.log(f"delivery failed ({failures[0] if failures else 'timeout'}); retrying from the saved position")
            time.sleep(1.0)
            return 0
        for msg in delivered:
            partition = msg.partition()
            self.partitions[partition] = max(self.partitions.get(partition, 0), msg.offset() + 1)
        for tracked in self.files.values():
            tracked.offset = tracked.read_pos
        if self.skip:
            self.skip = {s for s in self.skip if s[1] >= self._offset_of(s[0])}
        if not self.skip and self.recovered_high:
            for partition, high in self.recovered_high.items():
                self.partitions[partition] = max(self.partitions.get(partition, 0), high)
            self.recovered_high.clear()
        forgotten = self.forget_finished()
        if chunk or sent or forgotten:
            self.save_state()
        self.total_lines += sent
        self.total_bytes += sum(len(line) + 1 for _, _, line in chunk)
        return len(chunk)

    def _offset_of(self, src: str) -> int:
        for tracked in self.files.values():
            if tracked.src == src:
                return tracked.offset
        return 1 << 62

    def forget_finished(self) -> bool:
        """Close rotated files that were read to their end and stayed idle for the grace period."""
        now = time.monotonic()
        forgotten = False
        for key, tracked in list(self.files.items()):
            if tracked.path is None and now - tracked.idle_since > ROTATE_GRACE_S:
                size = os.fstat(tracked.handle.fileno()).st_size
                if tracked.offset >= size:
                    tracked.handle.close()
                    del self.files[key]
                    forgotten = True
        return forgotten

    def log(self, text: str) -> None:
        print(f"strom ingest: {text}", file=self.out, flush=True)

    def run(self) -> int:
        self.restore(self.load_state())
        self.recover()
        self.producer = self.make_producer()
        started = last_report = time.monotonic()
        last_lines = 0
        while True:
            self.scan()
            n = self.send_chunk()
            now = time.monotonic()
            if now - last_report >= self.args.report_interval:
                rate = (self.total_lines - last_lines) / (now - last_report)
                self.log(f"{self.total_lines:,} lines ({rate:,.0f} lines/s), {len(self.files)} file(s)")
                last_report, last_lines = now, self.total_lines
            if self.stopping:
                break
            if n == 0:
                if not self.args.follow and not any(f.path is None for f in self.files.values()):
                    break
                time.sleep(self.args.poll_interval)
        self.save_state()
        elapsed = max(time.monotonic() - started, 1e-9)
        self.log(
            f"done: {self.total_lines:,} lines, {self.total_bytes / 1e6:,.1f} MB in {elapsed:.1f}s "
            f"({self.total_lines / elapsed:,.0f} lines/s)"
        )
        return 0


def _head_matches(path: str, head: bytes) -> bool:
    if not head:
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(len(head)) == head
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    ingest = Ingest(args)

    def stop(signum, frame):
        ingest.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return ingest.run()
