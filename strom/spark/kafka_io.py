"""Client side of the Spark source and sink: metadata and offsets on the driver, reads on executors.

Driver: ``Admin`` lists the topics a subscription matches and their earliest/latest offsets in
one batched ListOffsets per call. Executors: ``read_range`` reads one topic-partition's offset
range and yields pyarrow RecordBatches of up to ``READ_BATCH`` rows, in one of two ways:

* over PLAINTEXT (the default), with Fetch requests to the leader, decoding each record batch
  into columns in bulk (``strom.spark.fetch_reader``, ``strom.spark.batch_columns``): about
  0.07 µs a record of 100 bytes when records have one layout, 0.2 µs when their sizes vary,
  for read_uncommitted and read_committed alike;
* with SSL/SASL settings, through a confluent-kafka consumer (assign + seek, never a consumer
  group), column by column over its Message objects: about 2.5 µs a record, but every security
  mechanism librdkafka has (and its own read_committed).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

from strom.spark.options import (
    EARLIEST,
    LATEST,
    DataLossError,
    OffsetRange,
    Offsets,
    SourceOptions,
    TopicPartitionKey,
    connection_config,
)

log = logging.getLogger("strom.spark")

READ_BATCH = 20_000
METADATA_TIMEOUT_S = 30.0
CONSUMER_POOL_SIZE = 4

# librdkafka settings the source depends on; user kafka.* options come after and may override
# tuning keys, but not these.
_FIXED_CONSUMER = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,  # ends a range whose last offsets are control records
    "auto.offset.reset": "error",  # a deleted offset must surface as data loss, not a silent jump
}
_DEFAULT_CONSUMER = {
    "isolation.level": "read_uncommitted",  # what Spark's Kafka source (Java client default) reads
    "fetch.message.max.bytes": 4 * 1024 * 1024,
    "fetch.wait.max.ms": 100,
    # Keep fetching ahead while Python turns the previous batch into Arrow. With librdkafka's
    # defaults (100k messages, then a 1 s fetch.queue.backoff.ms pause) a 500k-record range took
    # 2.5x longer here, mostly waiting.
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 131072,
    "fetch.queue.backoff.ms": 10,
}


def consumer_config(opts: SourceOptions) -> dict:
    return {
        "bootstrap.servers": opts.bootstrap_servers,
        "group.id": f"strom-spark-{uuid.uuid4().hex[:12]}",  # required by the client; never joined
        **_DEFAULT_CONSUMER,
        **opts.client_config,
        **_FIXED_CONSUMER,
    }


class Admin:
    """Topic metadata and offsets for the driver, over a client shared by the readers of a process."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        # only the connection properties: the admin client would warn about consumer-only keys
        config = {"bootstrap.servers": opts.bootstrap_servers, **connection_config(opts.client_config)}
        self.isolation = opts.client_config.get("isolation.level", "read_uncommitted")
        self._admin = _shared_admin_client(config)

    def partition_counts(self) -> dict[str, int]:
        metadata = self._admin.list_topics(timeout=METADATA_TIMEOUT_S)
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None and t.partitions}

    def topic_id(self, topic: str) -> str | None:
        """The topic's id (KIP-516) as 32 hex digits, as the brokers record it in its Iceberg table
        (None: not told, or no such topic)."""
        from confluent_kafka import KafkaException, TopicCollection

        try:
            found = self._admin.describe_topics(TopicCollection([topic]))[topic].result(METADATA_TIMEOUT_S)
        except KafkaException:
            return None
        uuid = getattr(found, "topic_id", None)
        if uuid is None:
            return None
        mask = (1 << 64) - 1
        high, low = uuid.get_most_significant_bits() & mask, uuid.get_least_significant_bits() & mask
        return f"{high:016x}{low:016x}" if high or low else None

    def subscribed(self) -> list[TopicPartitionKey]:
        return self.opts.subscription.select(self.partition_counts())

    def offsets(self, tps: list[TopicPartitionKey], which: int) -> Offsets:
        """Earliest (``EARLIEST``) or latest (``LATEST``) offset of each topic-partition."""
        if not tps:
            return {}
        from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.earliest() if which == EARLIEST else OffsetSpec.latest()
        level = IsolationLevel.READ_COMMITTED if self.isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        found: Offsets = {}
        wanted = list(tps)
        while wanted:
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): spec for t, p in wanted},
                isolation_level=level,
                request_timeout=max(1.0, deadline - time.monotonic()),
            )
            wanted = []
            for tp, future in futures.items():
                try:
                    found[(tp.topic, tp.partition)] = future.result().offset
                except KafkaException as exc:
                    # a leader elected a moment ago, its high watermark still catching up (KIP-207):
                    # asked again, as Spark's Kafka source retries its offset queries
                    if exc.args[0].code() != KafkaError.OFFSET_NOT_AVAILABLE or time.monotonic() >= deadline:
                        raise
                    wanted.append((tp.topic, tp.partition))
            if wanted:
                time.sleep(0.1)
        return found

    def resolve(
        self,
        spec: str | dict,
        tps: list[TopicPartitionKey],
        earliest: Offsets | None = None,
        latest: Offsets | None = None,
        unspecified: int = EARLIEST,
    ) -> Offsets:
        """A startingOffsets/endingOffsets spec as concrete offsets for ``tps``.

        In a JSON spec -2 is earliest and -1 latest; partitions it does not name get
        ``unspecified`` (earliest for a start, latest for an end).
        """
        if earliest is None:
            earliest = self.offsets(tps, EARLIEST)
        if spec == "earliest":
            return dict(earliest)
        if latest is None:
            latest = self.offsets(tps, LATEST)
        if spec == "latest":
            return dict(latest)
        assert isinstance(spec, dict), spec  # the options parser gives "earliest", "latest" or a dict
        unknown = sorted(tp for tp in spec if tp not in earliest)
        if unknown:
            raise ValueError(f"offsets given for topic-partitions that do not exist or are not subscribed: {unknown}")
        out = {}
        for tp in tps:
            wanted = spec.get(tp, unspecified)
            out[tp] = earliest[tp] if wanted == EARLIEST else latest[tp] if wanted == LATEST else wanted
        return out


