"""Storage recovery over arbitrary bytes: in process (coverage-guided) and on a real broker process.

``StorageTarget`` (``python -m strom.fuzz storage``) takes the fuzzer's bytes as the files of a
log dir: a container of ``[file id u8][length u16][bytes]`` entries, one per file of FILES. It
opens them with LogManager.startup(), as a broker start does, then appends a batch to every log
and reads it back. A LogDirError is a refusal (it must say what is wrong); anything else
escaping is a crash; a log that cannot take an append and serve it back is damage recovery
missed.

``campaign_main`` (``python -m strom.fuzz storage-campaign --runs N --seed S``) works on a real
broker process: it fills a data dir through a client, stops the broker cleanly or kills it,
corrupts files at random (truncation, flipped bytes, garbage, zeroes, deletion) and starts the
broker again. The broker must either serve (an acknowledged new record is read back by a
consumer that checks CRCs), or exit with a one-line reason; never a traceback, never a hang.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from strom.fuzz.targets import Finding, unexpected
from strom.protocol.errors import KafkaError

PARTITION = "fuzz-0"
SECOND_BASE = 50
# file id -> path relative to the log dir
FILES = [
    f"{PARTITION}/00000000000000000000.log",
    f"{PARTITION}/00000000000000000000.index",
    f"{PARTITION}/00000000000000000000.timeindex",
    f"{PARTITION}/00000000000000000000.txnindex",
    f"{PARTITION}/{SECOND_BASE:020d}.log",
    f"{PARTITION}/{SECOND_BASE:020d}.index",
    f"{PARTITION}/{SECOND_BASE:020d}.timeindex",
    f"{PARTITION}/leader-epoch-checkpoint",
    f"{PARTITION}/{SECOND_BASE:020d}.snapshot",
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "meta.properties",
    ".kafka_cleanshutdown",
    f"{PARTITION}/{SECOND_BASE:020d}.txnindex",
]
_ENTRY = struct.Struct(">BH")


def pack_files(files: dict[int, bytes]) -> bytes:
    return b"".join(_ENTRY.pack(i, len(data)) + data for i, data in sorted(files.items()))


def unpack_files(data: bytes) -> dict[int, bytes]:
    files: dict[int, bytes] = {}
    position = 0
    while len(data) - position >= _ENTRY.size:
        index, length = _ENTRY.unpack_from(data, position)
        position += _ENTRY.size
        files[index % len(FILES)] = data[position : position + length]
        position += length
    return files


class StorageTarget:
    def __init__(self, root: str | None = None):
        self.root = root
        self.dir: str | None = None
        self.counts = {"opened": 0, "refused": 0}

    def setup(self) -> None:
        logging.getLogger("strom").setLevel(logging.CRITICAL)  # recovery warns about every damaged byte
        self.dir = tempfile.mkdtemp(prefix="strom-fuzz-storage-", dir=self.root)

    def teardown(self) -> None:
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def check(self, data: bytes) -> None:
        from strom.storage.log_config import LogConfig
        from strom.storage.log_dir_error import LogDirError
        from strom.storage.log_manager import LogManager

        if self.dir is None:
            self.setup()
        assert self.dir is not None  # setup() made it
        log_dir = os.path.join(self.dir, "data")
        shutil.rmtree(log_dir, ignore_errors=True)
        os.makedirs(os.path.join(log_dir, PARTITION))
        for index, content in unpack_files(data).items():
            with open(os.path.join(log_dir, FILES[index]), "wb") as handle:
                handle.write(content)
        config = LogConfig().with_overrides({"segment.bytes": "4096", "index.interval.bytes": "128"})
        manager = LogManager([log_dir], config, broker_id=0)
        try:
            manager.startup()
        except LogDirError as exc:
            self.counts["refused"] += 1
            if not str(exc):
                raise Finding("a refused log dir must say why") from None
            _close(manager)
            return
        except Exception as exc:
            _close(manager)
            raise unexpected("LogManager.startup", exc) from None
        self.counts["opened"] += 1
        try:
            for (topic, partition), log_ in manager.logs.items():
                check_log_serves(log_)
            manager.shutdown()
        except Finding:
            _close(manager)
            raise
        except Exception as exc:
            _close(manager)
            raise unexpected("using a recovered log", exc) from None


def _close(manager) -> None:
    for log_ in manager.logs.values():
        try:
            log_.close()
        except Exception:  # noqa: BLE001 - best effort: the finding is already being raised
            pass


def check_log_serves(log_) -> None:
    """A recovered log takes an append at its end and serves it back, CRC intact."""
    from strom.protocol.records import NewRecord, build_batch, validate_batches

    if not log_.log_start_offset <= log_.high_watermark <= log_.log_end_offset:
        raise Finding(
            f"offsets out of order after recovery: start {log_.log_start_offset}, "
            f"HW {log_.high_watermark}, end {log_.log_end_offset}"
        )
    end = log_.log_end_offset
    try:
        info = log_.append_as_leader(build_batch([NewRecord(b"after recovery", key=b"k")]), leader_epoch=0)
    except KafkaError as exc:
        raise unexpected("append to a recovered log", exc) from None
    if info.first_offset != end:
        raise Finding(f"append after recovery got offset {info.first_offset}, log end was {end}")
    log_.high_watermark = log_.log_end_offset
    read = log_.read(info.first_offset, 1 << 20)
    data = b"".join(s.read() for s in read.slices)
    try:
        headers = validate_batches(data, from_producer=False)
    except KafkaError as exc:
        raise unexpected("the record appended after recovery does not read back", exc) from None
    if headers[0].base_offset != info.first_offset:
        raise Finding(f"read at {info.first_offset} returned a batch at {headers[0].base_offset}")


def write_seeds(directory: Path) -> int:
    """Seeds: the files of real logs (clean and crashed, with idempotent and transactional
    batches, two segments), written by strom itself."""
    from strom.protocol.records import NewRecord, build_batch
    from strom.storage.log_config import LogConfig
    from strom.storage.log_manager import LogManager

    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for variant in range(4):
        with tempfile.TemporaryDirectory(prefix="strom-seed-") as tmp:
            log_dir = os.path.join(tmp, "data")
            config = LogConfig().with_overrides(
                {"segment.bytes": "1200" if variant % 2 else "4096", "index.interval.bytes": "128"}
            )
            manager = LogManager([log_dir], config, broker_id=0)
            manager.startup()
            log_ = manager.get_or_create_log(("fuzz", 0))
            txn_sequence = sequence = 0
            for i in range(12):
                if variant >= 2 and i % 4 == 3:
                    batch = build_batch(
                        [NewRecord(b"t%d" % i)],
                        producer_id=7,
                        producer_epoch=0,
                        base_sequence=txn_sequence,
                        transactional=True,
                    )
                    txn_sequence += 1
                    log_.append_as_leader(batch, leader_epoch=1)
                    log_.append_marker(7, 0, commit=i % 8 == 3, coordinator_epoch=0, leader_epoch=1)
                else:
                    batch = build_batch(
                        [NewRecord(b"value %d" % i * 3, key=b"k%d" % (i % 3)) for _ in range(3)],
                        producer_id=3,
                        producer_epoch=0,
                        base_sequence=sequence,
                        compression=i % 5,
                    )
                    sequence += 3
                    log_.append_as_leader(batch, leader_epoch=i // 4)
            log_.high_watermark = log_.log_end_offset
            if variant % 2:
                manager.shutdown()
            else:
                manager.checkpoint_all()
                for each in manager.logs.values():
                    each.close_crashlike()
            files = {}
            # the seed container names fixed files; map the first two segments onto them
            partition_dir = Path(log_dir) / PARTITION
            bases = sorted(int(p.name[:20]) for p in partition_dir.glob("*.log"))
            mapping = {}
            if bases:
                mapping.update(
                    {
                        f"{bases[0]:020d}{s}": f"00000000000000000000{s}"
                        for s in (".log", ".index", ".timeindex", ".txnindex")
                    }
                )
            if len(bases) > 1:
                mapping.update(
                    {
                        f"{bases[1]:020d}{s}": f"{SECOND_BASE:020d}{s}"
                        for s in (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
                    }
                )
            for index, name in enumerate(FILES):
                source = Path(log_dir) / name
                if name.startswith(PARTITION + "/"):
                    short = name.split("/", 1)[1]
                    original = next((k for k, v in mapping.items() if v == short), short)
                    source = partition_dir / original
                if source.exists():
                    files[index] = source.read_bytes()[:2048]
            blob = pack_files(files)
            (directory / f"strom-log-variant{variant}").write_bytes(blob)
            written += 1
    return written


# -- the process campaign ------------------------------------------------------------------------------

CORRUPTIONS = ("truncate", "flip", "garbage", "zero", "delete", "empty", "append")
TOPIC = "fuzz"
STOP_S = 15.0


@dataclass
class RunResult:
    run: int
    seed: int
    shutdown: str
    damage: list[str]
    outcome: str  # "served", "refused" (with its reason) or a finding
    detail: str = ""


def _client_produce(bootstrap: str, count: int, start: int = 0) -> int:
    from confluent_kafka import Producer

    acked = []
    # small batches: the template gets many batches, several segments and index entries to damage
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.num.messages": 8,
            "message.timeout.ms": 15000,
        }
    )
    for i in range(start, start + count):
        producer.produce(
            TOPIC,
            value=b"value-%d-" % i + b"x" * (i % 200),
            key=b"key-%d" % (i % 7),
            partition=i % 2,
            on_delivery=lambda err, msg: acked.append(err is None),
        )
        if i % 50 == 0:
            producer.poll(0)
    producer.flush(20)
    return sum(acked)


def _client_read(bootstrap: str, starts: dict[int, int], expect: bytes) -> tuple[int, bool, str | None]:
    """Read partitions from the given offsets to their ends with CRC checks (as a careful
    consumer does); returns (records read, ``expect`` seen, the first consumer error)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka import KafkaError as ClientError

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "fuzz-reader",
            "check.crcs": True,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, o) for p, o in starts.items()])
    seen, found = 0, False
    eof: set[int] = set()
    error: str | None = None
    deadline = time.monotonic() + 20
    try:
        while len(eof) < len(starts) and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            failure = msg.error()
            if failure:
                if failure.code() == ClientError._PARTITION_EOF:
                    partition = msg.partition()
                    assert partition is not None  # an end-of-partition event names its partition
                    eof.add(partition)
                    continue
                error = str(failure)
                break
            seen += 1
            found = found or msg.value() == expect
        if len(eof) < len(starts) and error is None:
            error = f"consumer did not reach the end of {sorted(set(starts) - eof)} within 20s"
    finally:
        consumer.close()
    return seen, found, error


