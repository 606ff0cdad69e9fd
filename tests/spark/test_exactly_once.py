"""The sink's exactly-once delivery: a streaming query killed with kill -9 again and again, and df.write.

The input is written by confluent-kafka's transactional producer, so it holds committed and
aborted transactions and their markers; the query reads it read_committed and writes each record
to the output with ``deliveryGuarantee=exactly-once``. What the user checks is what is asserted:
a read_committed consumer of the output is given each committed input record exactly once.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import alive, children_by_parent
from tests.spark.conftest import (
    consume_all,
    create_topic,
    fetch_path_read,
    latest_offsets,
    produce,
    strom_reader,
    transactional_feed,
)

ROOT = Path(__file__).resolve().parents[2]
MARKER_TOPIC = "__strom_sink_markers"
SEED = int(os.environ.get("STROM_EOS_SEED", "10"))  # the random kill times; another seed, other times
START_TIMEOUT_S = 180
POINT_TIMEOUT_S = 60
FINISH_TIMEOUT_S = 240


# -- killing a Spark application ---------------------------------------------------------------


def _descendants(root: int) -> list[int]:
    children = children_by_parent()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def kill_9(process: subprocess.Popen) -> None:
    """kill -9 of the whole application: the driver, its JVM, pyspark's daemon and Python workers.

    pyspark's daemon leaves the process group, so the tree is walked by parent id; each process
    found is frozen (SIGSTOP) first, so that nothing forks or commits between the walk and the kill.
    """
    if process.returncode is not None:
        return  # reaped already: its pid may be another process's by now
    tree: list[int] = []
    for _ in range(3):
        found = [pid for pid in _descendants(process.pid) if pid not in tree]
        for pid in found:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        tree += found
    for pid in tree:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(30)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in tree):
        assert time.monotonic() < deadline, "processes of the killed query are still alive"
        time.sleep(0.05)


# -- what the test watches -----------------------------------------------------------------------


class Watch:
    """What the test watches: the output topic's offsets, the sink's markers, Spark's checkpoint."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, checkpoint: Path):
        from confluent_kafka.admin import AdminClient

        self.bootstrap, self.topic, self.partitions, self.checkpoint = bootstrap, topic, partitions, checkpoint
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self._marker_readers = None

    def offsets(self) -> tuple[dict[int, int], dict[int, int]]:
        """(LSO, high watermark) of each partition of the output."""
        return tuple(
            latest_offsets(self.bootstrap, self.topic, self.partitions, committed, self.admin)
            for committed in (True, False)
        )

    def markers(self) -> list[int]:
        """Next batch of each Spark partition (the sink groups' committed offsets; -1001 = none)."""
        from confluent_kafka import Consumer, TopicPartition

        if self._marker_readers is None:
            metadata = self.checkpoint / "metadata"
            if not metadata.exists():
                return [-1001] * self.partitions
            query_id = json.loads(metadata.read_text())["id"]
            self._marker_readers = [
                Consumer(
                    {
                        "bootstrap.servers": self.bootstrap,
                        "enable.auto.commit": False,
                        "group.id": f"strom-sink-{query_id}-{p}",
                    }
                )
                for p in range(self.partitions)
            ]
        return [c.committed([TopicPartition(MARKER_TOPIC, 0)], timeout=30)[0].offset for c in self._marker_readers]

    def _ids(self, log: str) -> set[int]:
        try:
            return {int(f) for f in os.listdir(self.checkpoint / log) if f.isdigit()}
        except FileNotFoundError:
            return set()

    def running_batch(self) -> int | None:
        """The batch in Spark's offset log and not (yet) in its commit log."""
        planned = self._ids("offsets")
        return max(planned) if planned and max(planned) not in self._ids("commits") else None

    def tasks_committed(self, markers: list[int]) -> bool:
        """Some task committed the running batch, and Spark has not recorded the batch as done."""
        batch = self.running_batch()
        return batch is not None and batch + 1 in markers

    def committed_end(self) -> dict | None:
        """The source offsets at the end of the last batch in the commit log."""
        done = self._ids("commits")
        if not done:
            return None
        return json.loads((self.checkpoint / "offsets" / str(max(done))).read_text().splitlines()[2])

    def close(self) -> None:
        for consumer in self._marker_readers or []:
            consumer.close()


