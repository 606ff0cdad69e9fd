"""``strom reassign-partitions``: Kafka's kafka-reassign-partitions.sh (KIP-455).

    strom reassign-partitions --bootstrap-server H:P --topics-to-move-json-file topics.json \\
          --broker-list 1,2,3,4 --generate
    strom reassign-partitions --bootstrap-server H:P --reassignment-json-file plan.json --execute [--throttle B]
    strom reassign-partitions --bootstrap-server H:P --reassignment-json-file plan.json --verify
    strom reassign-partitions --bootstrap-server H:P --reassignment-json-file plan.json --cancel

The files and the output are Kafka's: ``{"topics": [{"topic": "t"}], "version": 1}`` to generate
from, and ``{"version": 1, "partitions": [{"topic", "partition", "replicas", "log_dirs"}]}`` plans.
A ``log_dirs`` entry other than ``"any"`` (an absolute path on that replica's broker) moves the
replica there with AlterReplicaLogDirs, as Kafka's tool does: --execute starts those moves after the
partition reassignment (retrying while a new replica does not exist yet, until --timeout), and
--verify prints each replica's log dir move under "Status of replica reassignment".
--generate proposes a rack-aware round-robin placement over --broker-list (what Kafka's tool
does with the same inputs, not necessarily the same brokers for each partition). --execute prints
the current assignment to keep for a rollback and starts the moves; with --throttle it first sets
``leader.replication.throttled.rate``/``follower.replication.throttled.rate`` on every broker
involved and the topics' ``*.replication.throttled.replicas`` lists (sources on the leader side,
new replicas on the follower side). --verify prints each partition's state and, once nothing moves,
removes those throttles, as Kafka does (unless --preserve-throttles). --cancel reverts moves in
progress to their original replicas.

confluent-kafka's AdminClient has no Alter/ListPartitionReassignments, so those two requests go
over the project's inter-broker client to the controller named in the metadata (retried on
NOT_CONTROLLER); metadata and configs go through the AdminClient.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from strom.cli.client_props import (
    ToolError,
    add_timeout_argument,
    client_config,
    client_security,
    command_properties,
    ensure_reachable,
    error_text,
    exits_quietly_on_broken_pipe,
)
from strom.protocol.api import ApiKey
from strom.protocol.errors import ErrorCode

ALTER_VERSION = 0
LIST_VERSION = 0
ALTER_LOG_DIRS_VERSION = 1
DESCRIBE_LOG_DIRS_VERSION = 1
BROKER_THROTTLES = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
VERIFY_MESSAGE = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
)
RETRY_BACKOFF_S = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="REQUIRED: the server(s) to use for bootstrapping",
    )
    parser.add_argument("--command-config", metavar="FILE", help="admin client properties file")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--generate", action="store_true", help="propose an assignment over --broker-list")
    actions.add_argument("--execute", action="store_true", help="start the reassignment in the json file")
    actions.add_argument(
        "--verify", action="store_true", help="show the state of the reassignment; remove the throttles once it is done"
    )
    actions.add_argument("--cancel", action="store_true", help="cancel the active reassignments in the json file")
    actions.add_argument("--list", action="store_true", help="list every partition reassignment in progress")
    parser.add_argument(
        "--topics-to-move-json-file", metavar="FILE", help='with --generate: {"topics": [{"topic": "t"}], "version": 1}'
    )
    parser.add_argument("--broker-list", metavar="IDS", help="with --generate: brokers to place replicas on, 1,2,3")
    parser.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help="with --execute, --verify, --cancel: the partition reassignment plan",
    )
    parser.add_argument(
        "--throttle",
        type=int,
        default=-1,
        metavar="B",
        help="with --execute: inter-broker replication throttle in bytes/s",
    )
    parser.add_argument(
        "--preserve-throttles", action="store_true", help="with --verify and --cancel: leave the throttles in place"
    )
    parser.add_argument("--disable-rack-aware", action="store_true", help="with --generate: ignore racks")
    add_timeout_argument(parser, default_ms=30_000)


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    try:
        tool = ReassignTool(args.bootstrap_server, args.timeout / 1000, args.command_config)
        try:
            if args.generate:
                text = tool.generate(args)
            elif args.execute:
                path = _need(args.reassignment_json_file, "--reassignment-json-file")
                text = tool.execute(read_plan(path), args.throttle, read_replica_dirs(path))
            elif args.verify:
                path = _need(args.reassignment_json_file, "--reassignment-json-file")
                text = tool.verify(read_plan(path), args.preserve_throttles, read_replica_dirs(path))
            elif args.cancel:
                text = tool.cancel(
                    read_plan(_need(args.reassignment_json_file, "--reassignment-json-file")), args.preserve_throttles
                )
            else:
                text = tool.list_text()
        finally:
            tool.close()
    except (ToolError, KafkaException) as exc:
        print(error_text(exc), file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def _need(value: str | None, flag: str) -> str:
    if not value:
        raise ToolError(f'Missing required argument "{flag}"')
    return value


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not valid JSON: {exc}") from None


def read_plan(path: str) -> dict[tuple[str, int], list[int]]:
    """A reassignment file: (topic, partition) -> target replicas, in the file's order."""
    value = _read_json(path)
    try:
        entries = value["partitions"]
        plan: dict[tuple[str, int], list[int]] = {}
        for entry in entries:
            key = (str(entry["topic"]), int(entry["partition"]))
            if key in plan:
                raise ToolError(f"Duplicate partition in the reassignment file: {key[0]}-{key[1]}")
            replicas = [int(b) for b in entry["replicas"]]
            if len(set(replicas)) != len(replicas):
                raise ToolError(
                    f"Partition replica lists may not contain duplicate entries: {key[0]}-{key[1]} has {replicas}"
                )
            log_dirs = entry.get("log_dirs")
            if log_dirs is not None and len(log_dirs) != len(replicas):
                raise ToolError(
                    f"Size of replicas list {replicas} is different from size of log dirs list {log_dirs} "
                    f"for partition {key[0]}-{key[1]}"
                )
            plan[key] = replicas
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(f"{path} is not a partition reassignment file: {exc!r}") from None
    if not plan:
        raise ToolError("Partition reassignment list cannot be empty")
    return plan


