"""strom.spark.read_topic: a topic's history from its Iceberg table through Spark's own Parquet
reader (files planned by pyiceberg), and the records past the table's offsets from the log, every
committed record once."""

from __future__ import annotations

import time

from strom.spark import iceberg, read_topic
from tests.iceberg.support import assert_exactly, create_topic, produce, transaction, wait_for_rows
from tests.iceberg.test_translator import ICEBERG, catalog_of
from tests.spark.conftest import translation_off


def spark_rows(df) -> list[dict]:
    return [
        {
            "partition": row.partition,
            "offset": row.offset,
            "timestamp": round(row.timestamp.timestamp() * 1000),
            "headers": [(h.key, None if h.value is None else bytes(h.value)) for h in row.headers or []],
            "key": None if row.key is None else bytes(row.key),
            "value": None if row.value is None else bytes(row.value),
        }
        for row in df.collect()
    ]


def tail_read_by(df) -> str:
    """Where the DataFrame's records past the table come from, as its plan (``df.explain()``) shows:
    ``table only``, ``driver`` (an Arrow table read on the driver) or ``source`` (the strom source)."""
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    if "LocalRelation" in plan:
        return "driver"
    if "RelationV2" in plan and "strom" in plan:
        return "source"
    return "table only"


def test_read_topic_from_the_table_and_past_it_from_the_log(spark, iceberg_broker, monkeypatch):
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "history", 2)
    committed = produce(broker.bootstrap, "history", 400, "a")
    committed |= transaction(broker.bootstrap, "history", 20, "t1", commit=True)
    aborted = transaction(broker.bootstrap, "history", 20, "t2", commit=False)
    wait_for_rows(catalog, "history", len(committed))
    time.sleep(1.0)

    from_table = read_topic(spark, "history", catalog_uri=catalog.uri)
    assert from_table.inputFiles() and all(f.endswith(".parquet") for f in from_table.inputFiles())
    assert_exactly(spark_rows(from_table), committed, aborted)
    assert {row.topic for row in from_table.select("topic").distinct().collect()} == {"history"}
    # the table covers the log's latest committed offsets: nothing past it to read
    covered = read_topic(spark, "history", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
    assert_exactly(spark_rows(covered), committed, aborted)
    assert tail_read_by(covered) == "table only"

    # translation off: what is produced now is only in the log
    translation_off(broker)
    newer = produce(broker.bootstrap, "history", 150, "b")
    aborted |= transaction(broker.bootstrap, "history", 10, "t3", commit=False)
    newer |= transaction(broker.bootstrap, "history", 10, "t4", commit=True)
    both = read_topic(spark, "history", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
    assert_exactly(spark_rows(both), committed | newer, aborted)
    assert tail_read_by(both) == "driver"
    assert from_table.count() == len(committed)  # the table did not move: the newest came from the log
    # the same tail read by the strom source's Spark tasks rather than on the driver
    tasks = read_topic(
        spark, "history", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap, local_tail_records=0
    )
    assert_exactly(spark_rows(tasks), committed | newer, aborted)
    assert tail_read_by(tasks) == "source"
    # a tail too big in bytes for the driver: its read there is dropped, the source's tasks read it
    monkeypatch.setattr(iceberg, "LOCAL_TAIL_BYTES", 1000)
    too_big = read_topic(spark, "history", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
    assert_exactly(spark_rows(too_big), committed | newer, aborted)
    assert tail_read_by(too_big) == "source"


def test_read_topic_of_a_schema_mode_topic_has_typed_values_from_the_table_and_the_log(spark, iceberg_broker):
    from tests.iceberg.avro_support import AvroProducer, registry_url, wait_for_tables
    from tests.iceberg.test_schema_modes import ICEBERG as SCHEMA_ICEBERG
    from tests.iceberg.test_schema_modes import create_topic as create_typed

    broker, catalog = iceberg_broker(SCHEMA_ICEBERG)
    data = broker.data_dir
    create_typed(broker.bootstrap, "typed", "value_schema_id_prefix")
    producer = AvroProducer(broker.bootstrap, registry_url(data), "typed")
    producer.orders(60, version=1)
    producer.flush()
    wait_for_tables(catalog, "typed", 60, 0)  # files of the first version alone, then of the second
    producer.orders(40, version=2, start=60)
    producer.flush()
    producer.bad_records(producer.client.get_version("typed-value", 1).schema_id)
    producer.flush()
    wait_for_tables(catalog, "typed", len(producer.good), len(producer.bad))
    time.sleep(1.0)
    in_table = dict(producer.good)
    assert_typed(read_topic(spark, "typed", catalog_uri=catalog.uri), in_table)

    # translation off: what is produced now is only in the log, decoded on the way as the table is
    translation_off(broker)
    later = AvroProducer(broker.bootstrap, registry_url(data), "typed")
    later.orders(30, version=2, start=100)
    later.orders(10, version=1, start=130)
    later.bad_records(producer.client.get_version("typed-value", 1).schema_id)  # left out, as the table does
    later.flush()
    both = read_topic(
        spark,
        "typed",
        catalog_uri=catalog.uri,
        bootstrap_servers=broker.bootstrap,
        schema_registry_url=registry_url(data),
    )
    assert_typed(both, in_table | later.good)


def assert_typed(df, expected: dict, topic: str = "typed") -> None:
    """Each expected record once, its value a struct of typed columns (null where its version lacks one)."""
    rows = df.collect()
    at = [(row.partition, row.offset) for row in rows]
    assert len(at) == len(set(at)) and set(at) == set(expected), (len(at), len(expected))
    for row in rows:
        want, _version = expected[(row.partition, row.offset)]
        value = row.value
        got = {
            "id": value.id,
            "quantity": value.quantity,
            "price": value.price,
            "tags": list(value.tags),
            "attributes": dict(value.attributes),
            "status": value.status,
            "customer": value.customer.asDict(),
            "note": value.note,
            "day": value.day,
            "amount": value.amount,
            "ref": value.ref,
            "coupon": value.coupon if "coupon" in value.__fields__ else None,  # a v2 column
        }
        assert got == {
            **{k: want[k] for k in got if k not in ("ref", "coupon")},
            "ref": str(want["ref"]),
            "coupon": want.get("coupon"),
        }
        assert round(value.placed.timestamp()) == round(want["placed"].timestamp())
        assert row.topic == topic and bytes(row.key) == f"k{want['id'].rsplit('-', 1)[1]}".encode()


def test_read_topic_of_a_schema_mode_topic_over_sasl_ssl_with_registry_credentials(spark, tmp_path):
    """The newest records come over a SASL_SSL listener (the strom source's kafka.* options) and the
    schemas from a registry that asks for HTTP Basic credentials (schema_registry_config)."""
    from tests.iceberg.avro_support import AvroProducer, registry_url, wait_for_tables
    from tests.iceberg.test_schema_modes import ICEBERG as SCHEMA_ICEBERG
    from tests.iceberg.test_schema_modes import create_topic as create_typed
    from tests.spark.secured_broker import ALICE, sasl_ssl_broker

    data = tmp_path / "data"
    catalog = catalog_of(data)
    alice = {"basic.auth.user.info": ALICE}
    with sasl_ssl_broker(tmp_path, SCHEMA_ICEBERG, data) as (broker, kafka):
        create_typed(broker.bootstrap, "guarded", "value_schema_id_prefix", partitions=1)
        producer = AvroProducer(broker.bootstrap, registry_url(data), "guarded", registry=alice)
        producer.orders(25, version=1)
        producer.flush()
        wait_for_tables(catalog, "guarded", 25, 0)
        time.sleep(1.0)
        in_table = dict(producer.good)
        translation_off(broker)
        later = AvroProducer(broker.bootstrap, registry_url(data), "guarded", registry=alice)
        later.orders(15, version=1, start=25)
        later.flush()
        secure = kafka.pop("kafka.bootstrap.servers")  # read_topic takes it as bootstrap_servers
        for local_tail_records in (100, 0):  # the tail read on the driver, then by the source's tasks
            df = read_topic(
                spark,
                "guarded",
                catalog_uri=catalog.uri,
                bootstrap_servers=secure,
                options=kafka,
                schema_registry_url=registry_url(data),
                schema_registry_config=alice,
                local_tail_records=local_tail_records,
            )
            assert_typed(df, in_table | later.good, topic="guarded")


def test_read_topic_of_a_latest_mode_topic_resolves_the_logs_records_to_the_latest_version(spark, iceberg_broker):
    from tests.iceberg.avro_support import AvroProducer, registry_url, wait_for_tables
    from tests.iceberg.test_schema_modes import ICEBERG as SCHEMA_ICEBERG
    from tests.iceberg.test_schema_modes import create_topic as create_typed

    broker, catalog = iceberg_broker(SCHEMA_ICEBERG)
    data = broker.data_dir
    create_typed(broker.bootstrap, "newest", "value_schema_latest", partitions=1)
    producer = AvroProducer(broker.bootstrap, registry_url(data), "newest")
    producer.orders(20, version=1)
    producer.orders(20, version=2, start=20)
    producer.flush()
    wait_for_tables(catalog, "newest", 40, 0)
    time.sleep(1.0)
    translation_off(broker)
    later = AvroProducer(broker.bootstrap, registry_url(data), "newest")
    later.orders(10, version=1, start=40)  # read as the latest: coupon takes its default, null
    later.orders(10, version=2, start=50)
    later.flush()
    df = read_topic(
        spark,
        "newest",
        catalog_uri=catalog.uri,
        bootstrap_servers=broker.bootstrap,
        schema_registry_url=registry_url(data),
    )
    assert_typed(df, producer.good | later.good, topic="newest")


def test_read_topic_of_a_compacted_partitioned_table(spark, iceberg_broker):
    """After the broker's maintenance compacted a (kafka.partition)-partitioned table's small files,
    read_topic reads the compacted files: every committed record once, from the table and the log."""
    from strom.iceberg.table import identifier, open_catalog

    configs = {
        "iceberg.partition.spec": "(kafka.partition)",
        "iceberg.maintenance.interval.ms": "500",
        "iceberg.compaction.min-input-files": "2",
    }
    broker, catalog = iceberg_broker(ICEBERG)
    create_topic(broker.bootstrap, "compacted", 2, **configs)
    committed: dict = {}
    for round_ in range(5):
        committed |= produce(broker.bootstrap, "compacted", 40, f"r{round_}")
        wait_for_rows(catalog, "compacted", len(committed))

    def files():
        return list(open_catalog(catalog).load_table(identifier("compacted")).scan().plan_files())

    deadline = time.monotonic() + 30
    while len(files()) > 2:  # one file per topic partition once compacted
        assert time.monotonic() < deadline, f"{len(files())} files, not compacted"
        time.sleep(0.2)
    assert sorted(task.file.partition[0] for task in files()) == [0, 1]

    from_table = read_topic(spark, "compacted", catalog_uri=catalog.uri)
    assert len(from_table.inputFiles()) == 2
    assert_exactly(spark_rows(from_table), committed, {})

    translation_off(broker)
    newer = produce(broker.bootstrap, "compacted", 60, "b")
    both = read_topic(spark, "compacted", catalog_uri=catalog.uri, bootstrap_servers=broker.bootstrap)
    assert_exactly(spark_rows(both), committed | newer, {})


def test_read_topic_after_retention_deleted_the_oldest_segments(spark, iceberg_broker):
    """Retention deleted the segments of the records already in the table: they come from the table,
    the newer ones from the log (read on the driver, and by the strom source's tasks), each once."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    from strom.spark.options import EARLIEST, SourceOptions

    broker, catalog = iceberg_broker({**ICEBERG, "log.retention.check.interval.ms": "200"})

    def retention(ms: str) -> None:
        entry = ConfigEntry("retention.ms", ms, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "retained", incremental_configs=[entry])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for done in admin.incremental_alter_configs([resource]).values():
            done.result(30)

    def earliest() -> dict:
        from strom.spark.kafka_io import Admin

        opts = SourceOptions.parse(
            {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "retained"}, streaming=False
        )
        admin = Admin(opts)
        return admin.offsets(admin.subscribed(), EARLIEST)

    create_topic(broker.bootstrap, "retained", 2, **{"segment.bytes": "1024"})
    committed = produce(broker.bootstrap, "retained", 300, "a", **{"linger.ms": 0, "batch.num.messages": 5})
    wait_for_rows(catalog, "retained", len(committed))
    retention("1")
    deadline = time.monotonic() + 60
    while not all(offset > 0 for offset in earliest().values()):
        assert time.monotonic() < deadline, f"retention deleted no segment: earliest offsets {earliest()}"
        time.sleep(0.2)
    retention("604800000")  # the newer records stay in the log

    translation_off(broker)
    newer = produce(broker.bootstrap, "retained", 120, "b")
    assert all(offset > 0 for offset in earliest().values())  # the oldest records are in the table only
    for local_tail_records, read_by in ((100_000, "driver"), (0, "source")):
        df = read_topic(
            spark,
            "retained",
            catalog_uri=catalog.uri,
            bootstrap_servers=broker.bootstrap,
            local_tail_records=local_tail_records,
        )
        assert_exactly(spark_rows(df), committed | newer, {})
        assert tail_read_by(df) == read_by