def _read_in_subprocess(bootstrap: str, starts: dict[int, int], expect: bytes) -> tuple[int, bool, str | None]:
    """``_client_read`` in a child process: a client that aborts on damaged bytes (librdkafka
    2.x asserts on a zeroed batch header) must not take the campaign down with it."""
    code = (
        "import json, sys; from strom.fuzz.storage import _client_read; "
        "a = json.loads(sys.argv[1]); "
        "print(json.dumps(_client_read(a[0], {int(k): v for k, v in a[1].items()}, a[2].encode('latin-1'))))"
    )
    argument = json.dumps([bootstrap, starts, expect.decode("latin-1")])
    try:
        proc = subprocess.run([sys.executable, "-c", code, argument], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 0, False, "the consumer did not finish within 60s"
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.splitlines() if not line.startswith("%")][-3:]
        return 0, False, f"the consumer process died ({proc.returncode}): {' | '.join(tail)}"
    seen, found, error = json.loads(proc.stdout.strip().splitlines()[-1])
    return seen, found, error


def unscanned(damage: list[str], template: Path) -> bool:
    """Whether some damage lies in .log bytes a start does not verify (as in Kafka): a segment
    before the last one of its partition, or, in the last, bytes before its last index entry
    (after a clean shutdown only the tail past that entry is checked; after a crash, the segments
    from the recovery point on, which in these templates is the last one)."""
    for item in damage:
        _kind, where = item.split(" ", 1)
        name, _, position = where.rpartition("@")
        if not name.endswith(".log"):
            continue
        path = template / name
        newest = max(path.parent.glob("*.log"))
        if path != newest:
            return True
        index = path.with_suffix(".index").read_bytes()
        if len(index) >= 8 and int(position) < struct.unpack_from(">I", index, len(index) - 4)[0]:
            return True
    return False


