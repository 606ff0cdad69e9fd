"""Vanished group members: the time from a consumer's SIGKILL to the next member's assignment.

    python -m strom.bench.vanished_members [--security PLAINTEXT,SASL_SSL] [--rounds 1] [--record]

A consumer that dies without LeaveGroup is removed when its session times out, and the rest of
its group carries on. This starts a 3-broker cluster with ``strom cluster start`` (``--secure`` for
SASL_SSL, SCRAM-SHA-512), then, for every case below, lets a member B reach a moment of the group
protocol, kills its process with SIGKILL, starts member C in the same group and measures the time
from the kill until C holds every partition of the group's 3-partition topic. The cases run side by
side, each with its own topic and group. Printed next to each: B's session timeout and the bound
the tests hold it to, the session timeout plus the initial rebalance delay plus 1 s.

Cases: the classic protocol with B killed holding the member id of KIP-394's first JoinGroup,
while its JoinGroup is parked in the first rebalance's
initial delay (after member A was assigned and left, as the issue that asked for this found it),
after its JoinGroup was answered but before its SyncGroup (a raw-protocol member, since librdkafka
sends SyncGroup at once), once assigned, and as a static member (``group.instance.id``); and the
KIP-848 consumer protocol, B assigned, dynamic and static.

``python -m strom.bench.vanished_members member KIND BOOTSTRAP GROUP TOPIC [key=value ...]`` is
one member process (KIND ``client``: confluent-kafka, printing ``assigned P,...`` as partitions
come; KIND ``raw``: joins with its own requests and prints ``joined MEMBER_ID``; ``raw-pending``:
stops at the member id its first JoinGroup is given and prints ``pending MEMBER_ID``). It polls until
it is killed and never leaves the group.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from strom.bench.results import add_record_argument, record_if_asked

SESSION_TIMEOUT_MS = 6000
INITIAL_REBALANCE_DELAY_MS = 3000
PARTITIONS = 3
WAIT_S = 60.0
# the broker's side of the consumer protocol (KIP-848): the session times out on the broker
BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": str(INITIAL_REBALANCE_DELAY_MS),
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.min.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
}


def bound_s() -> float:
    """What a vanished member may cost its group: the session timeout, the initial rebalance
    delay (a member killed in the first rebalance), and 1 s for the next member to start."""
    return (SESSION_TIMEOUT_MS + INITIAL_REBALANCE_DELAY_MS) / 1000 + 1.0


@dataclass(frozen=True)
class Case:
    name: str
    protocol: str  # "classic" or "consumer" (KIP-848)
    # "pending": holds a member id from MEMBER_ID_REQUIRED (KIP-394), not yet joined with it;
    # "joining": JoinGroup parked; "joined": JoinGroup answered, no SyncGroup; "assigned"
    killed: str
    static: bool = False


CASES = (
    Case("classic, killed holding a KIP-394 member id", "classic", "pending"),
    Case("classic, killed while its JoinGroup is parked", "classic", "joining"),
    Case("classic, killed after JoinGroup, before SyncGroup", "classic", "joined"),
    Case("classic, killed once assigned", "classic", "assigned"),
    Case("classic static member, killed once assigned", "classic", "assigned", static=True),
    Case("consumer protocol, killed once assigned", "consumer", "assigned"),
    Case("consumer protocol static member, killed once assigned", "consumer", "assigned", static=True),
)


def client_config(case: Case) -> dict[str, str]:
    if case.protocol == "consumer":
        return {"group.protocol": "consumer"}
    return {"session.timeout.ms": str(SESSION_TIMEOUT_MS), "heartbeat.interval.ms": "500"}


# -- one member process -------------------------------------------------------------------------


class MemberProcess:
    """A member in its own process, whose printed lines are kept with the time each arrived."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, config: dict[str, str]):
        args = [f"{k}={v}" for k, v in config.items()]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "strom.bench.vanished_members", "member", kind, bootstrap, group, topic, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[tuple[float, str]] = []
        self._changed = threading.Condition()
        self._ended = False  # its output is closed: it exited
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append((time.monotonic(), line.strip()))
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, found: Callable[[list[str]], bool], what: str, timeout_s: float = WAIT_S) -> float:
        """The time of the first line after which ``found`` holds of the lines so far."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for i in range(len(self.lines)):
                    if found([text for _, text in self.lines[: i + 1]]):
                        return self.lines[i][0]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._ended:
                    ended = f"exited with {self.process.poll()}" if self._ended else f"not within {timeout_s} s"
                    raise TimeoutError(f"no {what}: the member {ended} (lines: {self.lines})")
                self._changed.wait(min(remaining, 0.5))

    def kill(self) -> float:
        self.process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        self.process.wait(10)
        return killed


def holds_all(lines: list[str]) -> bool:
    """Whether the ``assigned`` lines so far add up to every partition (the consumer protocol hands
    partitions over one by one as they are released)."""
    held: set[int] = set()
    for line in lines:
        if line.startswith("assigned"):
            parts = line.split(" ", 1)
            held |= {int(p) for p in parts[1].split(",")} if len(parts) > 1 and parts[1] else set()
    return held == set(range(PARTITIONS))


def run_client_member(bootstrap: str, group: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "log_level": 0,
            **config,
        }
    )

    def on_assign(_consumer, partitions) -> None:
        print(
            "assigned " + ",".join(str(p.partition) for p in sorted(partitions, key=lambda p: p.partition)), flush=True
        )

    consumer.subscribe([topic], on_assign=on_assign)
    while True:
        consumer.poll(0.1)


def subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topic, no user data."""
    name = topic.encode()
    return struct.pack(">hih", 0, 1, len(name)) + name + struct.pack(">i", -1)