def read_replica_dirs(path: str) -> dict[tuple[str, int, int], str]:
    """A reassignment file's log dir moves: (topic, partition, broker) -> absolute dir (``any`` left out)."""
    moves = {}
    for entry in _read_json(path)["partitions"]:
        for broker, log_dir in zip(entry["replicas"], entry.get("log_dirs") or (), strict=False):
            if log_dir != "any":
                if not isinstance(log_dir, str) or not log_dir.startswith("/"):
                    raise ToolError(
                        f"log dir {log_dir!r} of {entry['topic']}-{entry['partition']} is not an absolute path"
                    )
                moves[(str(entry["topic"]), int(entry["partition"]), int(broker))] = log_dir
    return moves


def _replica_names(keys) -> str:
    return ",".join(f"{t}-{p}-{b}" for t, p, b in sorted(keys))


def plan_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    """Kafka's formatAsReassignmentJson."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


def _names(keys) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


class ReassignTool:
    """Metadata and configs through confluent-kafka; Alter/ListPartitionReassignments over BrokerClient."""

    def __init__(self, bootstrap: str, timeout_s: float, config_file: str | None = None, admin=None):
        from confluent_kafka.admin import AdminClient

        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.properties = command_properties(config_file)  # librdkafka's keys, from Java's too
        if admin is None:
            admin = AdminClient(client_config(bootstrap, config_file))
            ensure_reachable(admin, bootstrap, timeout_s)
        self.admin = admin
        self._loop = asyncio.new_event_loop()
        self._clients: dict[tuple[str, int], Any] = {}

    def left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._loop.close()

    # -- cluster state ----------------------------------------------------------------------------
    def metadata(self):
        return self.admin.list_topics(timeout=self.left())

    def current(self, topics: set[str] | None = None) -> dict[tuple[str, int], list[int]]:
        """(topic, partition) -> replicas as Metadata shows them (the full set during a move)."""
        found = {}
        for name, topic in self.metadata().topics.items():
            if topics is not None and name not in topics:
                continue
            for index, partition in topic.partitions.items():
                found[(name, index)] = list(partition.replicas)
        return found

    def _client(self, host: str, port: int) -> Any:
        from strom.replication.client import BrokerClient

        client = self._clients.get((host, port))
        if client is None:
            client = self._clients[(host, port)] = BrokerClient(
                host, port, "strom-reassign-partitions", self.left(), security=client_security(self.properties)
            )
        return client

    def _broker_request(self, broker_id: int, api_key: int, version: int, values: dict) -> Any:
        """Send to one broker (log dirs are each broker's own); retried while it cannot be reached."""
        from strom.replication.client import BrokerConnectionError

        while True:
            node = self.metadata().brokers.get(broker_id)
            if node is None:
                raise ToolError(f"Unknown broker id: {broker_id}")
            try:
                return self._loop.run_until_complete(
                    self._client(node.host, node.port).request(api_key, version, values, self.left())
                )
            except BrokerConnectionError as exc:
                if time.monotonic() >= self.deadline:
                    raise ToolError(str(exc)) from None
                time.sleep(RETRY_BACKOFF_S)

    def alter_log_dirs(self, moves: dict[tuple[str, int, int], str]) -> None:
        """AlterReplicaLogDirs to each replica's broker, again while a replica is not there yet
        (REPLICA_NOT_AVAILABLE: a reassignment is still creating it), as Kafka's tool does."""
        pending = dict(moves)
        while True:
            for broker in sorted({b for _, _, b in pending}):
                dirs: dict[str, dict[str, list[int]]] = {}
                for (topic, index, b), log_dir in sorted(pending.items()):
                    if b == broker:
                        dirs.setdefault(log_dir, {}).setdefault(topic, []).append(index)
                response = self._broker_request(
                    broker,
                    ApiKey.ALTER_REPLICA_LOG_DIRS,
                    ALTER_LOG_DIRS_VERSION,
                    {
                        "dirs": [
                            {"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                            for d, topics in dirs.items()
                        ]
                    },
                )
                for result in response.results:
                    for p in result.partitions:
                        key = (result.topic_name, int(p.partition_index), broker)
                        if p.error_code == ErrorCode.NONE:
                            pending.pop(key, None)
                        elif p.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                            raise ToolError(
                                f"Error moving replica {_replica_names([key])} to {pending.get(key)}: "
                                f"{ErrorCode.from_wire(p.error_code).name}"
                            )
            if not pending:
                return
            if time.monotonic() >= self.deadline:
                raise ToolError(
                    f"Timed out waiting for the following replica log dir moves to start: {_replica_names(pending)}"
                )
            time.sleep(RETRY_BACKOFF_S)

    def log_dir_states(self, moves: dict[tuple[str, int, int], str]) -> tuple[list[str], bool]:
        """Kafka's replicaMoveStatesToString lines, and whether every move is complete."""
        where: dict[tuple[str, int, int], tuple[str | None, str | None]] = {}
        for broker in sorted({b for _, _, b in moves}):
            topics: dict[str, list[int]] = {}
            for topic, index, b in sorted(moves):
                if b == broker:
                    topics.setdefault(topic, []).append(index)
            response = self._broker_request(
                broker,
                ApiKey.DESCRIBE_LOG_DIRS,
                DESCRIBE_LOG_DIRS_VERSION,
                {"topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]},
            )
            for result in response.results:
                if result.error_code != ErrorCode.NONE:
                    continue
                for topic in result.topics:
                    for p in topic.partitions:
                        key = (topic.name, int(p.partition_index), broker)
                        current, future = where.get(key, (None, None))
                        if p.is_future_key:
                            future = result.log_dir
                        else:
                            current = result.log_dir
                        where[key] = (current, future)
        lines, done = [], True
        for key in sorted(moves):
            topic, index, broker = key
            target = moves[key]
            if key not in where:
                done = False
                lines.append(f"Partition {topic}-{index} cannot be found in any live log directory on broker {broker}.")
                continue
            current, future = where[key]
            if current is None:
                done = False
                lines.append(
                    f"Partition {topic}-{index} is not found in any live log dir on broker {broker}. "
                    "There is likely an offline log directory on the broker."
                )
            elif future is not None:
                done = False
                lines.append(f"Reassignment of replica {_replica_names([key])} is still in progress.")
            elif current == target:
                lines.append(f"Reassignment of replica {_replica_names([key])} completed successfully.")
            else:
                lines.append(
                    f"Partition {topic}-{index} on broker {broker} is not being moved from log dir {current} to {target}."
                )
        return lines, done

    def _controller_request(self, api_key: int, version: int, values: dict) -> Any:
        """Send to the controller, asking the metadata again while the answer is NOT_CONTROLLER."""
        from strom.replication.client import BrokerConnectionError

        while True:
            metadata = self.metadata()
            node = metadata.brokers.get(metadata.controller_id)
            if node is None:
                if time.monotonic() >= self.deadline:
                    raise ToolError(f"no controller found within {self.timeout_s:g} s")
                time.sleep(RETRY_BACKOFF_S)
                continue
            client = self._client(node.host, node.port)
            try:
                response = self._loop.run_until_complete(client.request(api_key, version, values, self.left()))
            except BrokerConnectionError as exc:
                if time.monotonic() >= self.deadline:
                    raise ToolError(str(exc)) from None
                time.sleep(RETRY_BACKOFF_S)
                continue
            if response.error_code == ErrorCode.NOT_CONTROLLER and time.monotonic() < self.deadline:
                time.sleep(RETRY_BACKOFF_S)
                continue
            if response.error_code != ErrorCode.NONE:
                raise ToolError(f"{ErrorCode.from_wire(response.error_code).name}: {response.error_message}")
            return response

    def alter(self, targets: dict[tuple[str, int], list[int] | None]) -> dict[tuple[str, int], tuple[int, str]]:
        """AlterPartitionReassignments; the per-partition (error code, message)."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, index), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append({"partition_index": index, "replicas": replicas})
        response = self._controller_request(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            ALTER_VERSION,
            {
                "timeout": int(self.left() * 1000),
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        return {
            (t.name, int(p.partition_index)): (int(p.error_code), p.error_message or "")
            for t in response.responses
            for p in t.partitions
        }

    def ongoing(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments: (topic, partition) -> (replicas, adding, removing)."""
        response = self._controller_request(
            ApiKey.LIST_PARTITION_REASSIGNMENTS, LIST_VERSION, {"timeout": int(self.left() * 1000), "topics": None}
        )
        return {
            (t.name, int(p.partition_index)): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in response.topics
            for p in t.partitions
        }

    # -- --generate --------------------------------------------------------------------------------
    def generate(self, args: argparse.Namespace) -> str:
        from strom.cluster.placement import assign_replicas

        spec = _read_json(_need(args.topics_to_move_json_file, "--topics-to-move-json-file"))
        try:
            topics = [str(t["topic"]) for t in spec["topics"]]
        except (KeyError, TypeError) as exc:
            raise ToolError(f"{args.topics_to_move_json_file} is not a topics-to-move file: {exc!r}") from None
        try:
            brokers = [int(b) for b in _need(args.broker_list, "--broker-list").split(",")]
        except ValueError:
            raise ToolError(f"--broker-list must be comma-separated broker ids, got {args.broker_list!r}") from None
        if len(set(brokers)) != len(brokers):
            raise ToolError(f"Duplicate broker ids in --broker-list: {args.broker_list}")
        metadata = self.metadata()
        missing = sorted(set(topics) - set(metadata.topics))
        if missing:
            raise ToolError(f"Topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found")
        current = self.current(set(topics))
        racks: dict[int, str | None] = {b: None for b in brokers}
        if not args.disable_rack_aware:
            from confluent_kafka import KafkaException

            try:
                nodes = self.admin.describe_cluster(request_timeout=self.left()).result(self.left()).nodes
                racks.update({n.id: n.rack for n in nodes if n.id in racks})
            except KafkaException as exc:
                raise ToolError(f"cannot read the brokers' racks: {error_text(exc)}") from None
        proposed: dict[tuple[str, int], list[int]] = {}
        for topic in topics:
            partitions = sorted(p for t, p in current if t == topic)
            factor = len(current[(topic, partitions[0])]) if partitions else 0
            if factor > len(brokers):
                raise ToolError(f"Replication factor: {factor} larger than available brokers: {len(brokers)}.")
            placed = assign_replicas(racks, len(partitions), factor)
            for index in partitions:
                proposed[(topic, index)] = placed[index]
        return (
            f"Current partition replica assignment\n{plan_json(current)}\n\n"
            f"Proposed partition reassignment configuration\n{plan_json(proposed)}\n"
        )

    # -- --execute ---------------------------------------------------------------------------------
    def execute(
        self,
        plan: dict[tuple[str, int], list[int]],
        throttle: int,
        log_dirs: dict[tuple[str, int, int], str] | None = None,
    ) -> str:
        current = self.current({t for t, _ in plan})
        missing = [key for key in plan if key not in current]
        if missing:
            raise ToolError(f"Unable to find partition{'s' if len(missing) > 1 else ''}: {_names(missing)}")
        brokers = set(self.metadata().brokers)
        unknown = sorted({b for replicas in plan.values() for b in replicas} - brokers)
        if unknown:
            raise ToolError(f"Unknown broker id{'s' if len(unknown) > 1 else ''}: {','.join(map(str, unknown))}")
        out = [
            (
                f"Current partition replica assignment\n\n{plan_json({k: current[k] for k in plan})}\n\n"
                "Save this to use as the --reassignment-json-file option during rollback\n"
            )
        ]
        if throttle >= 0:
            out.append(VERIFY_MESSAGE + "\n")
            self.set_throttles(plan, current, throttle)
            out.append(f"The inter-broker throttle limit was set to {throttle} B/s\n")
        results = self.alter(dict(plan))
        failed = {k: r for k, r in results.items() if r[0] != ErrorCode.NONE}
        if failed:
            lines = [
                f"{t}-{p}: {ErrorCode.from_wire(code).name} ({message})"
                for (t, p), (code, message) in sorted(failed.items())
            ]
            raise ToolError("Error reassigning partition(s):\n" + "\n".join(lines))
        out.append(f"Successfully started partition reassignment{'' if len(plan) == 1 else 's'} for {_names(plan)}\n")
        if log_dirs:
            self.alter_log_dirs(log_dirs)
            out.append(
                f"Successfully started log directory move{'' if len(log_dirs) == 1 else 's'} for: "
                f"{_replica_names(log_dirs)}\n"
            )
        return "".join(out)

    def set_throttles(
        self, plan: dict[tuple[str, int], list[int]], current: dict[tuple[str, int], list[int]], throttle: int
    ) -> None:
        """Kafka's modifyReassignmentThrottle: the rates on every broker involved, the replica lists per topic."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        moving = {k: r for k, r in plan.items() if r != current[k]}
        leaders: dict[str, set[str]] = {}
        followers: dict[str, set[str]] = {}
        involved: set[int] = set()
        for (topic, index), target in moving.items():
            existing = current[(topic, index)]
            involved.update(existing, target)
            leaders.setdefault(topic, set()).update(f"{index}:{b}" for b in existing)
            followers.setdefault(topic, set()).update(f"{index}:{b}" for b in target if b not in existing)
        resources = [
            ConfigResource(
                ResourceType.BROKER,
                str(b),
                incremental_configs=[
                    ConfigEntry(key, str(throttle), incremental_operation=AlterConfigOpType.SET)
                    for key in BROKER_THROTTLES[:2]
                ],
            )
            for b in sorted(involved)
        ]
        for topic in sorted(leaders):
            resources.append(
                ConfigResource(
                    ResourceType.TOPIC,
                    topic,
                    incremental_configs=[
                        ConfigEntry(
                            TOPIC_THROTTLES[0],
                            ",".join(sorted(leaders[topic])),
                            incremental_operation=AlterConfigOpType.SET,
                        ),
                        ConfigEntry(
                            TOPIC_THROTTLES[1],
                            ",".join(sorted(followers.get(topic, ()))),
                            incremental_operation=AlterConfigOpType.SET,
                        ),
                    ],
                )
            )
        self._alter_configs(resources)

    def _alter_configs(self, resources) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import ResourceType

        # librdkafka sends a broker's configs to that broker: one broker resource per call
        brokers = [r for r in resources if r.restype == ResourceType.BROKER]
        others = [r for r in resources if r.restype != ResourceType.BROKER]
        futures = {}
        for batch in [[r] for r in brokers] + ([others] if others else []):
            futures.update(self.admin.incremental_alter_configs(batch, request_timeout=self.left()))
        for resource, future in futures.items():
            try:
                future.result(timeout=self.left())
            except KafkaException as exc:
                raise ToolError(f"cannot change the configs of {resource}: {error_text(exc)}") from None

    def clear_throttles(self, topics: set[str]) -> list[str]:
        """Kafka's clearAllThrottles: the rates on every live broker, the lists of the plan's topics."""
        from confluent_kafka.admin import (
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        brokers = sorted(self.metadata().brokers)
        resources = [
            ConfigResource(
                ResourceType.BROKER,
                str(b),
                incremental_configs=[
                    ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in BROKER_THROTTLES
                ],
            )
            for b in brokers
        ]
        resources += [
            ConfigResource(
                ResourceType.TOPIC,
                t,
                incremental_configs=[
                    ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE) for key in TOPIC_THROTTLES
                ],
            )
            for t in sorted(topics)
        ]
        self._alter_configs(resources)
        return [
            (
                f"Clearing broker-level throttles on broker{'s' if len(brokers) != 1 else ''} "
                f"{','.join(map(str, brokers))}\n"
            ),
            (f"Clearing topic-level throttles on topic{'s' if len(topics) != 1 else ''} {','.join(sorted(topics))}\n"),
        ]

    # -- --verify, --cancel, --list ----------------------------------------------------------------
    def verify(
        self,
        plan: dict[tuple[str, int], list[int]],
        preserve_throttles: bool,
        log_dirs: dict[tuple[str, int, int], str] | None = None,
    ) -> str:
        ongoing = self.ongoing()
        current = self.current({t for t, _ in plan})
        out = ["Status of partition reassignment:\n"]
        moving = False
        for key in sorted(plan):
            name = f"{key[0]}-{key[1]}"
            if key in ongoing:
                moving = True
                out.append(f"Reassignment of partition {name} is still in progress.\n")
            elif current.get(key) == plan[key]:
                out.append(f"Reassignment of partition {name} is completed.\n")
            else:
                now = ",".join(map(str, current.get(key, [])))
                out.append(
                    f"There is no active reassignment of partition {name}, but replica set is {now} "
                    f"rather than {','.join(map(str, plan[key]))}.\n"
                )
        if log_dirs:
            lines, done = self.log_dir_states(log_dirs)
            out.append("\nStatus of replica reassignment:\n" + "".join(line + "\n" for line in lines))
            moving = moving or not done
        if not moving and not preserve_throttles:
            out.append("\n")
            out += self.clear_throttles({t for t, _ in plan})
        return "".join(out)

    def cancel(self, plan: dict[tuple[str, int], list[int]], preserve_throttles: bool) -> str:
        ongoing = self.ongoing()
        active = [key for key in plan if key in ongoing]
        out = []
        if active:
            results = self.alter({key: None for key in active})
            failed = {
                k: r for k, r in results.items() if r[0] not in (ErrorCode.NONE, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
            }
            if failed:
                lines = [
                    f"{t}-{p}: {ErrorCode.from_wire(code).name} ({message})"
                    for (t, p), (code, message) in sorted(failed.items())
                ]
                raise ToolError("Error cancelling partition reassignment(s):\n" + "\n".join(lines))
            out.append(
                f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: "
                f"{_names(active)}\n"
            )
        else:
            out.append("None of the specified partition reassignments are active.\n")
        if not preserve_throttles:
            out += self.clear_throttles({t for t, _ in plan})
        return "".join(out)

    def list_text(self) -> str:
        ongoing = self.ongoing()
        if not ongoing:
            return "No partition reassignments found.\n"
        lines = ["Current partition reassignments:\n"]
        for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
            lines.append(
                f"{topic}-{index}: replicas: {','.join(map(str, replicas))}. adding: "
                f"{','.join(map(str, adding))}. removing: {','.join(map(str, removing))}.\n"
            )
        return "".join(lines)