def wait_until(predicate, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


@pytest.mark.timeout(1200)
def test_exactly_once_sink_survives_kill_9(broker, tmp_path):
    """Kill -9 inside a sink transaction, between the tasks' commits and Spark's batch commit, and
    at a random time once the query writes; each start resumes from the checkpoint. Afterwards a
    read_committed read of the output holds each committed input record exactly once."""
    rng = random.Random(SEED)
    create_topic(broker.bootstrap, "eos-in", 2)
    create_topic(broker.bootstrap, "eos-out", 2)
    # 60,000 committed records, in 4 micro-batches of 20,000 offsets; the sink writes one record
    # per request (eos_query.py), so a batch's transactions stay open for a second or more
    expected = transactional_feed(broker.bootstrap, "eos-in", 2, chunks=6, per_chunk=12_000, other_every=10)
    input_end = {"eos-in": {str(p): o for p, o in latest_offsets(broker.bootstrap, "eos-in", 2, True).items()}}
    checkpoint = tmp_path / "checkpoint"
    watch = Watch(broker.bootstrap, "eos-out", 2, checkpoint)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    processes: list[subprocess.Popen] = []

    def start(run: int) -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"run-{run}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "tests" / "spark" / "eos_query.py"),
                    broker.bootstrap,
                    "eos-in",
                    "eos-out",
                    str(checkpoint),
                    "--max-offsets",
                    "20000",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=ROOT,
                start_new_session=True,
            )
        processes.append(process)
        started = wait_until(lambda: process.poll() is not None or "started" in log.read_text(), START_TIMEOUT_S, 0.1)
        assert started and process.poll() is None, f"the query did not start:\n{log.read_text()[-3000:]}"
        return process, log

    def in_transaction(before) -> bool:
        """A sink transaction holds records and no marker, and began in this run."""
        lso, hw = watch.offsets()
        return any(before[p] <= lso[p] < hw[p] for p in lso)

    def between_commits(before) -> bool:
        markers = watch.markers()
        return markers != before and watch.tasks_committed(markers)

    def random_time(before) -> bool:  # once this run has committed something, a random wait
        if watch.markers() == before:
            return False
        time.sleep(rng.uniform(0.0, 3.0))
        return True

    points = {
        "in a transaction": (in_transaction, lambda: watch.offsets()[1]),
        "between commits": (between_commits, watch.markers),
        "random": (random_time, watch.markers),
    }
    # each kind of kill point once (and again if the moment passed before the kill landed, below);
    # STROM_EOS_ROUNDS=N repeats the round N times for a longer run outside CI
    schedule = ["in a transaction", "between commits", "random"] * int(os.environ.get("STROM_EOS_ROUNDS", "1"))
    kills = []
    began = time.monotonic()
    try:
        while schedule:
            point = schedule.pop(0)
            reached, baseline = points[point]
            before = baseline()
            process, log = start(len(kills))
            hit = wait_until(lambda: reached(before), POINT_TIMEOUT_S)
            kill_9(process)
            lso, hw = watch.offsets()
            markers = watch.markers()
            kills.append(
                {
                    "point": point,
                    "hit": hit,
                    "batch": watch.running_batch(),
                    "markers": markers,
                    "open transaction": lso != hw,
                    "tasks committed": watch.tasks_committed(markers),
                }
            )
            print(f"kill {len(kills)} at {time.monotonic() - began:.0f}s: {kills[-1]}", flush=True)
            key = {"in a transaction": "open transaction", "between commits": "tasks committed"}.get(point)
            if key and not any(k[key] for k in kills) and len(kills) < 8:
                schedule.append(point)  # the moment passed before the kill landed: once more

        # one last run reads to the end of the input
        process, log = start(len(kills))
        assert wait_until(
            lambda: process.poll() is not None or watch.committed_end() == input_end, FINISH_TIMEOUT_S, 0.2
        ), f"the query did not finish:\n{log.read_text()[-3000:]}"
        assert process.poll() is None, log.read_text()[-3000:]
    finally:
        for process in processes:
            kill_9(process)
        watch.close()
    print(f"{len(kills)} kills and a final run in {time.monotonic() - began:.0f}s")

    assert any(k["open transaction"] for k in kills), kills  # killed with a sink transaction open
    assert any(k["tasks committed"] for k in kills), kills  # tasks committed, Spark's batch not
    committed = consume_all(broker.bootstrap, "eos-out", 2, "read_committed")
    counts = collections.Counter(v for _, _, v in committed)
    assert {v: n for v, n in counts.items() if n > 1} == {}, "records written twice"
    assert counts == collections.Counter(expected)
    # the source's own read_committed path agrees, and the killed transactions left aborted records
    end = latest_offsets(broker.bootstrap, "eos-out", 2, read_committed=True)
    assert (
        collections.Counter(
            v for p in range(2) for _, v in fetch_path_read(broker.bootstrap, "eos-out", p, 0, end[p], "read_committed")
        )
        == counts
    )
    assert len(consume_all(broker.bootstrap, "eos-out", 2, "read_uncommitted")) > len(committed)


def test_batch_write_exactly_once_and_foreach_batch_write_id(spark, broker, tmp_path):
    """df.write with exactly-once: one transaction per task; a named write (writeId) runs once; inside
    foreachBatch the (query, writeId, batch) piece is written once however often the write runs."""
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "eos-batch", 2)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(300)], "key string, value string").repartition(3)

    def write(frame, **options):
        writer = (
            frame.write.format("strom")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "eos-batch")
            .option("deliveryGuarantee", "exactly-once")
        )
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save()

    def values():
        return sorted(v for _, _, v in consume_all(broker.bootstrap, "eos-batch", 2, "read_committed"))

    write(df)
    assert values() == sorted(f"v{i}".encode() for i in range(300))
    # the sink groups of a generated write id are deleted after the job; a named write's stay
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    groups = {g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(30).valid}
    assert not any(g.startswith("strom-sink-") for g in groups), groups
    write(df, writeId="nightly-1")
    write(df, writeId="nightly-1")  # a re-run of a named write finds every partition committed
    assert values() == sorted(f"v{i}".encode() for i in range(300) for _ in range(2))

    # foreachBatch: the query id and the micro-batch id come from Spark, writeId names the write
    create_topic(broker.bootstrap, "eos-fb-in", 1)
    produce(broker.bootstrap, "eos-fb-in", [(b"x%d" % i, None, 0, None) for i in range(50)])
    calls = []

    def each(batch_df, batch_id):
        calls.append(batch_id)
        rows = batch_df.selectExpr("CAST(value AS STRING) AS value")
        write(rows, writeId="copy")
        write(rows, writeId="copy")  # the same piece again: found committed, nothing written

    source = strom_reader(spark, broker.bootstrap, streaming=True, subscribe="eos-fb-in", startingOffsets="earliest")
    query = (
        source.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(tmp_path / "fb"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120) and query.exception() is None
    assert calls
    assert len(values()) == 650