async def run_raw_member(bootstrap: str, group: str, topic: str, config: dict[str, str], pending: bool) -> None:
    """FindCoordinator, then JoinGroup v5 (twice: KIP-394's MEMBER_ID_REQUIRED), then nothing;
    ``pending``: only the first JoinGroup, which hands out a member id."""
    from strom.cli.client_props import client_security
    from strom.protocol.api import ApiKey
    from strom.protocol.errors import ErrorCode
    from strom.replication.client import BrokerClient

    security = client_security(config)
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    async with asyncio.timeout(WAIT_S):
        while True:  # FindCoordinator creates __consumer_offsets: asked again until it has a leader
            seed = BrokerClient(host, int(port), "raw-member", WAIT_S, security)
            found = await seed.request(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
            seed.close()
            if found.error_code == ErrorCode.NONE:
                break
            await asyncio.sleep(0.1)
        coordinator = BrokerClient(found.host, found.port, "raw-member", WAIT_S, security)
        request = {
            "group_id": group,
            "session_timeout": SESSION_TIMEOUT_MS,
            "rebalance_timeout": 30000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": subscription(topic)}],
        }
        answer = await coordinator.request(ApiKey.JOIN_GROUP, 5, request)
        if pending and answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            print(f"pending {answer.member_id}", flush=True)
            await asyncio.sleep(3600)
        if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            answer = await coordinator.request(ApiKey.JOIN_GROUP, 5, {**request, "member_id": answer.member_id})
    if answer.error_code != ErrorCode.NONE:
        raise SystemExit(f"JoinGroup failed with error {answer.error_code}")
    print(f"joined {answer.member_id}", flush=True)
    await asyncio.sleep(3600)  # never syncs, never heartbeats: killed by whoever started it


# -- the cases ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    case: Case
    seconds: float  # from B's kill to C holding every partition
    notes: list[str] = field(default_factory=list)


def run_case(bootstrap: str, props: dict[str, str], case: Case) -> Outcome:
    """One case on a running cluster whose client properties (librdkafka's keys) are ``props``."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"vanished-{suffix}", f"vanished-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **props})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
    config = {**props, **client_config(case)}
    if case.killed == "joining":
        # the first step: member A is assigned and leaves, so B starts the group's next
        # first rebalance, and its JoinGroup waits out the initial delay
        first = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0, **config})
        assigned: list = []
        first.subscribe([topic], on_assign=lambda _c, p: assigned.append(p))
        deadline = time.monotonic() + WAIT_S
        while not assigned and time.monotonic() < deadline:
            first.poll(0.1)
        first.close()
        if not assigned:
            raise TimeoutError(f"member A of {group} was not assigned within {WAIT_S} s")
    kind = {"joined": "raw", "pending": "raw-pending"}.get(case.killed, "client")
    instance = {"group.instance.id": f"b-{suffix}"} if case.static else {}
    victim = MemberProcess(kind, bootstrap, group, topic, {**config, **instance})
    next_member = None
    try:
        if case.killed == "joining":
            wait_state(admin, group, "PREPARING_REBALANCING")  # confluent-kafka's name for it
            time.sleep(0.5)  # its JoinGroup is parked: the initial delay is 3 s
        elif case.killed in ("joined", "pending"):
            victim.wait_for(lambda lines: any(line.startswith(case.killed) for line in lines), "JoinGroup answer")
        else:
            victim.wait_for(holds_all, "assignment of every partition")
        killed = victim.kill()
        next_member = MemberProcess("client", bootstrap, group, topic, config)
        assigned_at = next_member.wait_for(holds_all, "assignment of every partition to the next member")
        return Outcome(case, assigned_at - killed)
    finally:
        victim.process.kill()
        if next_member is not None:
            next_member.process.kill()
            next_member.process.wait(10)


def wait_state(admin, group: str, state: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            described = admin.describe_consumer_groups([group])[group].result(10)
            last = described.state.name
            if last == state:
                return
        except Exception as exc:  # the coordinator is still being found
            last = repr(exc)
        time.sleep(0.05)
    raise TimeoutError(f"group {group} not {state} within {timeout_s} s (last: {last})")


def run_cases(bootstrap: str, props: dict[str, str], cases: tuple[Case, ...] = CASES) -> list[Outcome]:
    """Every case at once, each on its own topic and group."""
    with ThreadPoolExecutor(len(cases)) as pool:
        return list(pool.map(lambda case: run_case(bootstrap, props, case), cases))


# -- a cluster ----------------------------------------------------------------------------------


def start_cluster(directory: str, secure: bool, zookeeper: str | None = None) -> tuple[str, dict[str, str]]:
    """``strom cluster start`` with the broker settings above: (bootstrap, librdkafka properties)."""
    from strom.cli.client_props import from_java_keys, load_properties

    args = [sys.executable, "-m", "strom.cli.main", "cluster", "start", "--brokers", "3", "--dir", directory]
    if secure:
        args.append("--secure")
    if zookeeper is not None:
        args += ["--zookeeper", zookeeper]
    for key, value in BROKER_CONFIG.items():
        args += ["--override", f"{key}={value}"]
    started = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if started.returncode != 0:
        raise RuntimeError(f"strom cluster start failed:\n{started.stdout}{started.stderr}")
    found = re.search(r"^Bootstrap servers: (\S+)$", started.stdout, re.M)
    if found is None:
        raise RuntimeError(f"strom cluster start printed no bootstrap servers:\n{started.stdout}")
    props: dict[str, str] = {}
    if secure:
        path = re.search(r"^Client properties \(admin, SASL_SSL\): (\S+)$", started.stdout, re.M)
        if path is None:
            raise RuntimeError(f"strom cluster start --secure printed no client properties:\n{started.stdout}")
        props = from_java_keys(dict(load_properties(path[1])))
        props.pop("bootstrap.servers", None)
    return found[1], props


def stop_cluster(directory: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "cluster", "stop", "--dir", directory],
        capture_output=True,
        timeout=120,
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["member"]:
        kind, bootstrap, group, topic, *extra = argv[1:]
        config = dict(item.split("=", 1) for item in extra)
        if kind in ("raw", "raw-pending"):
            asyncio.run(run_raw_member(bootstrap, group, topic, config, pending=kind == "raw-pending"))
        else:
            run_client_member(bootstrap, group, topic, config)
        return
    parser = argparse.ArgumentParser(prog="python -m strom.bench.vanished_members", description=__doc__.split("\n")[0])
    parser.add_argument("--security", default="PLAINTEXT,SASL_SSL", help="comma-separated: PLAINTEXT, SASL_SSL")
    parser.add_argument("--rounds", type=int, default=1, help="times every case runs (default 1)")
    add_record_argument(parser)
    args = parser.parse_args(argv)
    print(
        f"session timeout {SESSION_TIMEOUT_MS / 1000:.1f} s, initial rebalance delay "
        f"{INITIAL_REBALANCE_DELAY_MS / 1000:.1f} s, bound {bound_s():.1f} s"
    )
    print(f"{'security':<9} {'case':<55} {'kill -> next assigned':>22} {'session timeout':>16}")
    figures: dict[str, tuple[float, str]] = {}
    for security in args.security.split(","):
        root = tempfile.mkdtemp(prefix="strom-bench-vanished-")
        directory = f"{root}/cluster"
        try:
            bootstrap, props = start_cluster(directory, secure=security == "SASL_SSL")
            for _ in range(args.rounds):
                for outcome in run_cases(bootstrap, props):
                    print(
                        f"{security:<9} {outcome.case.name:<55} {outcome.seconds:>20.2f} s "
                        f"{SESSION_TIMEOUT_MS / 1000:>14.1f} s",
                        flush=True,
                    )
                    name = f"{security} {outcome.case.name}"  # the slowest round of each case
                    figures[name] = (max(outcome.seconds, figures.get(name, (0.0, ""))[0]), "s")
        finally:
            stop_cluster(directory)
            shutil.rmtree(root, ignore_errors=True)
    record_if_asked(args, "vanished_members", figures, argv)


if __name__ == "__main__":
    main()