def make_template(root: Path, clean: bool) -> Path:
    """A data dir with records in two partitions, several segments, indexes and checkpoints."""
    from strom.testing.nodes import ProcessNode

    data = root / ("template-clean" if clean else "template-crash")
    shutil.rmtree(data, ignore_errors=True)
    node = ProcessNode(
        0,
        data,
        {
            "log.segment.bytes": "16384",
            "log.index.interval.bytes": "512",
            "num.partitions": "2",
            "log.flush.offset.checkpoint.interval.ms": "200",
        },
    )
    node.start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.port}"})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(20)
        acked = _client_produce(f"127.0.0.1:{node.port}", 600)
        if acked != 600:
            raise RuntimeError(f"template: only {acked} of 600 records acknowledged")
        time.sleep(0.5)  # checkpoints are written every 200 ms
    finally:
        if clean:
            node.stop(STOP_S)
        else:
            node.kill()
    return data


def corrupt(data_dir: Path, rng: random.Random, count: int) -> list[str]:
    """Damage ``count`` files of the data dir's logs, checkpoints and meta.properties."""
    candidates = sorted(p for p in data_dir.rglob("*") if p.is_file() and _corruptible(p))
    damage = []
    for path in rng.sample(candidates, min(count, len(candidates))):
        kind = rng.choice(CORRUPTIONS)
        content = path.read_bytes()
        size = len(content)
        position = rng.randrange(size + 1) if size else 0
        if kind == "truncate":
            content = content[:position]
        elif kind == "flip":
            flipped = bytearray(content)
            for _ in range(rng.randint(1, 8)):
                if flipped:
                    flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            content = bytes(flipped)
        elif kind == "garbage":
            length = rng.randint(1, 200)
            content = content[:position] + rng.randbytes(length) + content[position + length :]
        elif kind == "zero":
            length = rng.randint(1, 4096)
            content = content[:position] + bytes(min(length, size - position)) + content[position + length :]
        elif kind == "append":
            content = content + rng.randbytes(rng.randint(1, 300))
        if kind == "delete":
            path.unlink()
        else:
            path.write_bytes(b"" if kind == "empty" else content)
        damage.append(f"{kind} {path.relative_to(data_dir)}@{position}")
    return damage