def data_loss(opts: SourceOptions, message: str) -> None:
    """Raise if failOnDataLoss (the default), else warn: the query skips what is gone."""
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer "
            "available in the broker (deleted by retention, or the topic was deleted). "
            "If you want the query to skip it and go on, set the source option "
            "failOnDataLoss to false."
        )
    log.warning("%s; skipping ahead because failOnDataLoss=false", message)


# -- executors -----------------------------------------------------------------------------

# Consumers kept between tasks of one Python worker (Spark reuses workers): a new consumer costs
# a connection, metadata and a ListOffsets round trip before the first fetch. Idle ones are
# closed after POOL_IDLE_S by a daemon thread, so a worker does not hold connections forever.
POOL_IDLE_S = 30.0
_pool: dict[tuple, list] = {}
_pool_lock = threading.Lock()
_reaper: threading.Thread | None = None


# The admin client of the last reader, kept for the next queries one Python process plans
# (Spark's driver-side planning worker plans every batch query): a new librdkafka client costs
# its threads, a connection and, one time in two, a 50 ms wait for its first metadata. One is
# kept, for one connection config; it is dropped when idle for POOL_IDLE_S.
_admin_client: list = []  # [config key, client, last handed out], or empty


def _shared_admin_client(config: dict):
    from confluent_kafka.admin import AdminClient

    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    with _pool_lock:
        if not _admin_client or _admin_client[0] != key:
            _admin_client[:] = [key, AdminClient(config), 0.0]  # the previous one lives on in its readers
            _start_reaper()
        _admin_client[2] = time.monotonic()
        return _admin_client[1]


def _start_reaper() -> None:
    """Start the thread that closes idle consumers and drops idle admin clients (``_pool_lock`` held)."""
    global _reaper
    if _reaper is None:
        _reaper = threading.Thread(target=_reap, name="strom-consumer-reaper", daemon=True)
        _reaper.start()


def _acquire(config: dict):
    from confluent_kafka import Consumer

    key = tuple(sorted((k, str(v)) for k, v in config.items() if k != "group.id"))
    with _pool_lock:
        idle = _pool.get(key)
        if idle:
            return key, idle.pop()[0]
    return key, Consumer(config)


def _release(key: tuple, consumer, healthy: bool) -> None:
    try:
        consumer.unassign()
    except Exception:  # noqa: BLE001 - a broken consumer is closed below
        healthy = False
    with _pool_lock:
        idle = _pool.setdefault(key, [])
        if healthy and len(idle) < CONSUMER_POOL_SIZE:
            idle.append((consumer, time.monotonic()))
            consumer = None
            _start_reaper()
    if consumer is not None:
        consumer.close()


