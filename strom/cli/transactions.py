"""``strom transactions``: Kafka's kafka-transactions.sh (TransactionsCommand).

    strom transactions --bootstrap-server H:P list
    strom transactions --bootstrap-server H:P describe --transactional-id ID
    strom transactions --bootstrap-server H:P describe-producers --topic T --partition P
    strom transactions --bootstrap-server H:P abort --topic T --partition P --start-offset N
    strom transactions --bootstrap-server H:P abort --topic T --partition P \\
          --producer-id ID --producer-epoch E --coordinator-epoch C

``abort`` is the tool for a hanging transaction: one whose producer is gone while its data holds a
partition's last stable offset back, so that read_committed consumers stop there. As in Kafka, it
finds the producer whose open transaction starts at --start-offset (DescribeProducers) and writes
an ABORT marker for it on the partition's leader (WriteTxnMarkers); it prints nothing on success.

Output is Kafka's: a header row and one row per item, each column padded to its widest value and
followed by a tab; ``None`` where Kafka prints it (no open transaction, no start time). Errors are
one line on stderr and exit status 1.

confluent-kafka's AdminClient has none of these calls, so after the metadata (AdminClient) the tool
sends the requests itself, with the same routing as Kafka's Admin client: ListTransactions to every
broker (each lists the ids it coordinates), DescribeTransactions to the transactional id's
coordinator (FindCoordinator key_type 1), DescribeProducers and WriteTxnMarkers to the partition's
leader. Retriable errors (a coordinator still loading, a moved leader) are retried until --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from strom.cli.client_props import (
    ToolError,
    add_command_config_argument,
    add_timeout_argument,
    client_config,
    client_security,
    command_properties,
    ensure_reachable,
    error_text,
    exits_quietly_on_broken_pipe,
)
from strom.protocol.errors import ErrorCode, KafkaError

Rows = list[tuple[str, ...]]
Table = tuple[tuple[str, ...], Rows]  # (headers, rows); names, since a method is called list
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCER_HEADERS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
# The states Kafka's Admin client knows (TransactionState); it shows any other name as Unknown.
KNOWN_STATES = frozenset(
    {"Ongoing", "PrepareAbort", "PrepareCommit", "CompleteAbort", "CompleteCommit", "Empty", "PrepareEpochFence"}
)

FIND_COORDINATOR, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS = 10, 65, 66, 61, 27
# Versions every broker since Kafka 3.0 serves (and strom too): no version negotiation needed.
VERSIONS = {
    FIND_COORDINATOR: 3,
    DESCRIBE_TRANSACTIONS: 0,
    LIST_TRANSACTIONS: 0,
    DESCRIBE_PRODUCERS: 0,
    WRITE_TXN_MARKERS: 1,
}
TRANSACTION_KEY_TYPE = 1
RETRY_BACKOFF_S = (0.05, 1.0)
# A partition leader that moved, or that has not heard of the partition yet: ask the metadata again.
LEADER_MOVED = frozenset(
    {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER}
)
COORDINATOR_MOVED = frozenset(
    {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="a broker to connect to (comma-separated list allowed)",
    )
    add_command_config_argument(parser, "admin client properties file")
    add_timeout_argument(parser)
    commands = parser.add_subparsers(dest="txn_command", metavar="COMMAND", required=True)
    commands.add_parser("list", help="list transactions (every broker's)")
    describe = commands.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")
    abort = commands.add_parser("abort", help="abort a hanging transaction (writes an ABORT marker on the leader)")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    abort.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int, help="producer id (instead of --start-offset)")
    abort.add_argument("--producer-epoch", type=int, help="producer epoch (with --producer-id)")
    abort.add_argument("--coordinator-epoch", type=int, help="coordinator epoch (with --producer-id)")


@exits_quietly_on_broken_pipe
def run(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    try:
        check_args(args)
        tool = TransactionsTool(args.bootstrap_server, args.timeout / 1000, command_properties(args.command_config))
        commands: dict[str, Callable[[], Any]] = {
            "list": lambda: tool.list(),
            "describe": lambda: tool.describe(args.transactional_id),
            "describe-producers": lambda: tool.describe_producers(args.topic, args.partition),
            "abort": lambda: tool.abort(args),
        }
        rows = asyncio.run(commands[args.txn_command]())
    except (ToolError, KafkaException) as exc:
        print(error_text(exc), file=sys.stderr)
        return 1
    except KafkaError as exc:  # e.g. a response that does not decode
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if rows is not None:
        sys.stdout.write(table(*rows))
    return 0


def check_args(args: argparse.Namespace) -> None:
    if args.txn_command != "abort":
        return
    if args.start_offset is None and args.producer_id is None:
        raise ToolError(
            "The transaction to abort must be identified either with --start-offset (for brokers on "
            "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
            "(for older brokers)"
        )
    if args.start_offset is None:
        for name in ("producer_epoch", "coordinator_epoch"):
            if getattr(args, name) is None:
                raise ToolError(f"Missing required argument --{name.replace('_', '-')}")


def table(headers: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """Kafka's prettyPrintTable: every column as wide as its widest cell, each cell followed by a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return "".join("".join(f"{cell:<{w}}\t" for cell, w in zip(row, widths)) + "\n" for row in (headers, *rows))


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


