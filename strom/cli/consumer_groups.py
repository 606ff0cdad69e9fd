"""``strom consumer-groups``: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand).

    strom consumer-groups --bootstrap-server H:P --list [--state [STATES]]
    strom consumer-groups --bootstrap-server H:P --describe --group G [--members | --state | --offsets]
    strom consumer-groups --bootstrap-server H:P --reset-offsets --group G --topic T[:P,P] | --all-topics
          (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N | --to-datetime ISO)
          [--dry-run | --execute]
    strom consumer-groups --bootstrap-server H:P --delete --group G

Output is Kafka's, column for column (``-`` where a value is unknown), so scripts written for
Kafka's tool read it. It talks to brokers through confluent-kafka's AdminClient, plus a Consumer
that never joins a group for log-end offsets and offsets by time; it works against Kafka too.
Offsets can only be reset while the group has no active members, as in Kafka. Exit status: 0,
or 1 when the command printed an error.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

MISSING = "-"
STATE_NAMES = {  # confluent-kafka's ConsumerGroupState → Kafka's GroupState.toString()
    "UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty",
}
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the "
    "default behavior of this command will be to prompt the user before executing the reset rather than doing "
    "a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to "
    "keep the current default behavior without prompting.")


class CommandError(Exception):
    """Printed as Kafka prints a failed command: "Error: Executing consumer group command failed due to ..."."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker to connect to")
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
    view.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                      help="with --describe: the group's state; with --list: show (and filter by) states")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                        help="with --reset-offsets: a topic, or some of its partitions (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="with --reset-offsets: every committed topic")
    scenario = parser.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the earliest offset")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the log end")
    scenario.add_argument("--to-current", action="store_true", help="reset to the committed offset (or the end)")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N (clamped to the log)")
    scenario.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)")
    scenario.add_argument("--to-datetime", metavar="ISO",
                          help="reset to the first offset at or after a time, e.g. 2024-01-31T12:00:00.000 "
                               "(local time unless it names a zone, e.g. Z or +01:00)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only print the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--timeout", type=int, default=5000, metavar="MS", help="how long to wait for the broker")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    tool = ConsumerGroupTool(args, out or sys.stdout, err or sys.stderr)
    try:
        tool.validate()
        if args.list:
            tool.list_groups()
        elif args.describe:
            tool.describe()
        elif args.delete:
            tool.delete()
        else:
            tool.reset_offsets()
    except CommandError as exc:
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
    error = exc.args[0] if exc.args else None
    if hasattr(error, "name") and hasattr(error, "str"):
        return f"{error.name()}: {error.str()}"
    return str(exc)


