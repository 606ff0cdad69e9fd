"""``df.write`` / ``df.writeStream`` ``.format("strom")``: Spark's Kafka sink over a Python data source.

Columns as in Spark's Kafka sink: ``value`` (string or binary, required), ``key`` (string or
binary), ``headers`` (array<struct<key:string,value:binary>>), ``topic`` (string) and
``partition`` (int), all optional; the ``topic`` option, when given, wins over the column.
``kafka.*`` options go to the producer. With ``value.format=avro`` (``key.format``) the column is
a struct written as Confluent-framed Avro, its schema registered in a Schema Registry
(``strom.spark.typed``). Batch writes need ``.mode("append")``: Spark refuses its
default ErrorIfExists mode for Python data sources, and Overwrite is rejected (a topic only grows).

**At least once** (``deliveryGuarantee=at-least-once``, the default, as Spark's Kafka sink).
Each task produces its rows with acks=all (unless ``kafka.acks`` says otherwise) and flushes
before it returns its commit message; a record the broker did not acknowledge fails the task, so
Spark retries the task or fails the batch, and a retried task or a micro-batch replayed after a
crash may write some records twice.

**Exactly once** (``deliveryGuarantee=exactly-once``), for readers with
``isolation.level=read_committed``. A micro-batch's output is made of (batch id, Spark partition)
pieces, and Spark replays a batch with the same pieces after a failure. Each task writes its
piece in one Kafka transaction whose ``transactional.id`` is ``<prefix>-<queryId>-<partition>``.
The query id survives restarts from the checkpoint, so a retried or restarted task gets the same
id, and its ``init_transactions`` fences every predecessor (a zombie's later produce or commit
fails) and finishes the predecessor's transaction (aborted if open, completed if committing).
In the same transaction the task commits ``batch id + 1`` as the offset of partition 0 of the
marker topic (``__strom_sink_markers``, created when the query starts, never written to) for the
sink group named like the transactional.id. After ``init_transactions`` the task reads that
offset (read_committed, so OffsetFetch asks require_stable) and writes nothing when its batch is
already there. Only producers of the same transactional.id commit to that group, and the fence
means none of them can commit between this read and this task's commit: so each piece is
committed once, also when the driver dies after the tasks committed but before Spark's commit
log records the batch (the replayed tasks find their markers and skip).

It assumes what Spark's replay assumes: the same batch id gives each Spark partition the same
rows (a deterministic query, and the same partitioning: do not change ``minPartitions`` or
``maxRecordsPerPartition`` of the source between a crash and the restart). A partition that was
empty writes no transaction and no marker.

Costs: a task's rows become visible to read_committed readers only when it commits, and each
non-empty task makes about ten more round trips (InitProducerId, OffsetFetch, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn and its markers). A task killed mid-transaction holds
back read_committed readers of the partitions it wrote (the last stable offset) until its replay
fences it or ``kafka.transaction.timeout.ms`` (default 60 s, Kafka's) passes; a task writing for
longer than that fails, so raise it for big micro-batches.

Batch writes (``df.write``) with exactly-once: each task is a transaction under a write id, so a
retried task attempt never duplicates. The write id is a new one per write (a re-run of a failed
job writes everything again), or the ``writeId`` option: a re-run with the same ``writeId``
writes only the partitions an earlier run did not commit. Inside ``foreachBatch`` the write id is
``<queryId>-<writeId>`` and the batch is the micro-batch id, so a foreachBatch write is exactly
once like the streaming sink; ``writeId`` is then required, to tell the writes of one batch apart,
and the written DataFrame's partitioning must be deterministic (``coalesce(n)`` makes it so).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructType

from strom.spark.options import (
    SinkDelivery,
    StromOptionError,
    client_config_from_options,
    connection_config,
)
from strom.spark.schema import HEADERS_TYPE
from strom.spark.typed import TypedOptions, column_encoder, writer_schema

log = logging.getLogger("strom.spark")

FLUSH_TIMEOUT_S = 300.0
TXN_CALL_TIMEOUT_S = 120.0  # each transactional call; librdkafka retries inside it
# How long past its timeout a transactional call may stay blocked before the task gives up on it.
# librdkafka 2.10 to at least 2.16 can block send_offsets_to_transaction for good when the sink
# group's coordinator broker has died and dropped out of Metadata (confluentinc/librdkafka#5511;
# its timeout is never checked, #5456). A blocked C call cannot be interrupted: the task fails and
# Spark retries it, and the retry's init_transactions fences the stuck producer.
TXN_CALL_OVERSTAY_S = 10.0
_DEFAULT_MESSAGE_TIMEOUT_MS = 120_000  # the Java client's delivery.timeout.ms default, not librdkafka's 300 s
_DEFAULT_PRODUCER: dict[str, str | int] = {
    "acks": "all",
    "linger.ms": 5,
    "message.timeout.ms": _DEFAULT_MESSAGE_TIMEOUT_MS,
}
_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000  # Kafka's transaction.timeout.ms default
# Spark's local properties in every task of a micro-batch (StreamExecution.QUERY_ID_KEY and
# MicroBatchExecution.BATCH_ID_KEY); foreachBatch jobs inherit them.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass
class ProducedCommitMessage(WriterCommitMessage):
    records: int
    seconds: float
    partition: int = -1  # exactly-once: the Spark partition, which names the sink group
    transactional: bool = False  # exactly-once: this task committed a transaction
    skipped: bool = False  # exactly-once: the batch was already committed for this partition


class _Producing:
    def __init__(self, options: dict, schema: StructType, overwrite: bool):
        opts = {str(k).lower(): v for k, v in options.items()}
        if overwrite:
            raise StromOptionError("the strom sink only appends; use mode('append')")
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise StromOptionError("option 'kafka.bootstrap.servers' is required")
        self.topic = opts.get("topic")
        fields = {f.name.lower(): f.dataType for f in schema.fields}
        self.typed = TypedOptions.parse(opts)
        typed = {side.side for side in self.typed.sides()}
        if "value" not in fields:
            raise StromOptionError("the strom sink needs a 'value' column")
        if "value" not in typed:
            _check(fields, "value", (StringType(), BinaryType()), required=True)
        if "key" not in typed:
            _check(fields, "key", (StringType(), BinaryType()))
        _check(fields, "topic", (StringType(),), required=self.topic is None, why="(or set the 'topic' option)")
        _check(fields, "partition", (IntegerType(),))
        _check(fields, "headers", (HEADERS_TYPE,))
        self.columns = set(fields)
        # the schema of each typed side (typed.WriterSchema): chosen, and registered, once, here on the driver
        self.avro = {
            side.side: writer_schema(self.typed, side, fields.get(side.side), self.topic)
            for side in self.typed.sides()
            if side.side in fields
        }
        self.delivery = SinkDelivery.parse(opts)
        client = client_config_from_options(opts)
        self.bootstrap = str(bootstrap)
        self.connection = {"bootstrap.servers": self.bootstrap, **connection_config(client)}
        defaults = dict(_DEFAULT_PRODUCER)
        if self.delivery.exactly_once:
            timeout = int(client.get("transaction.timeout.ms", _DEFAULT_TRANSACTION_TIMEOUT_MS))
            # librdkafka refuses message.timeout.ms > transaction.timeout.ms
            defaults.update(
                {"transaction.timeout.ms": timeout, "message.timeout.ms": min(_DEFAULT_MESSAGE_TIMEOUT_MS, timeout)}
            )
        self.config = {"bootstrap.servers": self.bootstrap, **defaults, **client}
        if self.delivery.exactly_once:
            # here, on the driver, once per query start or batch write: not in every task
            ensure_marker_topic(self.connection, self.delivery.marker_topic)

    # -- the rows ----------------------------------------------------------------------------
    def _produce_all(self, producer, batches) -> int:
        """Hand every row to ``producer`` and wait for the acknowledgements; raises on any failure."""
        failures: list[str] = []

        def delivered(err, msg):
            if err is not None and len(failures) < 5:
                failures.append(f"{msg.topic()}[{msg.partition()}]: {err}")

        count = 0
        for batch in batches:
            for topic, value, key, partition, headers in self._rows(batch):
                kwargs = {"key": key, "partition": partition, "on_delivery": delivered}
                if headers:
                    kwargs["headers"] = headers
                while True:
                    try:
                        producer.produce(topic, value, **kwargs)
                        break
                    except BufferError:  # local queue full: serve delivery reports, then retry
                        producer.poll(0.05)
                count += 1
                if failures:
                    break
            producer.poll(0)
            if failures:
                break
        remaining = producer.flush(FLUSH_TIMEOUT_S)
        if failures:
            raise RuntimeError(
                f"strom sink: delivery failed for {failures[0]} ({len(failures)} failure(s) seen, task fails)"
            )
        if remaining:
            raise RuntimeError(f"strom sink: {remaining} record(s) not acknowledged within {FLUSH_TIMEOUT_S:.0f}s")
        return count

    def write(self, iterator: Iterator) -> ProducedCommitMessage:
        if self.delivery.exactly_once:
            return self._write_exactly_once(iterator)
        from confluent_kafka import Producer

        started = time.monotonic()
        count = self._produce_all(Producer(self.config), iterator)
        return ProducedCommitMessage(records=count, seconds=time.monotonic() - started)

    # -- exactly once ------------------------------------------------------------------------
    def _identity(self, context) -> tuple[str, int]:
        """(write id, batch id) of this task: what its transactional.id and marker are made of."""
        raise NotImplementedError

    def _write_exactly_once(self, iterator: Iterator) -> ProducedCommitMessage:
        from confluent_kafka import KafkaException, Producer, TopicPartition
        from pyspark import TaskContext

        started = time.monotonic()
        context = TaskContext.get()
        assert context is not None  # write() runs in a Spark task
        partition = context.partitionId()
        write_id, batch = self._identity(context)
        iterator = iter(iterator)
        first = next((b for b in iterator if b.num_rows), None)
        if first is None:
            # Nothing to write, so nothing to duplicate: no transaction, no marker. A replay of a
            # deterministic batch finds this partition empty again.
            return ProducedCommitMessage(0, time.monotonic() - started, partition)
        txn_id = self.delivery.transactional_id(write_id, partition)
        producer = Producer({**self.config, "transactional.id": txn_id})
        stage = "init_transactions"
        try:
            # Fences every earlier producer of this id and completes its transaction (aborted if
            # open, finished if it was committing): from here on nobody else can move the marker.
            producer.init_transactions(TXN_CALL_TIMEOUT_S)
            stage = "reading the marker"
            next_batch, group = self._marker(txn_id)
            if next_batch > batch:
                for _ in iterator:  # the rows of a partition are Spark's to hand over in full
                    pass
                log.info(
                    "strom sink: %s committed batch %d before (marker %d); writing nothing", txn_id, batch, next_batch
                )
                return ProducedCommitMessage(0, time.monotonic() - started, partition, skipped=True)
            stage = "producing"
            producer.begin_transaction()
            count = self._produce_all(producer, itertools.chain([first], iterator))
            stage = "committing"
            marker = TopicPartition(
                self.delivery.marker_topic, 0, batch + 1, metadata=json.dumps({"batch": batch, "records": count})
            )
            bounded_call(producer.send_offsets_to_transaction, [marker], group, TXN_CALL_TIMEOUT_S)
            producer.commit_transaction(TXN_CALL_TIMEOUT_S)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                _abort_quietly(producer)
            raise RuntimeError(
                f"strom sink: transaction {txn_id} (batch {batch}) failed while {stage}: {error}. "
                "Spark retries the task; a fenced producer means a newer attempt of the same task "
                "took over; a transaction that ran past kafka.transaction.timeout.ms "
                f"({self.config['transaction.timeout.ms']} ms) is aborted by the coordinator"
            ) from None
        except RuntimeError:  # a record was not delivered, or a row was unusable
            _abort_quietly(producer)
            raise
        return ProducedCommitMessage(count, time.monotonic() - started, partition, transactional=True)

    def _marker(self, txn_id: str):
        """(next batch to write, group metadata) of the sink group ``txn_id``.

        read_committed makes OffsetFetch ask require_stable, so an offset still pending in a
        transaction is never taken for the committed one. The group is never joined: the
        metadata (generation -1) is what a simple, unmanaged group commits with.
        """
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(
            {**self.connection, "group.id": txn_id, "enable.auto.commit": False, "isolation.level": "read_committed"}
        )
        try:
            (committed,) = consumer.committed(
                [TopicPartition(self.delivery.marker_topic, 0)], timeout=TXN_CALL_TIMEOUT_S
            )
            if committed.error is not None:
                raise KafkaException(committed.error)
            return committed.offset, consumer.consumer_group_metadata()  # no offset: OFFSET_INVALID (-1001)
        finally:
            consumer.close()

    # -- columns -----------------------------------------------------------------------------
    def _rows(self, batch):
        import pyarrow as pa

        n = batch.num_rows
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name):
            if name not in names:
                return None
            col = batch.column(names[name])
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                col = col.cast(pa.binary())
            return col.to_pylist()

        values = None if "value" in self.avro else column("value")
        keys = (None if "key" in self.avro else column("key")) or [None] * n
        for side, written in self.avro.items():
            form = self.typed.key if side == "key" else self.typed.value
            encode = column_encoder(form, written)
            try:
                encoded = encode(batch.column(names[side]))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise RuntimeError(
                    f"strom sink: a {side} does not fit the {form.format} schema {written.schema_id}: {exc}"
                ) from None
            if side == "value":
                values = encoded
            else:
                keys = encoded
        if self.topic is not None:
            topics = [self.topic] * n
        else:
            topics = [t.decode() if t is not None else None for t in column("topic")]
        partitions = [-1 if p is None else p for p in (column("partition") or [None] * n)]
        headers = batch.column(names["headers"]).to_pylist() if "headers" in names else [None] * n
        assert values is not None  # the value column is required, typed or not
        for i in range(n):
            if topics[i] is None:
                raise RuntimeError("strom sink: a row has a null topic and no 'topic' option is set")
            h = headers[i]
            yield (topics[i], values[i], keys[i], partitions[i], [(e["key"], e["value"]) for e in h] if h else None)


def _abort_quietly(producer) -> None:
    """Abort after a failure, so the partitions' LSO moves on now rather than at the timeout."""
    try:
        producer.abort_transaction(TXN_CALL_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the original failure is what the task reports
        log.warning("strom sink: abort after a failed write failed too: %s", exc)


MARKER_TOPIC_TIMEOUT_S = 30.0


def ensure_marker_topic(connection: dict, topic: str) -> None:
    """Create the one-partition marker topic if it is missing, and wait until metadata shows it.

    Kafka keeps committed offsets only for partitions that exist (TxnOffsetCommit answers
    UNKNOWN_TOPIC_OR_PARTITION otherwise), so the markers need a real partition; nothing is ever
    produced to it. Two queries may create it at once: TOPIC_ALREADY_EXISTS is success.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(connection)

    def exists() -> bool:
        metadata = admin.list_topics(topic=topic, timeout=MARKER_TOPIC_TIMEOUT_S).topics.get(topic)
        return metadata is not None and metadata.error is None and bool(metadata.partitions)

    if exists():
        return
    try:
        admin.create_topics([NewTopic(topic, 1, -1)], request_timeout=MARKER_TOPIC_TIMEOUT_S)[topic].result(
            MARKER_TOPIC_TIMEOUT_S
        )
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise StromOptionError(
                f"strom sink: cannot create the marker topic {topic!r}: {exc.args[0]}. "
                "Create it (one partition), or name another with the markerTopic option"
            ) from None
    deadline = time.monotonic() + MARKER_TOPIC_TIMEOUT_S
    while not exists():
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"strom sink: the marker topic {topic!r} was created but metadata does "
                f"not show it after {MARKER_TOPIC_TIMEOUT_S:.0f}s"
            )
        time.sleep(0.1)


def _check(fields: dict, name: str, allowed: tuple, required: bool = False, why: str = "") -> None:
    if name not in fields:
        if required:
            raise StromOptionError(f"the strom sink needs a {name!r} column {why}".rstrip())
        return
    if fields[name].simpleString() not in {t.simpleString() for t in allowed}:  # nullability aside
        names = " or ".join(t.simpleString() for t in allowed)
        raise StromOptionError(f"column {name!r} must be {names}, got {fields[name].simpleString()}")


def _summary(messages: list) -> tuple[int, int, int]:
    """(records, partitions committed in a transaction, partitions found already committed)."""
    done = [m for m in messages if m is not None]
    return (sum(m.records for m in done), sum(1 for m in done if m.transactional), sum(1 for m in done if m.skipped))


class StromBatchWriter(_Producing, DataSourceArrowWriter):
    def __init__(self, options: dict, schema: StructType, overwrite: bool):
        super().__init__(options, schema, overwrite)
        # made on the driver and pickled into every task: the same for all attempts of this write
        self.generated_write_id = uuid.uuid4().hex

    def _identity(self, context) -> tuple[str, int]:
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        if query_id:  # a write inside foreachBatch: exactly once per micro-batch
            if self.delivery.write_id is None:
                raise StromOptionError(
                    "deliveryGuarantee=exactly-once inside foreachBatch needs option 'writeId', a name "
                    "unique among the strom writes of the batch function (e.g. 'stats')"
                )
            return f"{query_id}-{self.delivery.write_id}", int(context.getLocalProperty(BATCH_ID_PROPERTY))
        return self.delivery.write_id or self.generated_write_id, 0

    def commit(self, messages: list) -> None:
        total, transactions, skipped = _summary(messages)
        log.info(
            "strom sink: %d records acknowledged (%d transactions, %d partitions already written)",
            total,
            transactions,
            skipped,
        )
        self._forget_generated_groups(messages)

    def abort(self, messages: list) -> None:
        if self.delivery.exactly_once:
            log.warning("strom sink: job aborted; transactions of tasks that committed stay committed")
        else:
            log.warning("strom sink: job aborted; records already acknowledged stay in the topic (at-least-once)")
        self._forget_generated_groups(messages)

    def _forget_generated_groups(self, messages: list) -> None:
        """Delete the sink groups of a write with a generated id: nothing can run under that id again.

        Inside foreachBatch or with a writeId the markers are what a replay or re-run checks, so
        they stay. Transactional ids cannot be deleted by a client; the coordinator expires them
        (transactional.id.expiration.ms).
        """
        if not self.delivery.exactly_once or self.delivery.write_id is not None:
            return
        groups = [
            self.delivery.transactional_id(self.generated_write_id, m.partition)
            for m in messages
            if m is not None and m.transactional
        ]
        if not groups:
            return
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.connection)  # held until the futures complete: its end would orphan them
        try:
            for future in admin.delete_consumer_groups(groups, request_timeout=30).values():
                future.result(30)
        except Exception as exc:  # noqa: BLE001 - leftover groups are clutter, not an error
            log.warning("strom sink: could not delete the sink groups of write %s: %r", self.generated_write_id, exc)


class StromStreamWriter(_Producing, DataSourceStreamArrowWriter):
    def _identity(self, context) -> tuple[str, int]:
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch = context.getLocalProperty(BATCH_ID_PROPERTY)
        if not query_id or batch is None:
            raise RuntimeError(
                "strom sink: exactly-once needs Spark's micro-batch execution (no query "
                f"id or batch id in the task's local properties {QUERY_ID_PROPERTY!r}, "
                f"{BATCH_ID_PROPERTY!r})"
            )
        return query_id, int(batch)

    def commit(self, messages: list, batchId: int) -> None:
        total, transactions, skipped = _summary(messages)
        if self.delivery.exactly_once:
            log.info(
                "strom sink: batch %d, %d records committed in %d transactions; %d partitions had "
                "committed this batch before (a replay)",
                batchId,
                total,
                transactions,
                skipped,
            )
        else:
            log.info("strom sink: batch %d, %d records acknowledged", batchId, total)

    def abort(self, messages: list, batchId: int) -> None:
        if self.delivery.exactly_once:
            log.warning(
                "strom sink: batch %d aborted; Spark replays it, and partitions that committed "
                "find their marker and write nothing",
                batchId,
            )
        else:
            log.warning("strom sink: batch %d aborted; acknowledged records stay (at-least-once)", batchId)


def bounded_call(call, *args, timeout_s: float = TXN_CALL_TIMEOUT_S + TXN_CALL_OVERSTAY_S):
    """``call(*args)`` on a thread of its own; TimeoutError if it has not returned in ``timeout_s``.

    The thread is left blocked (it cannot be stopped), and its producer is not touched again (an
    abort would queue behind the stuck call): Spark's retry of the task fences it with
    init_transactions.
    """
    outcome: dict = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["result"] = call(*args)
        except BaseException as exc:  # handed to the caller's thread as it is
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="strom-sink-txn-call", daemon=True).start()
    if not done.wait(timeout_s):
        raise TimeoutError(
            f"strom sink: {getattr(call, '__name__', 'a transactional call')} did not return within "
            f"{timeout_s:.0f} s (librdkafka#5511: a transactional producer can wait forever for a group "
            "coordinator that has left the cluster)"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