def _corruptible(path: Path) -> bool:
    name = path.name
    return (
        name.endswith((".log", ".index", ".timeindex", ".snapshot", ".txnindex"))
        or "checkpoint" in name
        or name == "meta.properties"
    )


def run_one(root: Path, templates: dict[bool, Path], run: int, seed: int) -> RunResult:
    from strom.testing.nodes import ProcessNode

    rng = random.Random(seed)
    clean = rng.random() < 0.5
    data = root / f"run-{run}"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(templates[clean], data)
    (data / "strom.port").unlink(missing_ok=True)
    damage = corrupt(data, rng, rng.randint(1, 3))
    result = RunResult(run, seed, "clean" if clean else "kill -9", damage, "")
    node = ProcessNode(0, data, {"log.segment.bytes": "16384", "log.index.interval.bytes": "512"})
    node.spawn()
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                if node.poll_ready():
                    break
            except RuntimeError:
                log_text = node.log_tail(20000)
                if "Traceback" in log_text:
                    result.outcome, result.detail = "FINDING: traceback at startup", log_text[-3000:]
                else:
                    reason = log_text.strip().splitlines()[-1] if log_text.strip() else "(no output)"
                    result.outcome, result.detail = "refused", reason
                return result
            if time.monotonic() > deadline:
                result.outcome, result.detail = "FINDING: broker did not start within 30s", node.log_tail()
                return result
            time.sleep(0.02)
        bootstrap = f"127.0.0.1:{node.port}"
        marker = b"after-corruption-%d" % run
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 15000})
        acked = []
        producer.produce(
            TOPIC,
            value=marker,
            partition=rng.randrange(2),
            on_delivery=lambda err, msg: acked.append((err, msg.partition(), msg.offset())),
        )
        producer.flush(20)
        if not acked or acked[0][0] is not None:
            result.outcome, result.detail = "FINDING: produce after recovery failed", str(acked)
            return result
        _, partition, offset = acked[0]
        assert partition is not None and offset is not None  # an acknowledged record has both
        # The acknowledged record is readable at the offset it was acknowledged with...
        _, found, error = _read_in_subprocess(bootstrap, {partition: offset}, marker)
        if error is not None or not found:
            result.outcome = "FINDING: the acknowledged record is not readable"
            result.detail = f"partition {partition} offset {offset}: {error or 'not found'}"
            return result
        # ...and everything before it reads back, except where bytes were damaged that no start
        # verifies (see ``unscanned``): neither strom nor Kafka rescans those on every start (it
        # would read the whole log each time). They are served as they are, and a consumer's CRC
        # check reports them (or, for some damage, librdkafka aborts).
        seen, _, error = _read_in_subprocess(bootstrap, {0: -2, 1: -2}, marker)
        log_text = node.log_tail(200000)
        if "Traceback" in log_text:
            result.outcome, result.detail = "FINDING: traceback in the broker log", log_text[-3000:]
        elif error is not None and not unscanned(damage, templates[clean]):
            result.outcome, result.detail = "FINDING: consumer error", error
        elif error is not None:
            result.outcome, result.detail = "served", f"damage where no start looks reaches the consumer: {error}"
        else:
            result.outcome, result.detail = "served", f"{seen} records readable"
        return result
    except Exception as exc:  # noqa: BLE001 - the campaign reports, it does not stop
        result.outcome = "FINDING: harness error"
        result.detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return result
    finally:
        node.stop(STOP_S)
        if result.outcome in ("served", "refused"):
            shutil.rmtree(data, ignore_errors=True)