def _reap() -> None:
    while True:
        time.sleep(POOL_IDLE_S / 3)
        cutoff = time.monotonic() - POOL_IDLE_S
        expired = []
        dropped = []
        with _pool_lock:
            for key, idle in _pool.items():
                expired += [c for c, since in idle if since < cutoff]
                idle[:] = [(c, since) for c, since in idle if since >= cutoff]
            if _admin_client and _admin_client[2] < cutoff:
                dropped.append(_admin_client[1])  # a reader still holding it keeps it alive
                _admin_client.clear()
        for consumer in expired:
            consumer.close()
        dropped.clear()  # outside the lock: destroying a librdkafka client waits for its threads


def read_range(opts: SourceOptions, r: OffsetRange, arrow_schema) -> Iterator:
    """The records of ``r`` as pyarrow RecordBatches of ``arrow_schema``; bounded by ``r.end``."""
    if needs_client_library(opts.client_config):
        return _read_with_consumer(opts, r, arrow_schema)
    return _read_with_fetch(opts, r, arrow_schema)


def needs_client_library(client_config: dict) -> bool:
    """Whether reads must go through librdkafka: only for TLS and SASL, which the Fetch reader lacks."""
    protocol = str(client_config.get("security.protocol", "plaintext")).lower()
    return protocol != "plaintext" or any(k.startswith(("sasl.", "ssl.")) for k in client_config)


# Kafka batches with fewer records than this are decoded record by record: the bulk decoder's
# fixed cost (a few dozen numpy calls) is more than a per-record decode of a handful of records.
_BULK_MIN_RECORDS = 32


def _read_with_fetch(opts: SourceOptions, r: OffsetRange, arrow_schema) -> Iterator:
    from strom.protocol.records import decode_batch_records
    from strom.spark.batch_columns import decode_fields
    from strom.spark.fetch_reader import read_batches

    rows = _RowAccumulator(r.topic, r.partition, arrow_schema, opts.include_headers)
    for records, batches in read_batches(opts, r, lambda message: data_loss(opts, message)):
        for header, start, end in batches:
            if header.records_count >= _BULK_MIN_RECORDS:
                rows.add_fields(decode_fields(records, header, opts.include_headers), header, start, end)
            else:
                rows.add_records(decode_batch_records(records, header), header, start, end)
            if rows.count >= READ_BATCH:
                yield rows.take()
        # the next fetch overwrites `records`, which the gathered rows' keys and values are still in
        if rows.count >= READ_BATCH // 4:
            yield rows.take()
        else:
            rows.detach()
    if rows.count:
        yield rows.take()


