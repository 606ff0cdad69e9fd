"""``python -m strom.chaos.iceberg``: an Iceberg topic written through faults, its tables checked.

    python -m strom.chaos.iceberg --seed N --seconds S --mode key_value|value_schema_id_prefix [--runs R]
                                  [--no-settle] [--faults kill,move,restart,kill-coordinator]
                                  [--security plaintext|sasl_ssl]

Each run starts a real ZooKeeper and three brokers sharing one Iceberg SQL catalog (a SQLite file)
and warehouse, creates a 3-partition topic with RF=3 and min.insync.replicas=2 in the given
``iceberg.mode``, and runs two producers at the same time (strom.chaos.iceberg_workload): an
idempotent acks=all one and a transactional one that aborts every fourth transaction. While
they write, a fault schedule drawn from the seed runs, each kind at least once and in an order
the seed decides:

- ``kill``: kill -9 of the current leader of a partition, started again after a hold;
- ``move``: the partition's replicas reordered so that another in-sync replica comes first
  (AlterPartitionReassignments, through kafka-python's admin) and a preferred leader election
  (confluent-kafka's ``elect_leaders``): the leadership moves while the old leader lives on;
- ``restart``: a clean restart (SIGTERM, controlled shutdown, start) of the partition's leader.

Each fault waits until every broker is up with full ISRs; with ``--no-settle`` it does not.
``kill-coordinator`` (kill -9 of the transactional producer's coordinator, started again after a
hold) and ``pause`` (SIGSTOP of a partition's leader past its ZooKeeper session, then SIGCONT: it
wakes as a stale leader, maybe mid-translation) run only when named in ``--faults``.

With ``--security sasl_ssl`` the brokers' one listener is SASL_SSL (PLAIN) and carries
replication too: a CA and a broker certificate for 127.0.0.1 are made in the run's directory
(``strom.cli.secure_cluster.prepare``, as ``strom cluster start --secure`` makes them), the brokers
log in to each other as ``broker`` and every client of the run (producers, the faults' admin
calls) as ``admin``, both with passwords made for the run.

Then the producers stop, the tables are given time to catch up (bounded), and both are read with
pyiceberg's scan and checked against what the producers were told: each (partition, offset)
once, every acknowledged or committed record with its key, value (or typed columns), timestamp
and headers, no aborted record, no row nobody produced; in the schema mode each bad record in
``<topic>~dlq`` once with its reason. ``run`` returns the verdict and asserts nothing;
tests/cluster/test_iceberg_chaos.py decides what to make of it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strom.chaos.iceberg_workload import (
    TRANSACTIONAL_ID,
    Values,
    Verdict,
    Writers,
    check,
    read_tables,
    register_versions,
)
from strom.chaos.workload import client_logger, close_client_logger
from strom.iceberg.table import CatalogSettings
from strom.testing.cluster import LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS
from strom.testing.nodes import START_TIMEOUT_S, ProcessNode, wait_ready

TOPIC = "iceberg-chaos"
PARTITIONS = 3
MODES = ("key_value", "value_schema_id_prefix")
FAULTS = ("kill", "move", "restart")
# only when named (--faults): the default schedules, the tests' among them, stay as they are
EXTRA_FAULTS = (
    "kill-coordinator",  # kill -9 of the transactional producer's coordinator
    "pause",  # SIGSTOP of a partition's leader past its ZooKeeper session, then SIGCONT: a stale leader wakes
)
PAUSE_S = (SESSION_TIMEOUT_MS / 1000 + 1, SESSION_TIMEOUT_MS / 1000 + 4)
SETTLE_S = 60.0  # bound on each wait for the cluster to settle
CATCH_UP_S = 120.0  # bound on the wait for the tables to hold every committed record
ROUNDS_AFTER_S = 2.0  # after the tables caught up: a few more translation rounds, nothing more may arrive


@dataclass
class Fault:
    kind: str
    partition: int
    at_s: float
    hold_s: float = 0.0

    def describe(self) -> str:
        hold = f" for {self.hold_s:.1f}s" if self.hold_s else ""
        if self.kind == "kill-coordinator":
            return f"{self.at_s:5.1f}s kill the transaction coordinator{hold}"
        return f"{self.at_s:5.1f}s {self.kind} the leader of partition {self.partition}{hold}"


def schedule(seed: int, seconds: float, kinds: tuple[str, ...] = FAULTS) -> list[Fault]:
    """The faults of one run: every kind once first (in an order the seed picks), then any."""
    rng = random.Random(seed)
    first = list(kinds)
    rng.shuffle(first)
    faults: list[Fault] = []
    at = rng.uniform(2, 4)
    while at < seconds - 3 or first:
        kind = first.pop(0) if first else rng.choice(kinds)
        hold = round(rng.uniform(1, 4), 1) if kind.startswith("kill") else 0.0
        if kind == "pause":  # drawn only for it: the other kinds' schedules stay as they were
            hold = round(rng.uniform(*PAUSE_S), 1)
        faults.append(Fault(kind, rng.randrange(PARTITIONS), round(at, 1), hold))
        at += hold + rng.uniform(3, 6)
    return faults


@dataclass
class Outcome:
    seed: int
    mode: str
    verdict: Verdict
    faults: list[str] = field(default_factory=list)  # what each fault did
    caught_up_s: float | None = None  # from the producers' stop to the tables holding every record

    def summary(self) -> str:
        waited = "never" if self.caught_up_s is None else f"{self.caught_up_s:.1f}s"
        return f"seed {self.seed} {self.mode}: {self.verdict.summary()}; tables caught up in {waited}"


class IcebergCluster:
    """ZooKeeper and three broker processes (ids 1-3) on one listener, with Iceberg enabled and
    one shared SQL catalog; the partition states are read from ZooKeeper itself."""

    def __init__(self, root: Path, listener: str, overrides: dict[str, str], client: dict[str, str]):
        from strom.cluster.zookeeper_server import free_port

        self.root = root
        self.client = client
        self.catalog = CatalogSettings(f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}")
        self.overrides = {
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "min.insync.replicas": "2",
            "unclean.leader.election.enable": "false",
            "auto.create.topics.enable": "false",
            "iceberg.enabled": "true",
            "iceberg.target.lag.ms": "500",
            "iceberg.catalog.uri": self.catalog.uri,
            "iceberg.warehouse": str(root / "warehouse"),
            **overrides,
        }
        self.listener = listener
        self._port = free_port
        self.nodes: dict[int, ProcessNode] = {}
        self._zookeeper: Any = None
        self.zk: Any = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{node.port}" for node in self.nodes.values())

    def start(self) -> IcebergCluster:
        from kazoo.client import KazooClient

        from strom.cluster import zookeeper_server

        (self.root / "zookeeper").mkdir(parents=True, exist_ok=True)
        self._zookeeper, port = zookeeper_server.start(str(self.root / "zookeeper"), timeout_s=START_TIMEOUT_S)
        for broker_id in (1, 2, 3):
            self.nodes[broker_id] = ProcessNode(
                broker_id,
                self.root / f"broker-{broker_id}",
                {
                    **self.overrides,
                    "zookeeper.connect": f"127.0.0.1:{port}",
                    "listeners": f"{self.listener}://127.0.0.1:{self._port()}",
                },
            )
        for node in self.nodes.values():
            node.spawn()
        wait_ready(list(self.nodes.values()), START_TIMEOUT_S * 2)
        self.zk = KazooClient(hosts=f"127.0.0.1:{port}", timeout=10)
        self.zk.start(timeout=30)
        return self

    def stop(self) -> None:
        from strom.cluster import zookeeper_server

        for node in self.nodes.values():
            node.kill()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()
        if self._zookeeper is not None:
            zookeeper_server.stop(self._zookeeper)

    def state(self, partition: int, topic: str = TOPIC) -> tuple[int, list[int]]:
        """(leader, ISR) of a partition as ZooKeeper holds it; (-1, []) before it exists."""
        from strom.cluster import model

        path = model.partition_state_path(topic, partition)
        if not self.zk.exists(path):
            return -1, []
        state = model.PartitionState.from_json(self.zk.get(path)[0])
        return state.leader, list(state.isr)

    def replicas(self, partition: int, topic: str = TOPIC) -> list[int]:
        return self.assignment(topic)[partition]

    def assignment(self, topic: str) -> dict[int, list[int]]:
        from strom.cluster import model

        return model.TopicAssignment.from_json(topic, self.zk.get(model.topic_path(topic))[0]).partitions

    def wait(self, condition: Callable[[], Any], what: str, timeout_s: float = SETTLE_S) -> Any:
        deadline = time.monotonic() + timeout_s
        while not (found := condition()):
            if time.monotonic() >= deadline:
                raise RuntimeError(f"timed out after {timeout_s:.0f}s waiting for {what}")
            time.sleep(0.1)
        return found

    def settled(self) -> bool:
        """Every broker up and every partition led with all three replicas in sync."""
        if not all(node.alive for node in self.nodes.values()):
            return False
        return all(len(self.state(p)[1]) == 3 and self.state(p)[0] in self.nodes for p in range(PARTITIONS))

    def start_broker(self, broker_id: int) -> None:
        """Start a killed or stopped broker (a killed one's old session must expire first, as in Kafka)."""
        self.nodes[broker_id].start(START_TIMEOUT_S + SESSION_TIMEOUT_MS / 1000)

    def admin(self):
        from confluent_kafka.admin import AdminClient

        from strom.chaos.workload import client_logging

        return AdminClient({"bootstrap.servers": self.bootstrap, **client_logging(None), **self.client})


def _kafka_python_security(client: dict[str, str]) -> dict[str, Any]:
    """kafka-python's names for the librdkafka security settings the run's clients use."""
    names = {
        "security.protocol": "security_protocol",
        "sasl.mechanism": "sasl_mechanism",
        "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password",
        "ssl.ca.location": "ssl_cafile",
    }
    found: dict[str, Any] = {names[k]: v for k, v in client.items() if k in names}
    if "ssl_cafile" in found:
        found["ssl_check_hostname"] = client.get("ssl.endpoint.identification.algorithm", "https") != "none"
    return found


def move_leader(cluster: IcebergCluster, partition: int) -> str:
    """Reorder the replicas so that an in-sync follower is preferred, then elect it."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    leader, isr = cluster.wait(lambda: (s := cluster.state(partition))[0] in cluster.nodes and s, "a leader")
    replicas = cluster.replicas(partition)
    if replicas[0] != leader and replicas[0] in isr:  # an earlier fault moved it: the election alone moves it back
        return f"leader of partition {partition} moved {leader} -> {replicas[0]}: {_elect(cluster, partition)}"
    candidates = [b for b in isr if b != leader]
    if not candidates:
        return f"move skipped: partition {partition}'s ISR is {isr}"
    target = candidates[0]
    order = [target, *[b for b in replicas if b != target]]
    reassigner = KafkaAdminClient(
        bootstrap_servers=cluster.bootstrap.split(","),
        request_timeout_ms=30000,
        **_kafka_python_security(cluster.client),
    )
    try:
        errors = reassigner.alter_partition_reassignments({TopicPartition(TOPIC, partition): order}, timeout_ms=30000)
    finally:
        reassigner.close()
    if any(error is not None for error in errors.values()):
        return f"move of partition {partition} refused: {errors}"
    cluster.wait(lambda: cluster.replicas(partition) == order, f"replicas {order} in ZooKeeper")
    after_reassignment = cluster.state(partition)[0]
    # ELECTION_NOT_NEEDED when the reassignment itself made the new first replica lead (strom's
    # controller does when the preferred replica changes: strom.cluster.reassignment)
    election = _elect(cluster, partition)
    return (
        f"leader of partition {partition} moved {leader} -> {target}: replicas {order}, leader {after_reassignment} "
        f"after the reassignment, {election}"
    )


def _elect(cluster: IcebergCluster, partition: int) -> str:
    """A preferred leader election of the partition, waited for (bounded): what it answered."""
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as ConfluentPartition

    admin = cluster.admin()  # kept while its future is awaited
    answer = admin.elect_leaders(ElectionType.PREFERRED, [ConfluentPartition(TOPIC, partition)]).result(30)
    preferred = cluster.replicas(partition)[0]
    cluster.wait(lambda: cluster.state(partition)[0] == preferred, f"broker {preferred} leading partition {partition}")
    return "preferred election: " + ("; ".join(_error_name(e) for e in answer.values() if e is not None) or "elected")


def _error_name(error: Any) -> str:
    """A KafkaError's name; a KafkaException carries one."""
    error = error.args[0] if isinstance(error, Exception) and error.args else error
    return error.name() if hasattr(error, "name") else str(error)


def inject(cluster: IcebergCluster, fault: Fault) -> str:
    """Run one fault to its end; what it did."""
    if fault.kind == "move":
        return move_leader(cluster, fault.partition)
    topic, partition = TOPIC, fault.partition
    if fault.kind == "kill-coordinator":  # the leader of the producer's __transaction_state partition
        from strom.group.records import partition_for_group

        topic = "__transaction_state"
        partition = partition_for_group(TRANSACTIONAL_ID, len(cluster.assignment(topic)))
    leader = cluster.wait(lambda: (lead := cluster.state(partition, topic)[0]) in cluster.nodes and lead, "a leader")
    node = cluster.nodes[leader]
    if fault.kind == "pause":
        assert node.process is not None
        os.kill(node.process.pid, signal.SIGSTOP)
        try:
            time.sleep(fault.hold_s)
        finally:
            os.kill(node.process.pid, signal.SIGCONT)
        return f"paused broker {leader} (SIGSTOP) for {fault.hold_s:.1f}s, past its {SESSION_TIMEOUT_MS} ms session"
    if fault.kind.startswith("kill"):
        node.kill()
        time.sleep(fault.hold_s)
        began = time.monotonic()
        cluster.start_broker(leader)
        return f"killed broker {leader} (kill -9), started again in {time.monotonic() - began:.1f}s"
    began = time.monotonic()
    node.stop()
    cluster.start_broker(leader)
    return f"restarted broker {leader} cleanly in {time.monotonic() - began:.1f}s"


def run(
    root: Path,
    seed: int,
    seconds: float,
    mode: str,
    listener: str = "PLAINTEXT",
    broker_overrides: dict[str, str] | None = None,
    client: dict[str, str] | None = None,
    catch_up_s: float = CATCH_UP_S,
    log: Callable[[str], None] = print,
    settle: bool = True,
    kinds: tuple[str, ...] = FAULTS,
) -> Outcome:
    """One run (see the module's docstring); ``listener`` is the brokers' one listener, with what
    it needs in ``broker_overrides`` and what every client needs in ``client``. With ``settle``
    false a fault does not wait for the last one's ISRs to fill again: a leader may be killed
    while its partition has only one follower in sync, or none (unclean election stays off)."""
    from confluent_kafka.admin import NewTopic

    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (modes: {', '.join(MODES)})")
    client = dict(client or {})
    overrides = dict(broker_overrides or {})
    if mode != "key_value":
        overrides.setdefault("schema.registry.listeners", "http://127.0.0.1:0")
    root.mkdir(parents=True, exist_ok=True)
    cluster = IcebergCluster(root, listener, overrides, client).start()
    loggers = (client_logger(root, "idempotent"), client_logger(root, "transactional"))
    writers: Writers | None = None
    try:
        topic = NewTopic(TOPIC, PARTITIONS, 3, config={"iceberg.mode": mode, "min.insync.replicas": "2"})
        admin = cluster.admin()  # kept while its future is awaited: a dropped client cancels it
        admin.create_topics([topic])[TOPIC].result(SETTLE_S)
        cluster.wait(cluster.settled, "the topic led with full ISRs")
        ids = None
        if mode != "key_value":
            url = (cluster.nodes[1].data_dir / "strom.schema-registry").read_text().strip()
            ids = register_versions(url, TOPIC)
        writers = Writers(cluster.bootstrap, TOPIC, Values(mode, ids), client, loggers).start()
        faults = schedule(seed, seconds, kinds)
        outcome_faults = []
        began = time.monotonic()
        for fault in faults:
            time.sleep(max(0.0, fault.at_s - (time.monotonic() - began)))
            # each fault hits a healthy cluster: a leader with two followers in sync to fail over to
            if settle:
                cluster.wait(cluster.settled, "every broker up and full ISRs before the next fault")
            done = inject(cluster, fault)
            outcome_faults.append(f"{fault.describe()}: {done}")
            log(f"  {outcome_faults[-1]}")
        time.sleep(max(0.0, seconds - (time.monotonic() - began)))
        cluster.wait(cluster.settled, "every broker back and full ISRs", SETTLE_S * 2)
        ledger = writers.stop()
        writers = None
        stopped = time.monotonic()
        caught_up = _catch_up(cluster, ledger, mode, catch_up_s)
        caught_up_s = None if caught_up is None else caught_up - stopped
        time.sleep(ROUNDS_AFTER_S)
        verdict = check(ledger, read_tables(cluster.catalog, TOPIC, mode))
        (root / "verdict.json").write_text(json.dumps({"summary": verdict.summary(), "details": verdict.details()}))
        return Outcome(seed, mode, verdict, outcome_faults, caught_up_s)
    finally:
        if writers is not None:
            writers._stop.set()
        cluster.stop()
        for logger in loggers:
            close_client_logger(logger)


SECURITY = ("plaintext", "sasl_ssl")
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def sasl_ssl(directory: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(broker overrides, client settings) for brokers whose one listener is SASL_SSL with PLAIN,
    replication included, with a CA and certificate made in ``directory``/secrets."""
    from strom.cli.secure_cluster import ADMIN_USER, BROKER_USER, prepare

    made = prepare(str(directory), [1])
    broker, admin = made.passwords[BROKER_USER], made.passwords[ADMIN_USER]
    users = f'user_{BROKER_USER}="{broker}" user_{ADMIN_USER}="{admin}"'
    overrides = {
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f'{PLAIN_LOGIN} username="{BROKER_USER}" password="{broker}" {users};'
        ),
        "ssl.keystore.location": made.keystore(1),  # names 127.0.0.1: every broker of the run presents it
        "ssl.truststore.location": made.ca,
    }
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": ADMIN_USER,
        "sasl.password": admin,
        "ssl.ca.location": made.ca,
    }
    return overrides, client


def _catch_up(cluster: IcebergCluster, ledger, mode: str, timeout_s: float) -> float | None:
    """When the tables first held every record they must (bounded); None if they never did."""
    expected = ledger.expected()
    dead = sum(sent.dead for sent in expected.values())
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            rows = read_tables(cluster.catalog, TOPIC, mode)
        except Exception:  # the catalog may be mid-commit by a broker: read again
            rows = []
        if sum(not r.dead for r in rows) >= len(expected) - dead and sum(r.dead for r in rows) >= dead:
            return time.monotonic()
        time.sleep(0.5)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m strom.chaos.iceberg", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run (run i uses seed + i)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the producers write under faults")
    parser.add_argument("--mode", choices=MODES, default="key_value")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"comma-separated subset of {','.join(FAULTS + EXTRA_FAULTS)} (default: {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="do not wait for full ISRs between faults (a leader may be killed while its followers catch up)",
    )
    parser.add_argument(
        "--security",
        choices=SECURITY,
        default="plaintext",
        help="the brokers' one listener: plaintext, or sasl_ssl (PLAIN over TLS, replication included)",
    )
    parser.add_argument("--dir", default=None, help="where runs keep their files (a temporary directory if not given)")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = [k for k in kinds if k not in FAULTS + EXTRA_FAULTS]
    if unknown or not kinds:
        parser.error(f"unknown faults {unknown}; known: {', '.join(FAULTS + EXTRA_FAULTS)}")
    base = Path(args.dir or tempfile.mkdtemp(prefix="strom-iceberg-chaos-"))
    failed = 0
    for i in range(args.runs):
        seed = args.seed + i
        root = base / f"run-{seed}"
        print(
            f"run {i + 1}/{args.runs} seed {seed} mode {args.mode} over {args.security}, {args.seconds:g}s of faults",
            flush=True,
        )
        shutil.rmtree(root, ignore_errors=True)  # an earlier run of this seed kept in --dir: start afresh
        replay = (
            f"python -m strom.chaos.iceberg --seed {seed} --seconds {args.seconds:g} --mode {args.mode}"
            f" --faults {','.join(kinds)}{' --no-settle' if args.no_settle else ''} --security {args.security}"
        )
        try:
            listener, overrides, client = "PLAINTEXT", None, None
            if args.security == "sasl_ssl":
                listener = "SASL_SSL"
                overrides, client = sasl_ssl(root)
            outcome = run(
                root,
                seed,
                args.seconds,
                args.mode,
                listener,
                overrides,
                client,
                log=lambda line: print(line, flush=True),
                settle=not args.no_settle,
                kinds=kinds,
            )
        except Exception as exc:  # a run that could not be checked: counted, and the campaign goes on
            failed += 1
            print(f"  ERROR: the run could not be checked: {type(exc).__name__}: {exc}", flush=True)
            print(f"    kept in {root}; replay: {replay}", flush=True)
            continue
        print(f"  {'ok' if outcome.verdict.ok else 'ANOMALY'}: {outcome.summary()}", flush=True)
        if outcome.verdict.ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            failed += 1
            for line in outcome.verdict.details():
                print(f"    {line}", flush=True)
            print(f"    kept in {root}; replay: {replay}", flush=True)
    print(f"runs {args.runs}, anomalous or unchecked {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
