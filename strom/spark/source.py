"""``spark.read`` / ``spark.readStream`` ``.format("strom")``: Spark's Kafka source over a Python data source.

Options and columns are those of Spark's Kafka source (``kafka.bootstrap.servers``, ``subscribe``,
``subscribePattern``, ``assign``, ``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``,
``minPartitions``, ``maxRecordsPerPartition``, ``failOnDataLoss``, ``includeHeaders``,
``kafkaConsumer.pollTimeoutMs`` and ``kafka.*`` client properties). The driver plans one input
partition per topic-partition offset range (more with minPartitions); executors read their range
with ``strom.spark.kafka_io.read_range``. The streaming offsets are the JSON Spark's Kafka source
checkpoints, ``{"topic": {"0": 23}}``, so the offset log reads the same.

With ``value.format=avro`` (``key.format``) and ``schema.registry.url`` the value (key) column is
the decoded record, typed from the registered schema; ``strom.spark.typed`` has those options.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from strom.spark.options import (
    EARLIEST,
    LATEST,
    OffsetRange,
    Offsets,
    SourceOptions,
    StromOptionError,
    Subscription,
    _parse_assign,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from strom.spark.schema import kafka_schema

if TYPE_CHECKING:
    from strom.spark.kafka_io import Admin
    from strom.spark.typed import TypedOptions

log = logging.getLogger("strom.spark")


class KafkaInputPartition(InputPartition):
    """One offset range of one topic-partition; what a Spark task reads."""

    def __init__(self, r: OffsetRange):
        super().__init__(r)
        self.range = r


class StromDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "strom"

    def schema(self) -> StructType:
        """Spark's Kafka columns; with ``value.format=avro`` (``key.format``) the decoded record's
        type, resolved here, on the driver, once per query (``strom.spark.typed``)."""
        from strom.spark.typed import TypedOptions, source_schema

        options = {str(k).lower(): v for k, v in dict(self.options).items()}
        include = str(options.get("includeheaders", "false")).strip().lower() == "true"
        base = kafka_schema(include)
        typed = TypedOptions.parse(options)
        if not typed.typed:
            return base
        return source_schema(base, typed, _named_topics(options))

    def reader(self, schema: StructType) -> StromBatchReader:
        return StromBatchReader(SourceOptions.parse(dict(self.options), streaming=False), schema, dict(self.options))

    def streamReader(self, schema: StructType) -> StromStreamReader:
        return StromStreamReader(SourceOptions.parse(dict(self.options), streaming=True), schema, dict(self.options))

    def writer(self, schema: StructType, overwrite: bool):
        from strom.spark.sink import StromBatchWriter

        return StromBatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from strom.spark.sink import StromStreamWriter

        return StromStreamWriter(dict(self.options), schema, overwrite)


def _named_topics(options: dict) -> list[str]:
    """The topics ``subscribe`` or ``assign`` name (none for a pattern): the default subjects' topics."""
    if options.get("subscribe"):
        return sorted({t.strip() for t in str(options["subscribe"]).split(",") if t.strip()})
    if options.get("assign"):
        return sorted({t for t, _ in Subscription(assign=_parse_assign(options["assign"])).assign})
    return []


class _RangeReader:
    """``read`` for batch and streaming: executor-side, stateless, from the partition alone."""

    opts: SourceOptions
    spark_schema: StructType
    typed: TypedOptions

    def _typed_options(self, options: dict) -> None:
        from strom.spark.typed import TypedOptions

        self.typed = TypedOptions.parse(options)

    def read(self, partition: InputPartition):
        from pyspark.sql.pandas.types import to_arrow_schema

        from strom.spark.kafka_io import read_range
        from strom.spark.typed import TypedBatches, schema_ids

        if not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark's stand-in when nothing was planned: no partition to read
        arrow_schema = to_arrow_schema(self.spark_schema, timezone="UTC")
        ids = schema_ids(self.spark_schema)
        if not ids:
            return read_range(self.opts, partition.range, arrow_schema)
        # read as Spark's Kafka columns, then decode keys and values batch by batch
        binary = to_arrow_schema(kafka_schema(self.opts.include_headers), timezone="UTC")
        convert = TypedBatches(self.typed, ids, arrow_schema)
        r = partition.range
        return (convert(batch, r.topic, r.partition) for batch in read_range(self.opts, r, binary))

    def _plan(self, start: Offsets, end: Offsets) -> list[KafkaInputPartition]:
        ranges = [OffsetRange(t, p, start.get((t, p), 0), e) for (t, p), e in sorted(end.items())]
        ranges = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return [KafkaInputPartition(r) for r in ranges]