class _PartitionBatches:
    """The source schema filled for one topic-partition: constant columns and the final assembly."""

    def __init__(self, topic: str, partition: int, arrow_schema, include_headers: bool):
        import pyarrow as pa

        self.topic = pa.scalar(topic, pa.string())
        self.partition = pa.scalar(partition, pa.int32())
        self.schema = arrow_schema
        self.timestamp_type = arrow_schema.field("timestamp").type
        self.headers_type = arrow_schema.field("headers").type if include_headers else None
        self._topics = self._partitions = pa.array([])

    def record_batch(self, keys, values, offsets, millis, timestamp_types, headers):
        """One RecordBatch from per-record columns (Arrow or numpy); timestamps in milliseconds."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(offsets)
        if len(self._topics) < n:
            self._topics, self._partitions = pa.repeat(self.topic, n), pa.repeat(self.partition, n)
        columns = [
            keys,
            values,
            self._topics.slice(0, n),  # the same value in every row: made once, sliced from the start
            self._partitions.slice(0, n),
            pa.array(offsets),
            # Spark's timestamp is microseconds UTC
            pc.multiply(pa.array(millis), 1000).cast(self.timestamp_type),
            pa.array(timestamp_types),
        ]
        if self.headers_type is not None:
            # a record without headers gets null, as in Spark's Kafka source
            if any(headers):
                columns.append(pa.array([h or None for h in headers], self.headers_type))
            else:  # none has any (the usual case): no Python object per record
                columns.append(pa.nulls(n, self.headers_type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


class _Span(NamedTuple):
    """Keys or values of some records, not yet copied out of the buffer they were fetched into."""

    source: object
    starts: Any
    lengths: Any


class _RowAccumulator(_PartitionBatches):
    """Decoded records of one topic-partition, gathered into RecordBatches of about READ_BATCH rows.

    Bulk-decoded batches keep their keys and values in the Fetch response until ``take``, which
    copies those of one response out with one ``cut``, straight into the RecordBatch's arrays;
    ``detach`` copies them out early when the response buffer is about to be reused. Small
    batches' records wait in lists until the next bulk batch or the emit, so one Arrow
    conversion covers many of them.
    """

    def __init__(self, topic: str, partition: int, arrow_schema, include_headers: bool):
        super().__init__(topic, partition, arrow_schema, include_headers)
        self.count = 0
        # per column, the pieces gathered so far: numpy arrays, and Arrow arrays or spans for keys and values
        self._offsets: list = []
        self._timestamps: list = []
        self._keys: list = []
        self._values: list = []
        self._types: list = []  # Spark's timestamp types
        self._headers: list = []
        self._small: list[list] = [[], [], [], [], [], []]

    def add_fields(self, fields, header, start: int, end: int) -> None:
        import numpy as np

        self._close_small_run()
        offsets, timestamps = fields.offsets, fields.timestamps
        key_start, key_length = fields.key_start, fields.key_length
        value_start, value_length, headers = fields.value_start, fields.value_length, fields.headers
        keep = (offsets >= start) & (offsets < end)
        if not keep.all():
            offsets, timestamps = offsets[keep], timestamps[keep]
            key_start, key_length = key_start[keep], key_length[keep]
            value_start, value_length = value_start[keep], value_length[keep]
            if headers is not None:
                headers = [h for h, k in zip(headers, keep) if k]
        n = len(offsets)
        if n:
            self._offsets.append(offsets)
            self._timestamps.append(timestamps)
            self._keys.append(_Span(fields.source, key_start, key_length))
            self._values.append(_Span(fields.source, value_start, value_length))
            self._types.append(np.full(n, 1 if header.timestamp_type else 0, np.int32))
            if headers is not None:
                self._headers += headers
            self.count += n

    def add_records(self, records, header, start: int, end: int) -> None:
        offsets, timestamps, keys, values, types, headers = self._small
        spark_type = 1 if header.timestamp_type else 0  # Spark: 0 CreateTime, 1 LogAppendTime
        for record in records:
            if start <= record.offset < end:
                offsets.append(record.offset)
                timestamps.append(record.timestamp)
                keys.append(record.key)
                values.append(record.value)
                types.append(spark_type)
                headers.append(record.headers)
                self.count += 1

    def _close_small_run(self) -> None:
        offsets, timestamps, keys, values, types, headers = self._small
        if not offsets:
            return
        import numpy as np
        import pyarrow as pa

        self._offsets.append(np.array(offsets, np.int64))
        self._timestamps.append(np.array(timestamps, np.int64))
        self._keys.append(pa.array(keys, pa.binary()))
        self._values.append(pa.array(values, pa.binary()))
        self._types.append(np.array(types, np.int32))
        if self.headers_type is not None:
            self._headers += headers
        self._small = [[], [], [], [], [], []]

    def detach(self) -> None:
        """Copy the gathered keys and values out of the Fetch response they point into."""
        self._keys = [_binary_column(self._keys)] if self._keys else []
        self._values = [_binary_column(self._values)] if self._values else []

    def take(self):
        """Everything gathered so far as one RecordBatch of the source schema."""
        self._close_small_run()
        batch = self.record_batch(
            _binary_column(self._keys),
            _binary_column(self._values),
            _numpy_column(self._offsets),
            _numpy_column(self._timestamps),
            _numpy_column(self._types),
            self._headers if self.headers_type is not None else None,
        )
        self._offsets, self._timestamps, self._keys, self._values, self._types, self._headers = [], [], [], [], [], []
        self.count = 0
        return batch


def _numpy_column(pieces: list):
    import numpy as np

    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


def _binary_column(pieces: list):
    """One Arrow binary array of ``pieces`` (Arrow arrays, and spans cut out of their buffers).

    Consecutive spans of one buffer are cut together, so the keys or values of a Fetch response
    are copied once, into the array handed on; a single piece is not copied again.
    """
    import numpy as np
    import pyarrow as pa

    from strom.spark.batch_columns import cut

    arrays = []
    group: list[_Span] = []
    for piece in [*pieces, None]:
        if group and not (isinstance(piece, _Span) and piece.source is group[0].source):
            starts = group[0].starts if len(group) == 1 else np.concatenate([g.starts for g in group])
            lengths = group[0].lengths if len(group) == 1 else np.concatenate([g.lengths for g in group])
            arrays.append(cut(group[0].source, starts, lengths))
            group = []
        if isinstance(piece, _Span):
            group.append(piece)
        elif piece is not None:
            arrays.append(piece)
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _read_with_consumer(opts: SourceOptions, r: OffsetRange, arrow_schema) -> Iterator:
    from confluent_kafka import KafkaError, Message, TopicPartition

    key, consumer = _acquire(consumer_config(opts))
    healthy = False
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(r.topic, r.partition), timeout=METADATA_TIMEOUT_S, cached=False
        )
        start, end = r.start, r.end
        if start < low:
            data_loss(
                opts,
                f"Offsets {start}..{min(low, end) - 1} of {r.topic}-{r.partition} were deleted "
                f"(earliest available offset is {low})",
            )
            start = low
        if high < end:
            data_loss(opts, f"{r.topic}-{r.partition} ends at offset {high}, before the planned end {end}")
            end = high
        if start >= end:
            healthy = True
            return
        consumer.assign([TopicPartition(r.topic, r.partition, start)])
        position = start
        deadline = time.monotonic() + opts.poll_timeout_s
        build = _BatchBuilder(r.topic, r.partition, arrow_schema, opts.include_headers)
        while position < end:
            msgs = consumer.consume(min(READ_BATCH, end - position), 1.0)
            if not msgs:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"no records from {r.topic}-{r.partition} at offset {position} for "
                        f"{opts.poll_timeout_s:.0f}s (kafkaConsumer.pollTimeoutMs); "
                        f"range {start}..{end}"
                    )
                continue
            deadline = time.monotonic() + opts.poll_timeout_s
            good = msgs
            finished = False
            if any(map(Message.error, msgs)):
                errors = [m for m in msgs if m.error() is not None]
                good = [m for m in msgs if m.error() is None]
                for m in errors:
                    err = m.error()
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        finished = True  # at the high watermark, which was >= end when planned
                    elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, _ = consumer.get_watermark_offsets(
                            TopicPartition(r.topic, r.partition), timeout=METADATA_TIMEOUT_S, cached=False
                        )
                        data_loss(
                            opts,
                            f"Offset {position} of {r.topic}-{r.partition} was deleted while "
                            f"reading (earliest available offset is now {low})",
                        )
                        if low >= end:
                            finished = True
                        else:
                            consumer.assign([TopicPartition(r.topic, r.partition, max(low, position))])
                            position = max(low, position)
                    elif code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        data_loss(opts, f"{r.topic}-{r.partition} disappeared while reading at offset {position}")
                        finished = True
                    elif err.fatal() or (code >= 0 and not err.retriable()):
                        raise RuntimeError(f"reading {r.topic}-{r.partition} at offset {position}: {err}")
                    # other local errors (transport, brokers down) are retried by the client;
                    # kafkaConsumer.pollTimeoutMs bounds how long this task waits for progress
            if good:
                if good[-1].offset() >= end:  # past a gap (compaction, control records)
                    good = [m for m in good if m.offset() < end]
                    finished = True
                if good:
                    position = good[-1].offset() + 1
                    yield build(good)
            if finished:
                break
        healthy = True
    finally:
        _release(key, consumer, healthy)


class _BatchBuilder(_PartitionBatches):
    """Messages of one topic-partition → one RecordBatch of the source schema.

    Per record this costs about 0.5 µs of Python/C calls; the dearest is ``Message.timestamp``
    (a tuple per call). ``map`` over the unbound C methods avoids a Python frame per element,
    and contiguous offsets are an ``arange``.
    """

    def __call__(self, msgs: list):
        import numpy as np
        import pyarrow as pa
        from confluent_kafka import Message

        n = len(msgs)
        first, last = msgs[0].offset(), msgs[-1].offset()
        if last - first == n - 1:  # no gaps (no compaction or control records in this batch)
            offsets = np.arange(first, last + 1, dtype=np.int64)
        else:
            offsets = np.fromiter(map(Message.offset, msgs), np.int64, n)
        stamps = list(map(Message.timestamp, msgs))
        return self.record_batch(
            pa.array(list(map(Message.key, msgs)), pa.binary()),
            pa.array(list(map(Message.value, msgs)), pa.binary()),
            offsets,
            np.fromiter((t[1] for t in stamps), np.int64, n),  # librdkafka reports milliseconds
            # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Spark: -1, 0, 1
            np.fromiter((t[0] for t in stamps), np.int32, n) - 1,
            list(map(Message.headers, msgs)) if self.headers_type is not None else None,
        )
