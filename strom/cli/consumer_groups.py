"""``strom consumer-groups``: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand).

    strom consumer-groups --bootstrap-server H:P --list [--state [STATES]] [--type [TYPES]]
    strom consumer-groups --bootstrap-server H:P --describe --group G [--members | --state | --offsets] [--verbose]
    strom consumer-groups --bootstrap-server H:P --reset-offsets --group G --topic T[:P,P] | --all-topics
          (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N | --to-datetime ISO
           | --by-duration PnDTnHnMnS | --from-file CSV) [--dry-run | --execute] [--export]
    strom consumer-groups --bootstrap-server H:P --delete --group G

Output is Kafka's, column for column (``-`` where a value is unknown), so scripts written for
Kafka's tool read it. It talks to brokers through confluent-kafka's AdminClient, plus a Consumer
that never joins a group for log-end offsets and offsets by time; it works against Kafka too.
--verbose adds Kafka 4's columns: LEADER-EPOCH to the offsets; CURRENT-EPOCH, CURRENT-ASSIGNMENT
(``topic:0,1;other:2``), TARGET-EPOCH, TARGET-ASSIGNMENT to the members; GROUP-EPOCH and
TARGET-ASSIGNMENT-EPOCH to the state. The epochs read ``-``: a classic-protocol group has none
(and librdkafka does not report them), as Kafka prints for such groups.

Offsets can only be reset while the group has no active members, as in Kafka. --export prints the
plan as CSV instead of a table (``topic,partition,offset`` for one --group, ``group,topic,partition,
offset`` otherwise); --from-file reads either form back, e.g. a plan exported earlier and edited.
Exit status: 0, or 1 when the command printed an error (including when no broker answers within
--timeout).
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    client_config,
    command_properties,
    ensure_reachable,
    watermark_offsets,
)

if TYPE_CHECKING:
    from confluent_kafka import Consumer

MISSING = "-"
STATE_NAMES = {  # confluent-kafka's ConsumerGroupState → Kafka's GroupState.toString()
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the "
    "default behavior of this command will be to prompt the user before executing the reset rather than doing "
    "a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to "
    "keep the current default behavior without prompting."
)


class CommandError(Exception):
    """Printed as Kafka prints a failed command: "Error: Executing consumer group command failed due to ..."."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker to connect to")
    add_command_config_argument(parser, "admin and consumer client properties file")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list all consumer groups")
    actions.add_argument("--describe", action="store_true", help="describe consumer groups (offsets by default)")
    actions.add_argument("--delete", action="store_true", help="delete consumer groups (only inactive ones)")
    actions.add_argument("--reset-offsets", action="store_true", help="reset a group's offsets (inactive groups)")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group, instead of --group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="with --describe: partitions, offsets and lag")
    view.add_argument("--members", action="store_true", help="with --describe: the members")
    view.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATES",
        help="with --describe: the group's state; with --list: show (and filter by) states",
    )
    parser.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        metavar="TYPES",
        help="with --list: show (and filter by) group types, classic or consumer (Kafka 4, KIP-1043)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="with --describe: more columns (leader epoch; members' assignments; epochs)",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P]",
        help="with --reset-offsets: a topic, or some of its partitions (repeatable)",
    )
    parser.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every committed topic")
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the log end")
    scenario.add_argument("--to-current", action="store_true", help="reset to the committed offset (or the end)")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N (clamped to the log)")
    scenario.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)")
    scenario.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="reset to the first offset at or after a time, e.g. 2024-01-31T12:00:00.000 "
        "(local time unless it names a zone, e.g. Z or +01:00)",
    )
    scenario.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="reset to the first offset at or after now minus this ISO-8601 duration, e.g. PT1H30M",
    )
    scenario.add_argument(
        "--from-file",
        metavar="CSV",
        help="reset to the offsets in a CSV file: topic,partition,offset (one --group) or group,topic,partition,offset",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--export", action="store_true", help="with --reset-offsets: print the plan as CSV")
    parser.add_argument("--timeout", type=int, default=5000, metavar="MS", help="how long to wait for the broker")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    try:
        tool = ConsumerGroupTool(args, out or sys.stdout, err or sys.stderr)
    except ToolError as exc:
        (err or sys.stderr).write(f"{exc}\n")
        return 1
    try:
        tool.validate()
        ensure_reachable(tool.admin, args.bootstrap_server, tool.timeout_s)
        if args.list:
            tool.list_groups()
        elif args.describe:
            tool.describe()
        elif args.delete:
            tool.delete()
        else:
            tool.reset_offsets()
    except (CommandError, ToolError) as exc:
        tool.error(f"Executing consumer group command failed due to {exc}")
    except UsageError as exc:
        tool.err.write(f"{exc}\n")
        return 2
    finally:
        tool.close()
    return 1 if tool.failed else 0


class UsageError(Exception):
    pass


def _kafka_error(exc: BaseException) -> str:
    """A confluent KafkaException as "ERROR_NAME: message"."""
    error: Any = exc.args[0] if exc.args else None
    if hasattr(error, "name") and hasattr(error, "str"):
        return f"{error.name()}: {error.str()}"
    return str(exc)


def _error_code(exc: BaseException) -> str | None:
    error: Any = exc.args[0] if exc.args else None
    return error.name() if hasattr(error, "name") else None


def _assignment_text(assignment) -> str:
    """Kafka's getAssignmentString: ``topic:0,1,2;other:3``, topics sorted; ``-`` when empty."""
    by_topic: dict[str, list[int]] = {}
    for tp in (assignment.topic_partitions if assignment is not None else None) or []:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ";".join(sorted(f"{topic}:" + ",".join(str(p) for p in sorted(ps)) for topic, ps in by_topic.items()))


def _state(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return STATE_NAMES.get(name, name)


class ConsumerGroupTool:
    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO):
        from confluent_kafka.admin import AdminClient

        self.args = args
        self.out = out
        self.err = err
        self.failed = False
        self.timeout_s = args.timeout / 1000
        self.config = client_config(args.bootstrap_server, overrides=command_properties(args.command_config))
        self.admin = AdminClient(self.config)
        self._consumer: Consumer | None = None
        self._from_file: dict[str, dict[tuple[str, int], int]] | None = None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    @property
    def consumer(self):
        """For log offsets only: it never subscribes, so it never joins (or creates) a group."""
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(
                {
                    **self.config,
                    "group.id": "strom-consumer-groups-tool",
                    "enable.auto.commit": False,
                    "isolation.level": "read_uncommitted",
                }
            )
        return self._consumer

    def error(self, message: str) -> None:
        self.failed = True
        self.out.write(f"\nError: {message}\n")

    def validate(self) -> None:
        args = self.args
        needs_group = args.describe or args.delete or args.reset_offsets
        if needs_group and not args.group and not args.all_groups:
            raise UsageError("Option --describe, --delete and --reset-offsets need --group or --all-groups")
        if args.reset_offsets:
            scenarios = [
                args.to_earliest,
                args.to_latest,
                args.to_current,
                args.to_offset is not None,
                args.shift_by is not None,
                args.to_datetime is not None,
                args.by_duration is not None,
                args.from_file is not None,
            ]
            if not any(scenarios):
                raise UsageError(
                    "Option --reset-offsets requires one of --to-earliest, --to-latest, --to-current, "
                    "--to-offset, --shift-by, --to-datetime, --by-duration, --from-file"
                )
            if not args.topic and not args.all_topics and args.from_file is None:
                raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if (args.members or args.offsets) and not args.describe:
            raise UsageError("Option --members and --offsets need --describe")
        if args.verbose and not args.describe:
            raise UsageError("Option --verbose needs --describe")
        if args.export and not args.reset_offsets:
            raise UsageError("Option --export needs --reset-offsets")

    def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return sorted(g.group_id for g in self._listings())
        return list(dict.fromkeys(self.args.group))

    # -- list ------------------------------------------------------------------------------------------
    def _listings(self, states: set | None = None, types: set | None = None) -> list:
        kwargs: dict[str, Any] = {"request_timeout": self.timeout_s}
        if states:
            kwargs["states"] = states
        if types:
            kwargs["types"] = types
        result = self.admin.list_consumer_groups(**kwargs).result(self.timeout_s)
        if result.errors:
            raise CommandError(", ".join(str(e) for e in result.errors))
        return result.valid

    def list_groups(self) -> None:
        from confluent_kafka import ConsumerGroupState

        if self.args.type is not None:
            self._list_with_types()
            return
        if self.args.state is None:
            for listing in sorted(self._listings(), key=lambda g: g.group_id):
                self.out.write(f"{listing.group_id}\n")
            return
        wanted = {s.strip() for s in self.args.state.split(",") if s.strip()}
        by_name = {kafka.lower(): ConsumerGroupState[name] for name, kafka in STATE_NAMES.items() if name != "UNKNOWN"}
        unknown = [s for s in wanted if s.lower() not in by_name]
        if unknown:
            raise UsageError(
                f"Invalid state list '{self.args.state}'. Valid states are: "
                + ", ".join(v for k, v in STATE_NAMES.items() if k != "UNKNOWN")
            )
        listings = sorted(self._listings({by_name[s.lower()] for s in wanted}), key=lambda g: g.group_id)
        width = max([15] + [len(g.group_id) for g in listings]) + 10
        self.out.write(f"{'GROUP':<{width}} {'STATE':<20}\n")
        for listing in listings:
            self.out.write(f"{listing.group_id:<{width}} {_state(listing.state):<20}\n")

    def _list_with_types(self) -> None:
        """Kafka 4's ``--list --type [--state]``: GROUP, TYPE (Classic/Consumer) and maybe STATE."""
        from confluent_kafka import ConsumerGroupState, ConsumerGroupType

        type_names = {"classic": ConsumerGroupType.CLASSIC, "consumer": ConsumerGroupType.CONSUMER}
        types = {t.strip().lower() for t in self.args.type.split(",") if t.strip()}
        if types - set(type_names):
            raise UsageError(f"Invalid types list '{self.args.type}'. Valid types are: classic, consumer")
        states: set = set()
        if self.args.state:
            by_name = {k.lower(): ConsumerGroupState[n] for n, k in STATE_NAMES.items() if n != "UNKNOWN"}
            wanted = {s.strip().lower() for s in self.args.state.split(",") if s.strip()}
            if wanted - set(by_name):
                raise UsageError(
                    f"Invalid state list '{self.args.state}'. Valid states are: "
                    + ", ".join(v for k, v in STATE_NAMES.items() if k != "UNKNOWN")
                )
            states = {by_name[s] for s in wanted}
        listings = sorted(self._listings(states, {type_names[t] for t in types}), key=lambda g: g.group_id)
        width = max([15] + [len(g.group_id) for g in listings]) + 10
        header = f"{'GROUP':<{width}} {'TYPE':<20}" + (f" {'STATE':<20}" if self.args.state is not None else "")
        self.out.write(header + "\n")
        for listing in listings:
            kind = getattr(listing.type, "name", "UNKNOWN").capitalize()
            line = f"{listing.group_id:<{width}} {kind:<20}"
            if self.args.state is not None:
                line += f" {_state(listing.state):<20}"
            self.out.write(line + "\n")

    # -- describe ------------------------------------------------------------------------------------
    def _describe(self, group_ids: list[str]) -> dict:
        futures = self.admin.describe_consumer_groups(group_ids, request_timeout=self.timeout_s)
        found = {}
        for group_id, future in futures.items():
            try:
                found[group_id] = future.result(self.timeout_s)
            except Exception as exc:
                if _error_code(exc) == "GROUP_ID_NOT_FOUND":
                    found[group_id] = None
                else:
                    raise CommandError(_kafka_error(exc)) from None
        return found

    def _committed(self, group_id: str) -> dict[tuple[str, int], int]:
        return {tp: offset for tp, (offset, _) in self._committed_with_epochs(group_id).items()}

    def _committed_with_epochs(self, group_id: str) -> dict[tuple[str, int], tuple[int, int | None]]:
        """(topic, partition) -> (committed offset, the leader epoch committed with it, if any)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)], request_timeout=self.timeout_s
        )
        try:
            result = futures[group_id].result(self.timeout_s)
        except Exception as exc:
            raise CommandError(_kafka_error(exc)) from None
        return {
            (tp.topic, tp.partition): (tp.offset, tp.leader_epoch)
            for tp in result.topic_partitions or []
            if tp.offset >= 0
        }

    def _log_end(self, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        try:
            return watermark_offsets(self.consumer, TopicPartition(topic, partition), self.timeout_s)[1]
        except Exception:
            return None

    def _log_start(self, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        try:
            return watermark_offsets(self.consumer, TopicPartition(topic, partition), self.timeout_s)[0]
        except Exception:
            return None

    def _should_print(self, group_id: str, description, rows: int | None) -> bool:
        """Kafka's shouldPrintMemberState: a note about the state, and whether there is a table."""
        state = "Dead" if description is None else _state(description.state)
        if rows is None:
            self.error(f"The consumer group '{group_id}' does not exist.")
            return False
        if state == "Dead":
            self.error(f"Consumer group '{group_id}' does not exist.")
        elif state == "Empty":
            self.err.write(f"\nConsumer group '{group_id}' has no active members.\n")
        elif state in ("PreparingRebalance", "CompletingRebalance"):
            self.err.write(f"\nWarning: Consumer group '{group_id}' is rebalancing.\n")
        return state != "Dead" and rows > 0

    def describe(self) -> None:
        descriptions = self._describe(self.group_ids())
        for group_id in sorted(descriptions):
            description = descriptions[group_id]
            if self.args.members:
                self._print_members(group_id, description, self.args.verbose)
            elif self.args.state is not None:
                self._print_state(group_id, description, self.args.verbose)
            else:
                self._print_offsets(group_id, description, self.args.verbose)

    def _offset_rows(self, group_id: str, description) -> list[tuple]:
        committed = self._committed_with_epochs(group_id)
        rows: list[tuple] = []
        assigned: set[tuple[str, int]] = set()
        members = [m for m in (description.members if description else []) if m.assignment.topic_partitions]
        members.sort(key=lambda m: -len(m.assignment.topic_partitions))  # Kafka: most partitions first
        for member in members:
            partitions = sorted({(tp.topic, tp.partition) for tp in member.assignment.topic_partitions})
            assigned.update(partitions)
            rows += [
                self._offset_row(group_id, tp, committed, member.member_id, member.host, member.client_id)
                for tp in partitions
            ]
        rest = sorted(tp for tp in committed if tp not in assigned)
        rows += [self._offset_row(group_id, tp, committed, MISSING, MISSING, MISSING) for tp in rest]
        return rows

    def _offset_row(self, group_id, tp, committed, consumer_id, host, client_id) -> tuple:
        """(group, topic, partition, leader epoch, current offset, log end, lag, consumer, host, client)."""
        offset, epoch = committed.get(tp, (None, None))
        end = self._log_end(*tp)
        lag = end - offset if offset is not None and offset != -1 and end is not None else None
        shown = [MISSING if v is None else str(v) for v in (epoch, offset, end, lag)]
        return (group_id, tp[0], str(tp[1]), *shown, consumer_id, host, client_id)

    def _print_offsets(self, group_id: str, description, verbose: bool) -> None:
        rows = self._offset_rows(group_id, description) if description is not None else []
        if not self._should_print(group_id, description, len(rows)):
            return
        g = max([15] + [len(r[0]) for r in rows])
        t = max([15] + [len(r[1]) for r in rows])
        c = max([15] + [len(r[7]) for r in rows])
        h = max([15] + [len(r[8]) for r in rows])
        header = (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "LEADER-EPOCH",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        )
        for row in [header, *rows]:
            epoch = f"{row[3]:<15} " if verbose else ""
            self.out.write(
                f"\n{row[0]:<{g}} {row[1]:<{t}} {row[2]:<10} {epoch}{row[4]:<15} {row[5]:<15} "
                f"{row[6]:<15} {row[7]:<{c}} {row[8]:<{h}} {row[9]}"
            )
        self.out.write("\n")

    def _print_members(self, group_id: str, description, verbose: bool) -> None:
        members = description.members if description is not None else []
        if not self._should_print(group_id, description, len(members)):
            return
        current = [_assignment_text(m.assignment) for m in members]
        target = [_assignment_text(m.target_assignment) for m in members]
        g = max([15, len(group_id)])
        c = max([15] + [len(m.member_id) for m in members])
        i = max([17] + [len(m.group_instance_id or "") for m in members])
        h = max([15] + [len(m.host) for m in members])
        k = max([15] + [len(m.client_id) for m in members])
        a = max([20] + [len(text) for text in current])
        ta = max([20] + [len(text) for text in target])
        with_instance = any(m.group_instance_id for m in members)

        def line(group, member, instance, host, client, partitions, epochs_and_assignments) -> str:
            middle = f"{instance:<{i}} " if with_instance else ""
            text = f"{group:<{g}} {member:<{c}} {middle}{host:<{h}} {client:<{k}} {partitions:<15} "
            if verbose:
                epoch, assigned, target_epoch, assigned_next = epochs_and_assignments
                text += f"{epoch:<15} {assigned:<{a}} {target_epoch:<15} {assigned_next:<{ta}}"
            return text

        self.out.write(
            "\n"
            + line(
                "GROUP",
                "CONSUMER-ID",
                "GROUP-INSTANCE-ID",
                "HOST",
                "CLIENT-ID",
                "#PARTITIONS",
                ("CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"),
            )
            + "\n"
        )
        for m, assigned, assigned_next in zip(members, current, target):
            # librdkafka reports no member or target-assignment epochs: "-", as Kafka prints for classic groups
            self.out.write(
                line(
                    group_id,
                    m.member_id,
                    m.group_instance_id or "",
                    m.host,
                    m.client_id,
                    str(len(m.assignment.topic_partitions)),
                    (MISSING, assigned, MISSING, assigned_next),
                )
                + "\n"
            )

    def _print_state(self, group_id: str, description, verbose: bool) -> None:
        if not self._should_print(group_id, description, 1):
            return
        node = description.coordinator
        coordinator = f"{node.host}:{node.port}  ({node.id_string})"
        c = max(25, len(coordinator))
        g = max(15, len(group_id))
        strategy = description.partition_assignor or MISSING
        rows = [
            ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [group_id, coordinator, strategy, _state(description.state), str(len(description.members))],
        ]
        for row in rows:
            epochs = ""
            if verbose:
                group_epoch, target_epoch = (
                    ("GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH") if row is rows[0] else (MISSING, MISSING)
                )
                epochs = f"{group_epoch:<15} {target_epoch:<25} "
            self.out.write(f"\n{row[0]:<{g}} {row[1]:<{c}} {row[2]:<20} {row[3]:<20} {epochs}{row[4]}")
        self.out.write("\n")

    # -- delete ----------------------------------------------------------------------------------------
    def delete(self) -> None:
        group_ids = self.group_ids()
        futures = self.admin.delete_consumer_groups(group_ids, request_timeout=self.timeout_s)
        deleted, failed = [], {}
        for group_id in group_ids:
            try:
                futures[group_id].result(self.timeout_s)
                deleted.append(group_id)
            except Exception as exc:
                failed[group_id] = _kafka_error(exc)
        names = ", ".join(f"'{g}'" for g in deleted)
        if not failed:
            self.out.write(f"Deletion of requested consumer groups ({names}) was successful.\n")
            return
        self.error("Deletion of some consumer groups failed:")
        for group_id, reason in failed.items():
            self.out.write(f"* Group '{group_id}' could not be deleted due to: {reason}\n")
        if deleted:
            self.out.write(f"\nThese consumer groups were deleted successfully: {names}\n")

    # -- reset offsets ---------------------------------------------------------------------------------
    def reset_offsets(self) -> None:
        args = self.args
        if not args.dry_run and not args.execute:
            self.err.write(NO_EXECUTE_WARNING + "\n")
        plans: dict[str, dict[tuple[str, int], int]] = {}
        for group_id, description in self._describe(self.group_ids()).items():
            state = "Dead" if description is None else _state(description.state)
            if state not in ("Empty", "Dead"):
                self.error(
                    f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                    f"state is {state}."
                )
                plans[group_id] = {}
                continue
            plan = self._plan(group_id)
            if args.execute and plan:
                self._commit(group_id, plan)
            plans[group_id] = plan
        if args.export:
            self._export(plans)
        else:
            self._print_plans(plans)

    def _partitions(self, group_id: str) -> list[tuple[str, int]]:
        if self.args.all_topics:
            return sorted(self._committed(group_id))
        partitions: list[tuple[str, int]] = []
        metadata = self.admin.list_topics(timeout=self.timeout_s)
        for arg in self.args.topic:
            topic, _, listed = arg.partition(":")
            known = metadata.topics.get(topic)
            if listed:
                try:
                    partitions += [(topic, int(p)) for p in listed.split(",")]
                except ValueError:
                    raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions") from None
            elif known is not None and known.error is None:
                partitions += [(topic, p) for p in sorted(known.partitions)]
            else:
                raise CommandError(f'The partitions "{topic}" do not exist')
        self._check_exist(partitions, metadata)
        return list(dict.fromkeys(partitions))

    def _check_exist(self, partitions: list[tuple[str, int]], metadata=None) -> None:
        metadata = metadata or self.admin.list_topics(timeout=self.timeout_s)
        missing = [
            (t, p) for t, p in partitions if metadata.topics.get(t) is None or p not in metadata.topics[t].partitions
        ]
        if missing:
            raise CommandError('The partitions "' + ",".join(f"{t}-{p}" for t, p in missing) + '" do not exist')

    def _file_plans(self) -> dict[str, dict[tuple[str, int], int]]:
        """Kafka's resetPlanFromFile: ``topic,partition,offset`` lines when there is one --group and the
        first line has that form, otherwise ``group,topic,partition,offset``; blank lines are skipped."""
        if self._from_file is not None:
            return self._from_file
        path = self.args.from_file
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                rows = [row for row in csv.reader(handle) if any(field.strip() for field in row)]
        except (OSError, csv.Error) as exc:
            raise CommandError(f"cannot read the reset plan {path}: {getattr(exc, 'strerror', None) or exc}") from None
        single = (
            not self.args.all_groups and len(self.group_ids()) == 1 and bool(rows) and _plan_row(rows[0], 3) is not None
        )
        plans: dict[str, dict[tuple[str, int], int]] = {}
        for number, row in enumerate(rows, 1):
            parsed = _plan_row(row, 3 if single else 4)
            if parsed is None:
                raise CommandError(
                    f"line {number} of {path} is not "
                    f"{'topic,partition,offset' if single else 'group,topic,partition,offset'}: " + ",".join(row)
                )
            group_id = self.args.group[0] if single else parsed[0]
            topic, partition, offset = parsed[-3:]
            plans.setdefault(group_id, {})[(topic, partition)] = offset
        self._from_file = plans
        return plans

    def _plan(self, group_id: str) -> dict[tuple[str, int], int]:
        args = self.args
        if args.from_file is not None:
            plan = self._file_plans().get(group_id)
            if plan is None:
                self.error(f"No reset plan for group {group_id} found.")
                return {}
            self._check_exist(list(plan))
            return {tp: self._clamp(tp, offset) for tp, offset in sorted(plan.items())}
        partitions = self._partitions(group_id)
        if args.by_duration is not None:
            return self._by_time(partitions, int(time.time() * 1000) - _parse_duration_ms(args.by_duration))
        if args.to_earliest:
            return {tp: self._required(self._log_start(*tp), "starting", tp) for tp in partitions}
        if args.to_latest:
            return {tp: self._required(self._log_end(*tp), "ending", tp) for tp in partitions}
        if args.to_current:
            committed = self._committed(group_id)
            return {
                tp: committed[tp] if tp in committed else self._required(self._log_end(*tp), "ending", tp)
                for tp in partitions
            }
        if args.to_offset is not None:
            return {tp: self._clamp(tp, args.to_offset) for tp in partitions}
        if args.shift_by is not None:
            committed = self._committed(group_id)
            plan = {}
            for tp in partitions:
                if tp not in committed:
                    raise UsageError(
                        f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current committed offset"
                    )
                plan[tp] = self._clamp(tp, committed[tp] + args.shift_by)
            return plan
        return self._by_time(partitions, _parse_datetime(args.to_datetime))

    def _required(self, offset: int | None, what: str, tp: tuple[str, int]) -> int:
        if offset is None:
            raise CommandError(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
        return offset

    def _clamp(self, tp: tuple[str, int], offset: int) -> int:
        """Kafka's checkOffsetsRange: an offset outside the log becomes the nearest end."""
        end = self._log_end(*tp)
        if end is not None and offset > end:
            return end
        start = self._log_start(*tp)
        if start is not None and offset < start:
            return start
        return offset

    def _by_time(self, partitions: list[tuple[str, int]], timestamp_ms: int) -> dict[tuple[str, int], int]:
        from confluent_kafka import TopicPartition

        try:
            found = self.consumer.offsets_for_times(
                [TopicPartition(t, p, timestamp_ms) for t, p in partitions], self.timeout_s
            )
        except Exception as exc:
            raise CommandError(_kafka_error(exc)) from None
        plan = {}
        for tp in found:
            if tp.offset >= 0:
                plan[(tp.topic, tp.partition)] = tp.offset
            else:
                self.out.write(
                    f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. "
                    "Falling back to latest known offset.\n"
                )
                plan[(tp.topic, tp.partition)] = self._required(
                    self._log_end(tp.topic, tp.partition), "ending", (tp.topic, tp.partition)
                )
        return plan

    def _commit(self, group_id: str, plan: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for (t, p), o in plan.items()])
        futures = self.admin.alter_consumer_group_offsets([request], request_timeout=self.timeout_s)
        try:
            result = futures[group_id].result(self.timeout_s)
        except Exception as exc:
            raise CommandError(_kafka_error(exc)) from None
        errors = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions or [] if tp.error]
        if errors:
            raise CommandError("; ".join(errors))

    def _export(self, plans: dict[str, dict[tuple[str, int], int]]) -> None:
        """Kafka's exportOffsetsToCsv: no group column when one --group was given; then println's newline."""
        single = not self.args.all_groups and len(self.group_ids()) == 1
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        for group_id, plan in plans.items():
            for (topic, partition), offset in sorted(plan.items()):
                writer.writerow([topic, partition, offset] if single else [group_id, topic, partition, offset])
        self.out.write(text.getvalue() + "\n")

    def _print_plans(self, plans: dict[str, dict[tuple[str, int], int]]) -> None:
        """Kafka's GroupOffsetsResetter.printOffsetsToReset."""
        g = max([15] + [len(group_id) for group_id in plans])
        t = max([15] + [len(topic) for plan in plans.values() for topic, _ in plan])
        if plans:
            self.out.write(f"\n{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET")
        for group_id, plan in plans.items():
            for (topic, partition), offset in sorted(plan.items()):
                self.out.write(f"\n{group_id:<{g}} {topic:<{t}} {partition:<10} {offset}")
        self.out.write("\n")