class Failed(ToolError):
    def __init__(self, what: str, code: int, message: str | None = None):
        super().__init__(f"{what}: {error_name(code)}" + (f" ({message})" if message else ""))


def _ms(value: Any) -> int:
    """A kio time field (datetime, or None for -1) as Kafka's milliseconds."""
    if value is None:
        return -1
    return round((value - _EPOCH).total_seconds() * 1000)


def _describe_row(coordinator_id: int, transactional_id: str, state: Any) -> tuple[str, ...]:
    """One DescribeTransactions state as kafka-transactions.sh describe prints it (DESCRIBE_HEADERS)."""
    start = _ms(state.transaction_start_time)
    started = start >= 0
    partitions = ",".join(
        f"{t.topic}-{p}" for t in sorted(state.topics, key=lambda t: t.topic) for p in sorted(t.partitions)
    )
    return (
        str(coordinator_id),
        transactional_id,
        str(state.producer_id),
        str(state.producer_epoch),
        _state(state.transaction_state),
        str(int(state.transaction_timeout.total_seconds() * 1000)),
        str(start) if started else "None",
        str(int(time.time() * 1000) - start) if started else "None",
        partitions,
    )


class TransactionsTool:
    """One command's worth of requests: metadata through confluent-kafka, the rest over BrokerClient."""

    def __init__(self, bootstrap: str, timeout_s: float, props: dict[str, str] | None = None):
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.security = client_security(props or {})
        self.admin = AdminClient(client_config(bootstrap, overrides=props))
        ensure_reachable(self.admin, bootstrap, timeout_s)
        self._clients: dict[tuple[str, int], Any] = {}

    # -- plumbing ---------------------------------------------------------------------------------

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def brokers(self) -> dict[int, tuple[str, int]]:
        metadata = self.admin.list_topics(timeout=max(self.left(), 0.1))
        # BrokerMetadata.__init__ sets host = None, so mypy infers None; librdkafka fills in a str
        return {b.id: (b.host, b.port) for b in metadata.brokers.values()}  # type: ignore[misc]

    def leader(self, topic: str, partition: int, what: str) -> tuple[int, tuple[str, int]]:
        """The partition's leader (-1 while it has none); all-topic metadata, so nothing is auto-created."""
        metadata = self.admin.list_topics(timeout=max(self.left(), 0.1))
        found = metadata.topics.get(topic)
        if found is None or partition not in found.partitions:
            raise Failed(what, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        leader = found.partitions[partition].leader
        if leader < 0 or leader not in metadata.brokers:
            return -1, ("", 0)
        node = metadata.brokers[leader]
        return leader, (node.host, node.port)  # type: ignore[return-value]  # host: see brokers()

    async def request(self, address: tuple[str, int], api_key: int, values: dict) -> Any:
        from strom.replication.client import BrokerClient, BrokerConnectionError

        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = BrokerClient(
                address[0], address[1], "strom-transactions", max(self.left(), 0.1), security=self.security
            )
        try:
            return await client.request(api_key, VERSIONS[api_key], values, max(self.left(), 0.1))
        except BrokerConnectionError as exc:
            raise ToolError(str(exc)) from None

    async def retrying(self, attempt: Callable[[], Any], what: str) -> Any:
        """Call ``attempt`` until it returns something other than a retriable error code (or time runs out)."""
        backoff = RETRY_BACKOFF_S[0]
        while True:
            result = await attempt()
            if not isinstance(result, Retry):
                return result
            if self.left() <= backoff:
                raise Failed(f"{what} (gave up after {self.timeout_s:g} s)", result.code, result.message)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RETRY_BACKOFF_S[1])

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()  # a later command opens new connections (each command runs in its own loop)

    # -- list ---------------------------------------------------------------------------------------

    async def list(self) -> Table:
        try:
            brokers = self.brokers()
            listings = await asyncio.gather(*(self._list_one(b, address) for b, address in sorted(brokers.items())))
        finally:
            self.close()
        rows: list[tuple[str, ...]] = [
            (t.transactional_id, str(broker_id), str(t.producer_id), _state(t.transaction_state))
            for broker_id, states in zip(sorted(brokers), listings)
            for t in states
        ]
        return LIST_HEADERS, rows

    async def _list_one(self, broker_id: int, address: tuple[str, int]) -> tuple:
        async def attempt():
            response = await self.request(address, LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": []})
            code = int(response.error_code)
            if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                return Retry(code)
            if code:
                raise Failed(f"Failed to list transactions on broker {broker_id}", code)
            return response.transaction_states

        return await self.retrying(attempt, f"Failed to list transactions on broker {broker_id}")

    async def list_described(self) -> tuple[Rows, dict[str, tuple[str, ...]]]:
        """The list's rows and, per transactional id, its describe row: every broker's
        ListTransactions, then one DescribeTransactions per broker naming all the ids it listed
        (a broker lists the transactions it coordinates), over one set of connections. An id that
        ended or moved meanwhile, or a broker that stopped answering, just has no describe row."""
        try:
            brokers = self.brokers()
            listings = await asyncio.gather(*(self._list_one(b, address) for b, address in sorted(brokers.items())))
            rows: Rows = [
                (t.transactional_id, str(broker_id), str(t.producer_id), _state(t.transaction_state))
                for broker_id, states in zip(sorted(brokers), listings)
                for t in states
            ]
            ids = {b: [t.transactional_id for t in states] for b, states in zip(sorted(brokers), listings) if states}
            found = await asyncio.gather(*(self._describe_on(b, brokers[b], names) for b, names in ids.items()))
        finally:
            self.close()
        return rows, {row[1]: row for described in found for row in described}

    async def _describe_on(self, broker_id: int, address: tuple[str, int], ids: Sequence[str]) -> Rows:
        try:
            response = await self.request(address, DESCRIBE_TRANSACTIONS, {"transactional_ids": ids})
        except (ToolError, KafkaError):  # the list's rows still show them
            return []
        return [
            _describe_row(broker_id, s.transactional_id, s) for s in response.transaction_states if not s.error_code
        ]

    # -- describe -----------------------------------------------------------------------------------

    async def describe(self, transactional_id: str) -> Table:
        what = f"Failed to describe transaction state of transactional-id `{transactional_id}`"
        try:
            coordinator_id, state = await self.retrying(lambda: self._describe_once(transactional_id, what), what)
        finally:
            self.close()
        return DESCRIBE_HEADERS, [_describe_row(coordinator_id, transactional_id, state)]

    async def _describe_once(self, transactional_id: str, what: str):
        bootstrap = next(iter(self.brokers().values()))
        found = await self.request(
            bootstrap, FIND_COORDINATOR, {"key": transactional_id, "key_type": TRANSACTION_KEY_TYPE}
        )
        code = int(found.error_code)
        if code in COORDINATOR_MOVED:
            return Retry(code, found.error_message)
        if code:
            raise Failed(what, code, found.error_message)
        response = await self.request(
            (found.host, found.port), DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]}
        )
        state = response.transaction_states[0]
        code = int(state.error_code)
        if code in COORDINATOR_MOVED:
            return Retry(code)
        if code:
            raise Failed(what, code)
        return found.node_id, state

    # -- describe-producers ---------------------------------------------------------------------------

    async def describe_producers(self, topic: str, partition: int) -> Table:
        what = f"Failed to describe producers for partition {topic}-{partition} on leader"
        try:
            producers = await self.producers(topic, partition, what)
        finally:
            self.close()
        rows: list[tuple[str, ...]] = [
            (
                str(p.producer_id),
                str(p.producer_epoch),
                str(max(p.coordinator_epoch, -1)),
                str(p.last_sequence),
                str(p.last_timestamp),
                str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None",
            )
            for p in producers
        ]
        return PRODUCER_HEADERS, rows

    async def producers(self, topic: str, partition: int, what: str) -> tuple:
        async def attempt():
            leader, address = self.leader(topic, partition, what)
            if leader < 0:
                return Retry(ErrorCode.LEADER_NOT_AVAILABLE)
            response = await self.request(
                address, DESCRIBE_PRODUCERS, {"topics": [{"name": topic, "partition_indexes": [partition]}]}
            )
            result = response.topics[0].partitions[0]
            code = int(result.error_code)
            if code in LEADER_MOVED:
                return Retry(code, result.error_message)
            if code:
                raise Failed(what, code, result.error_message)
            return result.active_producers

        return await self.retrying(attempt, what)

    # -- abort ----------------------------------------------------------------------------------------

    async def abort(self, args: argparse.Namespace) -> None:
        topic, partition = args.topic, args.partition
        try:
            if args.start_offset is not None:
                producers = await self.producers(
                    topic, partition, f"Failed to validate producer state for partition {topic}-{partition}"
                )
                found = [p for p in producers if p.current_txn_start_offset == args.start_offset]
                if not found:
                    raise ToolError(
                        f"Could not find any open transactions starting at offset {args.start_offset} "
                        f"on partition {topic}-{partition}"
                    )
                producer_id, producer_epoch = found[0].producer_id, found[0].producer_epoch
                coordinator_epoch = found[0].coordinator_epoch
            else:
                producer_id, producer_epoch, coordinator_epoch = (
                    args.producer_id,
                    args.producer_epoch,
                    args.coordinator_epoch,
                )
            # A producer that never had a marker here reports -1; 0 is <= any coordinator's epoch (as Kafka).
            spec = (
                f"AbortTransactionSpec(topicPartition={topic}-{partition}, producerId={producer_id}, "
                f"producerEpoch={producer_epoch}, coordinatorEpoch={max(coordinator_epoch, 0)})"
            )
            await self.retrying(
                lambda: self._write_abort(
                    topic, partition, producer_id, producer_epoch, max(coordinator_epoch, 0), spec
                ),
                f"Failed to abort transaction {spec}",
            )
        finally:
            self.close()
        return None

    async def _write_abort(
        self, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int, spec: str
    ):
        leader, address = self.leader(topic, partition, f"Failed to abort transaction {spec}")
        if leader < 0:
            return Retry(ErrorCode.LEADER_NOT_AVAILABLE)
        marker = {
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "transaction_result": False,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}],
        }
        response = await self.request(address, WRITE_TXN_MARKERS, {"markers": [marker]})
        code = int(response.markers[0].topics[0].partitions[0].error_code)
        if code in LEADER_MOVED:
            return Retry(code)
        if code:
            raise Failed(f"Failed to abort transaction {spec}", code)
        return True


class Retry:
    """What an attempt returns for a retriable error code: ``retrying`` tries again after a backoff."""

    def __init__(self, code: int, message: str | None = None):
        self.code = code
        self.message = message


def _state(name: str) -> str:
    return name if name in KNOWN_STATES else "Unknown"