def run_campaign(root: Path, runs: int, seed: int, report=print) -> list[RunResult]:
    root.mkdir(parents=True, exist_ok=True)
    templates = {True: make_template(root, True), False: make_template(root, False)}
    results = []
    for run in range(runs):
        result = run_one(root, templates, run, seed * 100_003 + run)
        results.append(result)
        report(
            f"run {run} seed {result.seed} [{result.shutdown}] {'; '.join(result.damage)} -> "
            f"{result.outcome}: {result.detail.splitlines()[-1] if result.detail else ''}"
        )
    return results


def campaign_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m strom.fuzz storage-campaign")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--dir",
        default="/tmp/strom-fuzz/storage-campaign",
        help="templates and the data dirs of failing runs are kept here",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    results = run_campaign(Path(args.dir), args.runs, args.seed, report=lambda line: print(line, flush=True))
    findings = [r for r in results if r.outcome.startswith("FINDING")]
    served = sum(r.outcome == "served" for r in results)
    refused = sum(r.outcome == "refused" for r in results)
    print(
        f"storage-campaign: {len(results)} runs in {time.monotonic() - started:.0f}s: {served} served, "
        f"{refused} refused with a message, {len(findings)} findings"
    )
    for r in findings:
        print(
            f"  replay: python -m strom.fuzz storage-campaign --runs {r.run + 1} --seed {args.seed}  (run {r.run})"
            f"\n  {r.outcome}\n  {r.detail[-2000:]}"
        )
    return 1 if findings else 0
