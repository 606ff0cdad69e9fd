"""AlterReplicaLogDirs with kafka-python's admin client, against a broker with two log dirs.

The move is throttled (replica.alter.log.dirs.io.max.bytes.per.second, a dynamic broker config,
as in Kafka) so that it is still under way while the test looks at it, writes to it and kills
the broker; the throttle is then lifted and the move finishes after the restart.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from strom.testing import Broker

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, TopicPartitionReplica  # noqa: E402
from kafka import errors as Errors  # noqa: E402

WAIT_S = 60
RATE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"


def _placement(admin: KafkaAdminClient, topic: str) -> dict[str, tuple[int, bool, int]]:
    """{log dir: (partition size, is future, offset lag)} for partition 0 of ``topic``."""
    found = {}
    for result in admin.describe_log_dirs()[0]["log_dirs"]:
        for entry in result["topics"]:
            if entry["name"] == topic:
                for p in entry["partitions"]:
                    if p["partition_index"] == 0:
                        found[result["log_dir"]] = (p["partition_size"], p["is_future_key"], p["offset_lag"])
    return found


def _wait(what: str, check, timeout: float = WAIT_S):
    """Until ``check`` returns something true; the admin client's errors while it reconnects to a
    restarted broker (NodeNotReadyError, ...) are retried."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            found = check()
        except Errors.KafkaError as exc:
            found, last = None, exc
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout}s (last error: {last})")
        time.sleep(0.2)


def _set_rate(broker: Broker, rate: int | None) -> None:
    entry = ConfigEntry(
        RATE_KEY,
        str(rate) if rate is not None else None,
        incremental_operation=AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE,
    )
    resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[entry])
    for future in broker.admin.incremental_alter_configs([resource]).values():
        future.result(WAIT_S)


def test_a_replica_moves_between_log_dirs_through_writes_and_a_crash(tmp_path):
    d1, d2 = str(tmp_path / "broker" / "data"), str(tmp_path / "logs-b")  # the first is where the test finds the port
    with Broker(tmp_path / "broker", {"log.dirs": f"{d1},{d2}"}) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=WAIT_S * 1000)
        try:
            topic = broker.create_topic("moving")
            source = next(d for d in (d1, d2) if os.path.isdir(os.path.join(d, "moving-0")))
            target = d2 if source == d1 else d1
            assert _placement(admin, topic) == {source: (0, False, 0)}
            values = [f"before-{i}-".encode() * 40 for i in range(4000)]  # about 1.3 MB
            broker.produce(topic, values, partition=0)
            tpr = TopicPartitionReplica(topic, 0, 0)

            # errors, as Kafka answers them
            assert admin.alter_replica_log_dirs({tpr: str(tmp_path / "nowhere")}) == {tpr: Errors.LogDirNotFoundError}
            assert admin.alter_replica_log_dirs({tpr: "logs-b"}) == {tpr: Errors.LogDirNotFoundError}
            missing = TopicPartitionReplica(topic, 7, 0)
            assert admin.alter_replica_log_dirs({missing: target}) == {missing: Errors.ReplicaNotAvailableError}
            assert admin.alter_replica_log_dirs({tpr: source}) == {tpr: Errors.NoError}  # already there

            _set_rate(broker, 100_000)
            assert admin.alter_replica_log_dirs({tpr: target}) == {tpr: Errors.NoError}
            placed = _wait("a future replica", lambda: (p := _placement(admin, topic)).get(target) and p)
            assert placed[source][1] is False and placed[target][1] is True  # is_future_key
            assert placed[target][2] > 0  # the copy's lag
            assert any(name.startswith("moving-0.") and name.endswith("-future") for name in os.listdir(target))
            during = [f"during-{i}".encode() for i in range(300)]
            broker.produce(topic, during, partition=0)  # the partition keeps taking writes

            broker.kill()
            assert os.path.isdir(os.path.join(source, "moving-0"))
            broker.start()
            _set_rate(broker, None)
            _wait("the move to finish", lambda: _placement(admin, topic).keys() == {target})
            assert _placement(admin, topic)[target][1] is False
            assert os.path.isdir(os.path.join(target, "moving-0"))
            assert not any(name.startswith("moving-0") for name in os.listdir(source))
            after = [b"after-%d" % i for i in range(100)]
            broker.produce(topic, after, partition=0)
            got = broker.consume(topic, len(values) + len(during) + len(after), timeout=WAIT_S)
            assert [r.value for r in got] == values + during + after
            assert [r.offset for r in got] == list(range(len(got)))
        finally:
            admin.close()


def test_reassign_partitions_log_dirs_moves_replicas(tmp_path):
    """kafka-reassign-partitions.sh's ``log_dirs``: --execute starts the moves, --verify reports them."""
    d1, d2 = str(tmp_path / "broker" / "data"), str(tmp_path / "logs-b")
    with Broker(tmp_path / "broker", {"log.dirs": f"{d1},{d2}"}) as broker:
        topic = broker.create_topic("planned", partitions=2)
        values = [b"m%d" % i for i in range(200)]
        broker.produce(topic, values)
        dirs = {p: next(d for d in (d1, d2) if os.path.isdir(os.path.join(d, f"planned-{p}"))) for p in (0, 1)}
        targets = {p: d2 if dirs[p] == d1 else d1 for p in (0, 1)}
        plan = tmp_path / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": topic, "partition": p, "replicas": [0], "log_dirs": [targets[p]]} for p in (0, 1)
                    ],
                }
            )
        )

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "strom.cli.main", "reassign-partitions"]
                + ["--bootstrap-server", broker.bootstrap_servers, "--reassignment-json-file", str(plan), *args],
                capture_output=True,
                text=True,
                timeout=WAIT_S,
                check=False,
            )

        executed = cli("--execute")
        assert executed.returncode == 0, executed.stderr
        assert "Successfully started log directory moves for: planned-0-0,planned-1-0" in executed.stdout
        verified = _wait(
            "the moves to complete",
            lambda: (
                "Reassignment of replica planned-1-0 completed successfully." in (out := cli("--verify").stdout)
                and "planned-0-0 completed successfully." in out
                and out
            ),
        )
        assert "Status of replica reassignment:" in verified
        assert all(os.path.isdir(os.path.join(targets[p], f"planned-{p}")) for p in (0, 1))
        assert not any(os.path.isdir(os.path.join(dirs[p], f"planned-{p}")) for p in (0, 1))
        assert sorted(r.value for r in broker.consume(topic, len(values))) == sorted(values)

        plan.write_text(
            json.dumps(
                {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [0], "log_dirs": ["x"]}]}
            )
        )
        refused = cli("--execute")
        assert refused.returncode == 1 and "is not an absolute path" in refused.stderr