def _error_code(exc: BaseException) -> str | None:
    error = exc.args[0] if exc.args else None
    return error.name() if hasattr(error, "name") else None


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
        self.config = {"bootstrap.servers": args.bootstrap_server, "log_level": 3}  # librdkafka: errors only
        self.admin = AdminClient(self.config)
        self._consumer = None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    @property
    def consumer(self):
        """For log offsets only: it never subscribes, so it never joins (or creates) a group."""
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({**self.config, "group.id": "strom-consumer-groups-tool",
                                       "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
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
            scenarios = [args.to_earliest, args.to_latest, args.to_current, args.to_offset is not None,
                         args.shift_by is not None, args.to_datetime is not None]
            if not any(scenarios):
                raise UsageError("Option --reset-offsets requires one of --to-earliest, --to-latest, --to-current, "
                                 "--to-offset, --shift-by, --to-datetime")
            if not args.topic and not args.all_topics:
                raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        if (args.members or args.offsets) and not args.describe:
            raise UsageError("Option --members and --offsets need --describe")

    def group_ids(self) -> list[str]:
        if self.args.all_groups:
            return sorted(g.group_id for g in self._listings())
        return list(dict.fromkeys(self.args.group))

    # -- list ------------------------------------------------------------------------------------------
    def _listings(self, states: set | None = None) -> list:
        kwargs: dict[str, Any] = {"request_timeout": self.timeout_s}
        if states:
            kwargs["states"] = states
        result = self.admin.list_consumer_groups(**kwargs).result(self.timeout_s)
        if result.errors:
            raise CommandError(", ".join(str(e) for e in result.errors))
        return result.valid

    def list_groups(self) -> None:
        from confluent_kafka import ConsumerGroupState

        if self.args.state is None:
            for listing in sorted(self._listings(), key=lambda g: g.group_id):
                self.out.write(f"{listing.group_id}\n")
            return
        wanted = {s.strip() for s in self.args.state.split(",") if s.strip()}
        by_name = {kafka.lower(): ConsumerGroupState[name] for name, kafka in STATE_NAMES.items()
                   if name != "UNKNOWN"}
        unknown = [s for s in wanted if s.lower() not in by_name]
        if unknown:
            raise UsageError(f"Invalid state list '{self.args.state}'. Valid states are: "
                             + ", ".join(v for k, v in STATE_NAMES.items() if k != "UNKNOWN"))
        listings = sorted(self._listings({by_name[s.lower()] for s in wanted}), key=lambda g: g.group_id)
        width = max([15] + [len(g.group_id) for g in listings]) + 10
        self.out.write(f"{'GROUP':<{width}} {'STATE':<20}\n")
        for listing in listings:
            self.out.write(f"{listing.group_id:<{width}} {_state(listing.state):<20}\n")

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
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                                         request_timeout=self.timeout_s)
        try:
            result = futures[group_id].result(self.timeout_s)
        except Exception as exc:
            raise CommandError(_kafka_error(exc)) from None
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}

    def _log_end(self, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        try:
            return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), self.timeout_s)[1]
        except Exception:
            return None

    def _log_start(self, topic: str, partition: int) -> int | None:
        from confluent_kafka import TopicPartition

        try:
            return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), self.timeout_s)[0]
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
                self._print_members(group_id, description)
            elif self.args.state is not None:
                self._print_state(group_id, description)
            else:
                self._print_offsets(group_id, description)

    def _offset_rows(self, group_id: str, description) -> list[tuple]:
        committed = self._committed(group_id)
        rows: list[tuple] = []
        assigned: set[tuple[str, int]] = set()
        members = [m for m in (description.members if description else []) if m.assignment.topic_partitions]
        members.sort(key=lambda m: -len(m.assignment.topic_partitions))  # Kafka: most partitions first
        for member in members:
            partitions = sorted({(tp.topic, tp.partition) for tp in member.assignment.topic_partitions})
            assigned.update(partitions)
            rows += [self._offset_row(group_id, tp, committed, member.member_id, member.host, member.client_id)
                     for tp in partitions]
        rest = sorted(tp for tp in committed if tp not in assigned)
        rows += [self._offset_row(group_id, tp, committed, MISSING, MISSING, MISSING) for tp in rest]
        return rows

    def _offset_row(self, group_id, tp, committed, consumer_id, host, client_id) -> tuple:
        offset = committed.get(tp)
        end = self._log_end(*tp)
        lag = end - offset if offset is not None and offset != -1 and end is not None else None
        shown = [MISSING if v is None else str(v) for v in (offset, end, lag)]
        return (group_id, tp[0], str(tp[1]), *shown, consumer_id, host, client_id)

    def _print_offsets(self, group_id: str, description) -> None:
        rows = self._offset_rows(group_id, description) if description is not None else []
        if not self._should_print(group_id, description, len(rows)):
            return
        g = max([15] + [len(r[0]) for r in rows])
        t = max([15] + [len(r[1]) for r in rows])
        c = max([15] + [len(r[6]) for r in rows])
        h = max([15] + [len(r[7]) for r in rows])
        header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID")
        for row in [header, *rows]:
            self.out.write(f"\n{row[0]:<{g}} {row[1]:<{t}} {row[2]:<10} {row[3]:<15} {row[4]:<15} {row[5]:<15} "
                           f"{row[6]:<{c}} {row[7]:<{h}} {row[8]}")
        self.out.write("\n")

    def _print_members(self, group_id: str, description) -> None:
        members = description.members if description is not None else []
        if not self._should_print(group_id, description, len(members)):
            return
        g = max([15, len(group_id)])
        c = max([15] + [len(m.member_id) for m in members])
        i = max([17] + [len(m.group_instance_id or "") for m in members])
        h = max([15] + [len(m.host) for m in members])
        k = max([15] + [len(m.client_id) for m in members])
        with_instance = any(m.group_instance_id for m in members)

        def line(group, member, instance, host, client, partitions) -> str:
            middle = f"{instance:<{i}} " if with_instance else ""
            return f"{group:<{g}} {member:<{c}} {middle}{host:<{h}} {client:<{k}} {partitions:<15} "

        self.out.write("\n" + line("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
                       + "\n")
        for m in members:
            self.out.write(line(group_id, m.member_id, m.group_instance_id or "", m.host, m.client_id,
                                str(len(m.assignment.topic_partitions))) + "\n")

    def _print_state(self, group_id: str, description) -> None:
        if not self._should_print(group_id, description, 1):
            return
        node = description.coordinator
        coordinator = f"{node.host}:{node.port}  ({node.id_string})"
        c = max(25, len(coordinator))
        g = max(15, len(group_id))
        strategy = description.partition_assignor or MISSING
        for row in (("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                    (group_id, coordinator, strategy, _state(description.state), str(len(description.members)))):
            self.out.write(f"\n{row[0]:<{g}} {row[1]:<{c}} {row[2]:<20} {row[3]:<20} {row[4]}")
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
                self.error(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                           f"state is {state}.")
                plans[group_id] = {}
                continue
            plan = self._plan(group_id)
            if args.execute:
                self._commit(group_id, plan)
            plans[group_id] = plan
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
                raise CommandError(f"The partitions \"{topic}\" do not exist")
            missing = [tp for tp in partitions if tp[0] == topic and (known is None or tp[1] not in known.partitions)]
            if missing:
                raise CommandError("The partitions \"" + ",".join(f"{t}-{p}" for t, p in missing) + "\" do not exist")
        return list(dict.fromkeys(partitions))

    def _plan(self, group_id: str) -> dict[tuple[str, int], int]:
        args = self.args
        partitions = self._partitions(group_id)
        if args.to_earliest:
            return {tp: self._required(self._log_start(*tp), "starting", tp) for tp in partitions}
        if args.to_latest:
            return {tp: self._required(self._log_end(*tp), "ending", tp) for tp in partitions}
        if args.to_current:
            committed = self._committed(group_id)
            return {tp: committed[tp] if tp in committed else self._required(self._log_end(*tp), "ending", tp)
                    for tp in partitions}
        if args.to_offset is not None:
            return {tp: self._clamp(tp, args.to_offset) for tp in partitions}
        if args.shift_by is not None:
            committed = self._committed(group_id)
            plan = {}
            for tp in partitions:
                if tp not in committed:
                    raise UsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                     "committed offset")
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
            found = self.consumer.offsets_for_times([TopicPartition(t, p, timestamp_ms) for t, p in partitions],
                                                    self.timeout_s)
        except Exception as exc:
            raise CommandError(_kafka_error(exc)) from None
        plan = {}
        for tp in found:
            if tp.offset >= 0:
                plan[(tp.topic, tp.partition)] = tp.offset
            else:
                self.out.write(f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. "
                               "Falling back to latest known offset.\n")
                plan[(tp.topic, tp.partition)] = self._required(self._log_end(tp.topic, tp.partition),
                                                                "ending", (tp.topic, tp.partition))
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


def _parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: yyyy-MM-ddTHH:mm:ss[.SSS][zone]; no zone means local time."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"Error parsing timestamp '{text}': expected yyyy-MM-dd'T'HH:mm:ss.SSS with an "
                         "optional zone such as Z or +01:00") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka's tool does
    return int(when.astimezone(timezone.utc).timestamp() * 1000)