class StromBatchReader(_RangeReader, DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType, options: dict):
        self.opts = opts
        self.spark_schema = schema
        self._typed_options(options)

    def partitions(self) -> list[KafkaInputPartition]:
        from strom.spark.kafka_io import Admin, data_loss

        admin = Admin(self.opts)
        tps = admin.subscribed()
        if not tps:
            return []
        earliest = admin.offsets(tps, EARLIEST)
        latest = admin.offsets(tps, LATEST)
        start = admin.resolve(self.opts.starting, tps, earliest, latest)
        end = admin.resolve(self.opts.ending, tps, earliest, latest, unspecified=LATEST)
        for tp in tps:
            if start[tp] > end[tp]:
                raise StromOptionError(
                    f"startingOffsets {start[tp]} is after endingOffsets {end[tp]} for {tp[0]}-{tp[1]}"
                )
            if start[tp] < earliest[tp]:
                data_loss(
                    self.opts,
                    f"startingOffsets {start[tp]} of {tp[0]}-{tp[1]} is before the "
                    f"earliest available offset {earliest[tp]}",
                )
            if end[tp] > latest[tp]:
                raise StromOptionError(
                    f"endingOffsets {end[tp]} of {tp[0]}-{tp[1]} is after the latest offset {latest[tp]}"
                )
        return self._plan(start, end)


class StromStreamReader(_RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. It lives in one driver-side Python process for the whole query."""

    def __init__(self, opts: SourceOptions, schema: StructType, options: dict):
        self.opts = opts
        self.spark_schema = schema
        self._typed_options(options)
        self._admin: Admin | None = None
        self._available_now_target: Offsets | None = None

    def __getstate__(self):  # executors get options only, never the driver's client
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    @property
    def admin(self):
        if self._admin is None:
            from strom.spark.kafka_io import Admin

            self._admin = Admin(self.opts)
        return self._admin

    def initialOffset(self) -> dict:
        tps = self.admin.subscribed()
        return offsets_to_json(self.admin.resolve(self.opts.starting, tps))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.admin.subscribed()
        self._available_now_target = self.admin.offsets(tps, LATEST)

    def _latest(self) -> tuple[Offsets, Offsets]:
        """Latest offsets of every subscribed topic-partition, and their earliest offsets."""
        tps = self.admin.subscribed()
        if self._available_now_target is not None:
            tps = [tp for tp in tps if tp in self._available_now_target]
        latest = self.admin.offsets(tps, LATEST)
        if self._available_now_target is not None:
            latest = {tp: min(o, self._available_now_target[tp]) for tp, o in latest.items()}
        return latest, self.admin.offsets(tps, EARLIEST)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        from strom.spark.kafka_io import data_loss

        begin = offsets_from_json(start)
        latest, earliest = self._latest()
        for tp in sorted(set(begin) - set(latest)):
            data_loss(self.opts, f"{tp[0]}-{tp[1]} is gone (topic deleted?) after offset {begin[tp]}")
        origin = {}
        for tp, end in latest.items():
            if tp not in begin:
                origin[tp] = earliest[tp]  # a new partition or topic: read it from the start, as Spark does
                log.info("new topic-partition %s-%d, reading from offset %d", tp[0], tp[1], earliest[tp])
                continue
            origin[tp] = begin[tp]
            if begin[tp] < earliest[tp]:
                data_loss(
                    self.opts,
                    f"Offsets {begin[tp]}..{earliest[tp] - 1} of {tp[0]}-{tp[1]} were deleted before they were read",
                )
                origin[tp] = earliest[tp]
            if end < begin[tp]:
                data_loss(self.opts, f"{tp[0]}-{tp[1]} went back from offset {begin[tp]} to {end} (topic recreated?)")
                origin[tp] = end
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(origin, latest, limit.max_rows)
        # partitions of `begin` that vanished are dropped here (only reached with failOnDataLoss=false)
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self.admin.offsets(self.admin.subscribed(), LATEST))

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        begin = offsets_from_json(start)
        stop = offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin = {**begin, **self.admin.offsets(new, EARLIEST)}
        return self._plan(begin, stop)

    def commit(self, end: dict) -> None:
        """Spark's checkpoint is the source of truth; nothing is committed to the broker."""

    def stop(self) -> None:
        self._admin = None