def _plan_row(row: list[str], width: int) -> tuple | None:
    """A CSV reset-plan row as (group?, topic, partition, offset), or None when it has another form."""
    if len(row) != width:
        return None
    *names, partition, offset = (field.strip() for field in row)
    try:
        return (*names, int(partition), int(offset))
    except ValueError:
        return None


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?"
    r"(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def _parse_duration_ms(text: str) -> int:
    """Java's Duration.parse (what Kafka's --by-duration uses): ``PnDTnHnMn.nS``, e.g. PT30M, P1DT12H, PT0.5S."""
    match = _DURATION.fullmatch(text.strip())
    if not match or match.group(3) == "T" or not any(match.group(i) for i in (2, 4, 5, 6)):
        raise UsageError(f"Error parsing duration '{text}': expected ISO-8601 PnDTnHnMn.nS, e.g. PT1H30M or P2D")
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    fraction_ms = int((fraction or "0").ljust(9, "0")) / 1_000_000
    if seconds and seconds.startswith("-"):
        fraction_ms = -fraction_ms
    total = (
        ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
        + int(seconds or 0) * 1000
        + fraction_ms
    )
    return int(-total if sign == "-" else total)


def _parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: yyyy-MM-ddTHH:mm:ss[.SSS][zone]; no zone means local time."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"Error parsing timestamp '{text}': expected yyyy-MM-dd'T'HH:mm:ss.SSS with an "
            "optional zone such as Z or +01:00"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka's tool does
    return int(when.astimezone(UTC).timestamp() * 1000)
